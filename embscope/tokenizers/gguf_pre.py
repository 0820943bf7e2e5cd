"""tokenizer.ggml.pre: how llama.cpp cuts text into words before the merges of a GGUF `gpt2` (byte-level BPE)
vocabulary, for every pre-tokenizer name it knows, and that cutting run as llama.cpp runs it.

The tables are data copied from llama.cpp's src/llama-vocab.cpp at commit 0c1e57098 (the copy that
llama-cpp-python 0.3.36 vendors): NAMES from `llama_vocab::impl::load` (tokenizer.ggml.pre ->
LLAMA_VOCAB_PRE_TYPE_*, and whether the type sets ignore_merges: a word that is a token of its own is taken
whole), SPLITS from `llm_tokenizer_bpe::llm_tokenizer_bpe` (each type's regex_exprs, as C++ string literals:
Python reads those escapes the same way). A name llama.cpp does not know makes it refuse the file ("unknown
pre-tokenizer type"); a file that names none it splits as "default", with a warning.

How llama.cpp runs them (src/unicode.cpp, unicode_regex_split), imitated by `LlamaSplit`:
- the regexes apply in turn, each to the pieces the one before left; text between two matches stays a piece
  of its own (nothing is dropped);
- C++'s std::regex cannot read \\p{..}, so a regex that names a category runs on a "collapsed" text: each
  non-ASCII character becomes one byte for its category (letter 0xD2, number 0xD1, punctuation 0xD3, mark
  0xD4, symbol 0xD5, whitespace 0x0B, other 0xD0) and \\p{L} becomes [\\xD2A-Za-z] and so on. So \\p{Lu}, \\p{Ll},
  \\p{Lt}, \\p{Lm} and \\p{Lo} all mean any letter (Tiny Aya and Youtu cut "HelloWorld" whole);
- \\d, \\w and \\b are ASCII only (std::regex), and \\s matches every Unicode space (they become 0x0B);
- two regexes are not regexes there but names of hand-written code, imitated below (`group_digits`): AFMoE's
  \\p{AFMoE_digits} and Tiny Aya's \\d{1,3}(?=(?:\\d{3})*\\b) both cut digit runs into threes from the right,
  the text before a run going with its first group.
llama.cpp's hand-written splitters for the GPT-2, Llama 3, Qwen2, Qwen3.5 and newline regexes cut as those
regexes do, so the regexes stand for them here. Not imitated: the types in NOT_RUN, which llama.cpp splits with
hand-written code of their own or without GPT-2's byte alphabet; a GGUF naming one of them gets a note, and words
are not encoded. Python's Unicode tables (unicodedata) stand for llama.cpp's (unicode-data.cpp): a character
newer than Python's is "other" here.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from embscope.tokenizers.split import compile_split_pattern

SOURCE = "llama.cpp src/llama-vocab.cpp at 0c1e57098"
# the source of the tables below was checked against llama.cpp itself (llama-cpp-python 0.3.36) on every name

# (LLAMA_VOCAB_PRE_TYPE_* without the prefix, ...) -> regex_exprs, in llm_tokenizer_bpe's order
_SPLITS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("LLAMA3",), (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("JAIS2",), (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    )),
    (("DBRX", "SMAUG"), (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("DEEPSEEK_LLM",), (
        "[\r\n]",
        "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
        "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
        "\\s+$",
        "[一-龥ࠀ-一가-퟿]+",
        "\\p{N}+",
    )),
    (("DEEPSEEK3_LLM", "HUNYUAN_DENSE", "JOYAI_LLM", "HY_V4"), (
        "\\p{N}{1,3}",
        "[一-龥぀-ゟ゠-ヿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("SPARK2_5",), (
        "\\p{N}{1,3}",
        "[一-龥぀-ゟ゠-ヿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
        "\\p{N}",
    )),
    (("YOUTU",), (
        "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("DEEPSEEK_CODER",), (
        "[\r\n]",
        "\\s?\\p{L}+",
        "\\s?\\p{P}+",
        "[一-龥ࠀ-一가-퟿]+",
        "\\p{N}",
    )),
    (("FALCON",), (
        "[\\p{P}\\$\\+<=>\\^~\\|`]+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        "[0-9][0-9][0-9]",
    )),
    (("STARCODER", "REFACT", "COMMAND_R", "SMOLLM", "CODESHELL", "EXAONE", "MINERVA", "MELLUM2"), (
        "\\p{N}",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    )),
    (("GPT2", "MPT", "OLMO", "JAIS", "TRILLION", "GRANITE_DOCLING"), (
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    )),
    (("STABLELM2", "QWEN2", "HUNYUAN", "SOLAR_OPEN"), (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("QWEN35",), (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("PORO", "BLOOM", "GPT3_FINNISH"), (
        " ?[^(\\s|.,!?…。，、।۔،)]+",
    )),
    (("CHATGLM4",), (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("VIKING",), (
        " ?[^(\\s|.,!?…。，、।۔،)]+",
        "\\p{N}",
    )),
    (("TEKKEN",), (
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("CHAMELEON",), (
        "<sentinel:[0-9]+>",
        "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
        "([\\t\\n]|    |  )",
        "\\p{N}",
        "[\\p{P}!-/:-@\\[-`{-~]",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    )),
    (("GPT4O", "MINIMAX_M2"), (
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("GRANITE_EMB_MULTI",), (
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("TINY_AYA",), (
        "\\d{1,3}(?=(?:\\d{3})*\\b)",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("KIMI_K2",), (
        "\\p{Han}+",
    )),
    (("SUPERBPE",), (
        "\\p{N}+",
        "(?=(\\d{3})+(?!\\d))",
    )),
    (("BAILINGMOE",), (
        "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    )),
    (("SEED_CODER",), (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("UFAKZEKA",), (
        "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("GROK_2",), (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("AFMOE",), (
        "\\p{AFMoE_digits}",
        "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("LAGUNA",), (
        "[^\\n]+|[\\n]+",
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("EXAONE_MOE",), (
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    )),
    (("GEMMA4",), (
        "[^\\n]+|[\\n]+",
    )),
    (("SARVAM_MOE",), (
        "[^\\n]+|[\\n]+",
    )),
    (("MINICPM5",), (
        "\\p{N}{1,3}",
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    )),
    (("WHITESPACE",), (
        "\\S+",
    )),
    (("DEFAULT",), (
        "[\\p{P}\\$\\+<=>\\^~\\|]+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        "\\p{N}+",
        "[0-9][0-9][0-9]",
    )),
)
SPLITS: dict[str, tuple[str, ...]] = {kind: patterns for kinds, patterns in _SPLITS for kind in kinds}

# tokenizer.ggml.pre -> (LLAMA_VOCAB_PRE_TYPE_* without the prefix, ignore_merges), in llama_vocab::impl::load's order
NAMES: dict[str, tuple[str, bool]] = {
    "default": ("DEFAULT", False),
    "minicpm5": ("MINICPM5", True),
    "llama3": ("LLAMA3", True),
    "llama-v3": ("LLAMA3", True),
    "llama-bpe": ("LLAMA3", True),
    "falcon3": ("LLAMA3", True),
    "falcon-h1": ("LLAMA3", True),
    "pixtral": ("LLAMA3", True),
    "midm-2.0": ("LLAMA3", True),
    "lfm2": ("LLAMA3", True),
    "jina-v5-nano": ("LLAMA3", True),
    "deepseek-llm": ("DEEPSEEK_LLM", False),
    "deepseek-coder": ("DEEPSEEK_CODER", False),
    "deepseek-v3": ("DEEPSEEK3_LLM", False),
    "spark2_5": ("SPARK2_5", False),
    "youtu": ("YOUTU", True),
    "falcon": ("FALCON", False),
    "mpt": ("MPT", False),
    "starcoder": ("STARCODER", False),
    "gpt-2": ("GPT2", False),
    "phi-2": ("GPT2", False),
    "jina-es": ("GPT2", False),
    "jina-de": ("GPT2", False),
    "gigachat": ("GPT2", False),
    "jina-v2-es": ("GPT2", False),
    "jina-v2-de": ("GPT2", False),
    "a.x-4.0": ("GPT2", False),
    "mellum": ("GPT2", False),
    "modern-bert": ("GPT2", False),
    "jais-2": ("JAIS2", False),
    "gemma4": ("GEMMA4", False),
    "granite-embed-multi-311m": ("GEMMA4", False),
    "sarvam-moe": ("SARVAM_MOE", False),
    "jina-v1-en": ("GPT2", False),
    "jina-v2-code": ("GPT2", False),
    "roberta-bpe": ("GPT2", False),
    "whitespace": ("WHITESPACE", False),
    "refact": ("REFACT", False),
    "command-r": ("COMMAND_R", False),
    "qwen2": ("QWEN2", False),
    "deepseek-r1-qwen": ("QWEN2", False),
    "kormo": ("QWEN2", False),
    "f2llmv2": ("QWEN2", False),
    "qwen35": ("QWEN35", False),
    "stablelm2": ("STABLELM2", False),
    "olmo": ("OLMO", False),
    "dbrx": ("DBRX", False),
    "smaug-bpe": ("SMAUG", False),
    "poro-chat": ("PORO", False),
    "chatglm-bpe": ("CHATGLM4", False),
    "glm4": ("CHATGLM4", True),
    "glm5": ("CHATGLM4", True),
    "viking": ("VIKING", False),
    "jais": ("JAIS", False),
    "tekken": ("TEKKEN", True),
    "smollm": ("SMOLLM", False),
    "codeshell": ("CODESHELL", False),
    "bloom": ("BLOOM", False),
    "gpt3-finnish": ("GPT3_FINNISH", False),
    "exaone": ("EXAONE", False),
    "exaone4": ("GPT2", False),
    "exaone-moe": ("EXAONE_MOE", False),
    "chameleon": ("CHAMELEON", False),
    "minerva-7b": ("MINERVA", False),
    "megrez": ("QWEN2", False),
    "gpt-4o": ("GPT4O", False),
    "llama4": ("GPT4O", False),
    "kanana2": ("GPT4O", False),
    "talkie": ("GPT4O", False),
    "granite-embed-multi-97m": ("GRANITE_EMB_MULTI", True),
    "tiny_aya": ("TINY_AYA", False),
    "cohere2moe": ("TINY_AYA", False),
    "superbpe": ("SUPERBPE", False),
    "trillion": ("TRILLION", False),
    "granite-docling": ("GRANITE_DOCLING", False),
    "bailingmoe": ("BAILINGMOE", False),
    "bailingmoe2": ("BAILINGMOE", False),
    "llada-moe": ("BAILINGMOE", False),
    "seed-coder": ("SEED_CODER", False),
    "hunyuan": ("HUNYUAN", False),
    "hunyuan-dense": ("HUNYUAN_DENSE", False),
    "hy_v4": ("HY_V4", False),
    "joyai-llm": ("JOYAI_LLM", False),
    "kimi-k2": ("KIMI_K2", False),
    "ufakzeka": ("UFAKZEKA", False),
    "grok-2": ("GROK_2", False),
    "afmoe": ("AFMOE", False),
    "laguna": ("LAGUNA", False),
    "minimax-m2": ("MINIMAX_M2", False),
    "solar-open": ("SOLAR_OPEN", False),
    "mellum2": ("MELLUM2", False),
}
MISSING = "default"  # what llama.cpp uses when the file names no pre-tokenizer

# types whose cutting embscope does not imitate, and why
NOT_RUN: dict[str, str] = {
    "KIMI_K2": "llama.cpp cuts it with hand-written code (unicode_regex_split_custom_kimi_k2)",
    "GEMMA4": "it merges raw UTF-8 with spaces as \u2581, not GPT-2's byte alphabet",
    "SARVAM_MOE": "it merges raw UTF-8 with spaces as \u2581, not GPT-2's byte alphabet",
    "WHITESPACE": "it merges raw UTF-8, not GPT-2's byte alphabet",
}

# unicode.cpp's k_ucat_enum, k_ucat_cpt and k_ucat_map: each category's byte in the collapsed text, and the
# ASCII characters of that category, as they stand inside a [...] of the collapsed regex
_CATEGORY_CLASSES = {
    "N": "\xd1" + "0-9",
    "L": "\xd2" + "A-Za-z",
    "P": "\xd3" + "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}",
    "M": "\xd4",
    "S": "\xd5" + "\\$\\+<->^`\\|\\~",
}
_CATEGORY_NAMES = {"\\p{N}": "N", "\\p{L}": "L", "\\p{P}": "P", "\\p{M}": "M", "\\p{S}": "S",
                   "\\p{Lu}": "L", "\\p{Ll}": "L", "\\p{Lt}": "L", "\\p{Lm}": "L", "\\p{Lo}": "L"}
_COLLAPSED_BYTE = {"N": "\xd1", "L": "\xd2", "P": "\xd3", "M": "\xd4", "S": "\xd5"}
_OTHER = "\xd0"
_SPACE = "\x0b"
# unicode-data.cpp's unicode_set_whitespace (Unicode's White_Space)
WHITESPACE = frozenset([*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
                        0x202F, 0x205F, 0x3000])


@dataclass(frozen=True)
class PreTokenizer:
    """One tokenizer.ggml.pre name as llama.cpp reads it."""

    name: str
    kind: str  # LLAMA_VOCAB_PRE_TYPE_* without the prefix
    patterns: tuple[str, ...]
    ignore_merges: bool


def lookup(name: str | None) -> PreTokenizer | None:
    """The pre-tokenizer a file names (None: it names none, and llama.cpp uses "default"); None when
    llama.cpp does not know the name."""
    name = MISSING if name is None else name
    if name not in NAMES:
        return None
    kind, ignore_merges = NAMES[name]
    return PreTokenizer(name, kind, SPLITS[kind], ignore_merges)


def collapse_pattern(pattern: str) -> str:
    """unicode_regex_split's rewriting of a regex that names categories, for the collapsed text."""
    out: list[str] = []
    inside = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "[" and (i == 0 or pattern[i - 1] != "\\"):
            inside = True
        elif inside and char == "]" and pattern[i - 1] != "\\":
            inside = False
        elif pattern.startswith("\\p{", i) and i + 3 < len(pattern):
            close = pattern.find("}", i + 3)
            name = pattern[i:close + 1] if 0 <= close <= i + 10 else ""
            if name in _CATEGORY_NAMES:
                members = _CATEGORY_CLASSES[_CATEGORY_NAMES[name]]
                out.append(members if inside else f"[{members}]")
                i = close + 1
                continue
        out.append(char)
        i += 1
    return "".join(out)


