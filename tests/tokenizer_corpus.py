"""The texts every tokenizer kind is checked on against its reference library: a fixed sample of the scripts and
spacings real inputs carry, and a hypothesis strategy of generated strings. One corpus for every reference test,
so a kind cannot pass on easier text than another."""

from __future__ import annotations

from hypothesis import strategies as st

# words as `similarity` looks them up, then sentences, then the spacing and scripts that break hand-written merges
SAMPLE: tuple[str, ...] = (
    "dog", "cat", "queen", "tokenizer", "embedding", "Hello world", "hello", " hello", "the", " the",
    "The quick brown fox jumps over the lazy dog.",
    "Grüße aus München: Äpfel, Öl und Übermut.",
    "straße", "naïve café", "日本語のテキスト", "中文分词测试", "한국어 문장",
    "emoji 🙂 and 👩‍💻 and 🇩🇪", "def f(x):\n    return x ** 2  # square",
    "for (int i = 0; i < n; ++i) { a[i] = i; }",
    "3.14159 and 2718281828 and 1,000,000", "2024-12-01", "0x7fff", "a1b2c3",
    "two  spaces", "three   spaces", "    four leading", "trailing   ", "tab\there", "\t\tdouble tab",
    "line\nbreak", "\n\nblank lines\n", "mixed \t\n whitespace", "  ", " ", "\n",
    "I'm", "don't", "they'll", "we've", "'quoted'", "\"double\"", "end.", "...", "?!",
    "ÀÉÎÕÜ", "Ελληνικά", "русский текст", "עברית", "العربية", "हिन्दी",
    # the texts GPT-2's split pattern and hand-written merge loops got wrong before: odd spaces and separators,
    # contractions, digits and letters outside ASCII, a combining accent, a word over BERT's 100 characters
    "\u00a0nbsp\u3000ideographic\u2028line\x1cfile-sep\x85next", "I'll can't we've they're 'S 's", "x² ½ Ⅻ ١٢٣ 1234567",
    "__init__ snake_case", "e\u0301 cafe\u0301", "<|endoftext|> <s> [CLS] <unk>",
    "a<|endoftext|><|endoftext|>b <|endoftext", "supercalifragilistic" * 6, "",
    # where llama.cpp's pre-tokenizer regexes read otherwise than Unicode does (case classes, "~", digits)
    "HelloWorld", "camelCaseWords", "~tilde~ ~~", "x ~~ y", "١٢٣٤٥ and ٣", "12345678",
    # llama.cpp's convert_hf_to_gguf_update.py tells pre-tokenizers apart with this text (chktxt)
    ("\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 "
    "333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= "
    "нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure "
     "I'll make it, 'D you like some tea? We'Ve a'lL"),
)

# generated strings: printable text of every script, with the whitespace runs the sample holds
TEXTS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=24)
