"""tokenizer.ggml.pre: the table of llama.cpp's pre-tokenizers (gguf_pre.py) and the way llama.cpp applies them.

References: every pattern list, split the way llama.cpp applies it (each regex in turn over the pieces the last
one left, text between matches kept as a piece), compared with the `regex` package running the same patterns
with Unicode's meaning, and with the tokenizers library's Split("isolated") pre-tokenizers; where llama.cpp reads
a regex otherwise than Unicode does, the test works the llama.cpp answer out by hand from src/unicode.cpp."""

from __future__ import annotations

import pytest
import regex
from tokenizer_corpus import SAMPLE

from embscope.tokenizers import gguf_pre
from embscope.tokenizers.gguf_pre import NAMES, NOT_RUN, SPLITS, LlamaSplit, PreTokenizer, lookup

RUN = sorted(kind for kind in SPLITS if kind not in NOT_RUN)
REGEX_ONLY = [kind for kind in RUN if kind != "AFMOE"]  # AFMoE's first regex is a name for hand-written code

# (type, text): llama.cpp cuts these otherwise than the regexes read with Unicode's meaning, for the reasons the
# tests below work out: \p{Lu}..\p{Lo} all mean "a letter" in the collapsed text, \d is ASCII in std::regex, and
# Tiny Aya's digit regex is hand-written code there
LLAMA_CPP_READS_OTHERWISE = {
    **{(kind, text): "\\p{Lu} is any letter" for kind in ("YOUTU", "TINY_AYA") for text in ("HelloWorld", "camelCaseWords")},
    ("SUPERBPE", "١٢٣٤٥ and ٣"): "\\d is ASCII",
    ("TINY_AYA", SAMPLE[-1]): "every digit run in threes from the right: 1314151 is 1 314 151, not 131 415 1",
    # std::wregex is handed the text with every non-ASCII space as 0x0B (gguf_pre.wide_text), so the third regex's
    # class [\u3000-\u3002] never sees U+3000 and '\u3000ideographic' stays whole; the ids of both DeepSeek files
    # equal llama.cpp's own on this text (llama-cpp-python 0.3.36, llama.cpp 0c1e57098)
    **{(kind, "\u00a0nbsp\u3000ideographic\u2028line\x1cfile-sep\x85next"): "U+3000 is 0x0B to std::wregex"
       for kind in ("DEEPSEEK_LLM", "DEEPSEEK_CODER")},
}


def unicode_split(patterns: tuple[str, ...], text: str) -> list[str]:
    """The patterns applied as llama.cpp applies them, each read by `regex` with Unicode's meaning."""
    pieces = [text]
    for pattern in patterns:
        compiled, out = regex.compile(pattern), []
        for piece in pieces:
            end = 0
            for match in compiled.finditer(piece):
                if match.start() > end:
                    out.append(piece[end:match.start()])
                if match.end() > match.start():
                    out.append(match.group())
                end = match.end()
            if end < len(piece):
                out.append(piece[end:])
        pieces = out
    return pieces


def split(kind: str) -> LlamaSplit:
    return LlamaSplit(PreTokenizer(kind.lower(), kind, SPLITS[kind], False))


def test_every_name_llama_cpp_knows_has_its_type_and_regexes():
    # the names the issue lists, among the 91 of llama.cpp at 0c1e57098
    for name in ("llama-bpe", "llama3", "qwen2", "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon", "mpt",
                 "starcoder", "gpt-2", "refact", "command-r", "stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat",
                 "chatglm-bpe", "viking", "jais", "tekken", "smollm", "codeshell", "bloom", "gpt3-finnish", "exaone",
                 "chameleon", "minerva-7b", "gpt-4o", "superbpe", "trillion", "bailingmoe", "llama4", "pixtral",
                 "seed-coder", "default"):
        assert name in NAMES, name
    assert len(NAMES) == 91
    assert {kind for kind, _ in NAMES.values()} == set(SPLITS)
    assert set(NOT_RUN) <= set(SPLITS)
    # as llama_vocab::impl::load sets them
    assert NAMES["llama-bpe"] == ("LLAMA3", True) and NAMES["tekken"] == ("TEKKEN", True)
    assert NAMES["qwen2"] == ("QWEN2", False) and NAMES["llama4"] == ("GPT4O", False)
    assert lookup(None) == lookup("default") and lookup("gpt2") is None  # llama.cpp's name is "gpt-2"