def names_category(pattern: str) -> bool:
    return any(name in pattern for name in _CATEGORY_NAMES)


@functools.lru_cache(maxsize=65536)
def _collapsed_char(char: str) -> str:
    point = ord(char)
    if point < 0x80:
        return char
    if point in WHITESPACE:
        return _SPACE
    return _COLLAPSED_BYTE.get(unicodedata.category(char)[0], _OTHER)


def collapse_text(text: str) -> str:
    """One character per code point: ASCII as it is, any other by its category (unicode_regex_split)."""
    return "".join(map(_collapsed_char, text))


def wide_text(text: str) -> str:
    """The text std::wregex sees: non-ASCII spaces become 0x0B, which its \\s matches."""
    return "".join(_SPACE if ord(char) > 0x7F and ord(char) in WHITESPACE else char for char in text)


def group_digits(text: str) -> list[str]:
    """unicode_regex_split_custom_afmoe: each run of digits (\\p{N}) cut into threes from the right, its first
    group of one or two taking along the text since the last piece; the text after the last run is a piece."""
    pieces: list[str] = []
    start = position = 0
    while position < len(text):
        if _collapsed_char(text[position]) not in "0123456789\xd1":
            position += 1
            continue
        run = position
        while position < len(text) and _collapsed_char(text[position]) in "0123456789\xd1":
            position += 1
        current = run + (position - run) % 3  # the leading one or two digits, then threes
        if current == run:
            current += 3
        while current <= position:
            pieces.append(text[start:current])
            start, current = current, current + 3
    if start < len(text):
        pieces.append(text[start:])
    return pieces


# regexes llama.cpp hands to code of its own (unicode_regex_split_custom) that cuts otherwise than std::regex would
HAND_WRITTEN = {"\\p{AFMoE_digits}": group_digits, "\\d{1,3}(?=(?:\\d{3})*\\b)": group_digits}


class LlamaSplit:
    """llama.cpp's unicode_regex_split over one pre-tokenizer's regexes: ``words(text)`` is the list of
    pieces the BPE merges then run on, in order; joined, they are the text."""

    def __init__(self, pre: PreTokenizer):
        where = f"llama.cpp's {pre.name!r} pre-tokenizer"
        self._steps: list[tuple[bool, Callable[[str], list[str]]]] = []
        for pattern in pre.patterns:
            collapsed = names_category(pattern)
            if pattern in HAND_WRITTEN:
                self._steps.append((False, HAND_WRITTEN[pattern]))
            else:
                compiled = compile_split_pattern(collapse_pattern(pattern) if collapsed else pattern, where,
                                                 ascii_classes=True)
                self._steps.append((collapsed, compiled.pieces))
        self._collapses = any(collapsed for collapsed, _ in self._steps)

    def words(self, text: str) -> list[str]:
        if not text:
            return []
        collapsed = collapse_text(text) if self._collapses else ""
        wide = wide_text(text)
        spans = [(0, len(text))]
        for is_collapsed, cut_piece in self._steps:
            seen = collapsed if is_collapsed else wide
            cut: list[tuple[int, int]] = []
            for start, end in spans:
                position = start
                for piece in cut_piece(seen[start:end]):
                    cut.append((position, position + len(piece)))
                    position += len(piece)
            spans = cut
        return [text[start:end] for start, end in spans]