def test_the_patterns_are_llama_cpps_as_written():
    # spot checks against src/llama-vocab.cpp, typed from the C++ source
    assert SPLITS["GPT2"] == (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",)
    assert SPLITS["LLAMA3"] == ((r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"
                                 r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),)
    assert SPLITS["DEFAULT"] == (r"[\p{P}\$\+<=>\^~\|]+", SPLITS["GPT2"][0], r"\p{N}+", "[0-9][0-9][0-9]")
    assert SPLITS["DEEPSEEK_LLM"][0] == "[\r\n]" and SPLITS["SUPERBPE"] == (r"\p{N}+", r"(?=(\d{3})+(?!\d))")


@pytest.mark.parametrize("kind", REGEX_ONLY)
def test_patterns_compile_and_cut_the_sample_as_the_regex_reads(kind):
    cutter = split(kind)
    for text in SAMPLE:
        words = cutter.words(text)
        assert "".join(words) == text and all(words)
        if (kind, text) not in LLAMA_CPP_READS_OTHERWISE:
            assert words == unicode_split(SPLITS[kind], text), (kind, text)
        else:
            assert words != unicode_split(SPLITS[kind], text), (kind, text)  # the reason below still holds


@pytest.mark.parametrize("kind", ["LLAMA3", "QWEN2", "GPT2", "DEFAULT", "DEEPSEEK_LLM", "DEEPSEEK3_LLM", "TEKKEN",
                                  "GPT4O", "STARCODER", "FALCON", "BLOOM", "CHAMELEON", "SUPERBPE", "JAIS2",
                                  "SEED_CODER", "EXAONE_MOE", "BAILINGMOE", "CHATGLM4", "VIKING", "MINICPM5"])
def test_the_tokenizers_library_cuts_the_sample_alike(kind):
    from tokenizers import Regex, pre_tokenizers
    library = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(p), "isolated") for p in SPLITS[kind]])
    cutter = split(kind)
    for text in SAMPLE:
        if (kind, text) not in LLAMA_CPP_READS_OTHERWISE:
            assert cutter.words(text) == [piece for piece, _ in library.pre_tokenize_str(text)], (kind, text)


def test_llama_cpp_collapses_categories():
    # each category becomes its byte plus its ASCII members (unicode.cpp's k_ucat_map); "~" is a symbol there too
    assert gguf_pre.collapse_pattern("\\p{S}") == "[\xd5\\$\\+<->^`\\|\\~]"
    assert gguf_pre.collapse_pattern("[^\\s\\p{L}]") == "[^\\s\xd2A-Za-z]"
    assert gguf_pre.collapse_text("aé 1\u3000٣🙂\u0301") == "a\xd2 1\x0b\xd1\xd5\xd4"
    assert split("DEEPSEEK3_LLM").words("x ~~ y") == ["x", " ~~", " y"]


def test_llama_cpp_reads_every_letter_class_as_any_letter():
    # Tiny Aya's second regex wants [\p{Lu}..]*[\p{Ll}..]+: "World" would start a piece of its own, but collapsed
    # both classes are [\xd2A-Za-z...], so the word is taken whole
    assert split("TINY_AYA").words("HelloWorld") == ["HelloWorld"]
    assert unicode_split(SPLITS["TINY_AYA"], "HelloWorld") == ["Hello", "World"]
    # the adapted GPT-4o and Tekken regexes spell case with [^a-z] and [^A-Z], which collapsing leaves alone
    assert split("GPT4O").words("HelloWorld") == ["Hello", "World"] == split("TEKKEN").words("HelloWorld")


def test_digits_are_ascii_to_std_regex_and_grouped_by_hand_written_code():
    # SuperBPE cuts digit runs into threes from the right with (?=(\d{3})+(?!\d)): ASCII digits only
    assert split("SUPERBPE").words("x 1234567") == ["x ", "1", "234", "567"]
    assert split("SUPERBPE").words("١٢٣٤") == ["١٢٣٤"]
    # Tiny Aya's and AFMoE's digit regexes are unicode_regex_split_custom_afmoe: \p{N} runs in threes from the
    # right, the text before a run going with its first group
    assert gguf_pre.group_digits("ab1234 x12") == ["ab1", "234", " x12"]
    assert gguf_pre.group_digits("١٢٣٤") == ["١", "٢٣٤"] and gguf_pre.group_digits("no digits") == ["no digits"]
    assert split("TINY_AYA").words("1314151天") == ["1", "314", "151", "天"]
    assert split("AFMOE").words("x 1234") == ["x", " ", "1", "234"]


def test_non_ascii_spaces_are_spaces_to_std_regex():
    # llama.cpp maps U+3000 to 0x0B before std::wregex runs, so BLOOM's [^(\s|...)]+ stops at it
    assert split("BLOOM").words("a\u3000b") == ["a", "\u3000", "b"]


def test_types_embscope_does_not_run_are_named():
    assert set(NOT_RUN) == {"KIMI_K2", "GEMMA4", "SARVAM_MOE", "WHITESPACE"}
    assert all(NOT_RUN.values())
