"""Every tokenizer kind gives the ids its own ecosystem gives, id for id, on one corpus (tokenizer_corpus.py: the
fixed SAMPLE and the generated TEXTS). Each vocabulary is made here by its real writer (the tokenizers trainers
and save, SentencePieceTrainer, tiktoken's trainer and dump_tiktoken_bpe, pickle, json.dump), and the reference
is the library that reads it for the model: tokenizers, sentencepiece, tiktoken. Where a kind has no library
(minbpe, Harris, nanoGPT's meta.pkl, a character map) the reference is its published algorithm restated plainly
here. Where embscope keeps a hand-written path for a missing extra (GPT-2 files without tokenizers), that path is
run with the library hidden and compared with the reference too. GGUF vocabularies: test_gguf*.py."""

from __future__ import annotations

import io
import itertools
import json
import os
import pickle
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from tokenizer_corpus import SAMPLE, TEXTS

from embscope.core.errors import TokenError
from embscope.lookup import lookup_word
from embscope.tokenizers import load_tokenizer
from embscope.tokenizers.vocabulary_list import load_vocabulary_list

ROOT = Path(__file__).resolve().parents[1]
# what the vocabularies are trained on: the sample's scripts, so that most of it has merges and pieces
TRAINING = [*SAMPLE, "The dog bites the man. The man bites the dog!", "A dog and a cat; dogs and cats.",
            "Hello world, hello tokenizer: embedding queens and kings."] * 4
# a few examples a kind in the suite; EMBSCOPE_REFERENCE_EXAMPLES=2000 for a long hunt (a separate CI step)
GENERATED = settings(max_examples=int(os.environ.get("EMBSCOPE_REFERENCE_EXAMPLES", "25")), deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])


@dataclass
class Case:
    """embscope's tokenizer for a vocabulary, and the reference's ids for a text (raising where the reference
    cannot encode it: then embscope must refuse too)."""

    ours: object
    reference: Callable[[str], list[int]]
    refused: tuple[type[BaseException], ...] = ()  # what the reference raises for a text it cannot encode
    may_refuse: bool = False  # embscope may refuse a text the reference encodes (never give other ids)

    def check(self, text: str) -> None:
        try:
            expected = self.reference(text)
        except self.refused:
            with pytest.raises(TokenError):
                self.ours.encode(text)
            return
        try:
            found = self.ours.encode(text)
        except TokenError:
            if self.may_refuse:
                return
            raise
        assert found == expected, text


# ---------------------------------------------------------------- tokenizers: tokenizer.json, vocab.txt, GPT-2 files


def hf_reference(path: Path) -> Callable[[str], list[int]]:
    from tokenizers import Tokenizer

    library = Tokenizer.from_file(str(path))
    return lambda text: library.encode(text, add_special_tokens=False).ids


BUILDERS: dict[str, Callable[..., Case]] = {}


def builds(*names: str) -> Callable[[Callable[..., Case]], Callable[..., Case]]:
    """Register a builder of the Case for each name (`kind` or `kind:variant`); it takes (directory, variant)."""
    def register(build: Callable[..., Case]) -> Callable[..., Case]:
        for name in names:
            BUILDERS[name] = build
        return build
    return register


@builds("byte_level_bpe")
def byte_level_bpe(directory: Path, variant: str) -> Case:
    """GPT-2's layout in a tokenizer.json: ByteLevel pre-tokenizer and decoder, a template adding <|endoftext|>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    path = directory / "tokenizer.json"
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(TRAINING, trainers.BpeTrainer(vocab_size=500, special_tokens=["<|endoftext|>"],
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                         show_progress=False))
    hf.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>",
                                                      special_tokens=[("<|endoftext|>", 0)])
    hf.save(str(path))
    return Case(load_tokenizer(path), hf_reference(path))


@builds("sentencepiece_style_bpe")
def sentencepiece_style_bpe(directory: Path, variant: str) -> Case:
    """Llama's layout in a tokenizer.json: "▁" for spaces by the normalizer, a BPE model with <unk> and byte
    fallback (<0x00>..<0xFF> in the vocabulary), the ByteFallback decoder."""
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers

    path = directory / "tokenizer.json"
    trained = Tokenizer(models.BPE(unk_token="<unk>"))
    trained.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trained.train_from_iterator(TRAINING, trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"],
                                                              max_token_length=8, show_progress=False))
    model = json.loads(trained.to_str())["model"]
    vocab = dict(model["vocab"])
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    hf = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) if isinstance(m, list) else tuple(m.split(" "))
                                                   for m in model["merges"]],
                              unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    hf.normalizer = trained.normalizer
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    hf.add_special_tokens(["<unk>", "<s>", "</s>"])
    hf.save(str(path))
    return Case(load_tokenizer(path), hf_reference(path))


@builds("wordpiece_json")
def wordpiece_json(directory: Path, variant: str) -> Case:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    path = directory / "tokenizer.json"
    hf = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=False)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.decoder = decoders.WordPiece()
    hf.train_from_iterator(TRAINING, trainers.WordPieceTrainer(
        vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    hf.post_processor = processors.BertProcessing(("[SEP]", hf.token_to_id("[SEP]")),
                                                  ("[CLS]", hf.token_to_id("[CLS]")))
    hf.save(str(path))
    return Case(load_tokenizer(path), hf_reference(path))


@builds("unigram_json")
def unigram_json(directory: Path, variant: str) -> Case:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    path = directory / "tokenizer.json"
    hf = Tokenizer(models.Unigram())
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    hf.train_from_iterator(TRAINING, trainers.UnigramTrainer(vocab_size=300, special_tokens=["<unk>"],
                                                             unk_token="<unk>", show_progress=False))
    hf.save(str(path))
    return Case(load_tokenizer(path), hf_reference(path))


def bert_vocab(directory: Path, lowercase: bool, **normalizer: bool) -> Path:
    from tokenizers import BertWordPieceTokenizer

    trainer = BertWordPieceTokenizer(lowercase=lowercase, **normalizer)
    trainer.train_from_iterator(TRAINING, vocab_size=400, show_progress=False)
    trainer.save_model(str(directory))
    return directory / "vocab.txt"


# transformers' BertTokenizer settings in tokenizer_config.json (save_pretrained writes them all), and the
# BertWordPieceTokenizer arguments BertTokenizerFast hands them to
BERT_VARIANTS = {
    "uncased": ({}, {"lowercase": True}),
    "cased": ({"do_lower_case": False}, {"lowercase": False}),
    # an uncased vocabulary that keeps its accents (Spanish, Portuguese BERTs) and CJK split as other scripts
    "accents-kept": ({"do_lower_case": True, "strip_accents": False, "tokenize_chinese_chars": False},
                     {"lowercase": True, "strip_accents": False, "handle_chinese_chars": False}),
    # a cased vocabulary that strips accents all the same
    "cased-accents-stripped": ({"do_lower_case": False, "strip_accents": True, "tokenize_chinese_chars": True},
                               {"lowercase": False, "strip_accents": True, "handle_chinese_chars": True}),
}


@builds(*(f"bert:{variant}" for variant in BERT_VARIANTS))
def bert(directory: Path, variant: str) -> Case:
    """vocab.txt: an uncased one with no settings beside it (lower-casing is inferred from the vocabulary), a
    cased one whose tokenizer_config.json says do_lower_case false, and ones whose tokenizer_config.json sets
    strip_accents and tokenize_chinese_chars against what lower-casing implies."""
    from tokenizers import BertWordPieceTokenizer

    config, arguments = BERT_VARIANTS[variant]
    path = bert_vocab(directory, **arguments)
    if config:
        (directory / "tokenizer_config.json").write_text(json.dumps(config))
    library = BertWordPieceTokenizer(str(path), **arguments)
    return Case(load_tokenizer(path), lambda text: library.encode(text, add_special_tokens=False).ids)


def gpt2_files(directory: Path) -> Path:
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(TRAINING, vocab_size=500, min_frequency=1, special_tokens=["<|endoftext|>"],
                                show_progress=False)
    trainer.save_model(str(directory))
    return directory


def gpt2_reference(directory: Path) -> Callable[[str], list[int]]:
    """The tokenizer as trained: ByteLevelBPETokenizer with its special tokens added, which it matches whole in
    text (as transformers' GPT2Tokenizer matches <|endoftext|>, its bos, eos and unk token)."""
    from tokenizers import ByteLevelBPETokenizer

    library = ByteLevelBPETokenizer(str(directory / "vocab.json"), str(directory / "merges.txt"))
    library.add_special_tokens(["<|endoftext|>"])
    return lambda text: library.encode(text).ids


@builds("gpt2:library", "gpt2:merge-loop")
def gpt2(directory: Path, variant: str) -> Case:
    """vocab.json + merges.txt, run by the tokenizers library; and where tokenizers is not installed, by the
    fallback: GPT-2's split pattern in regex, then embscope's merge loop."""
    files = gpt2_files(directory)
    with pytest.MonkeyPatch.context() as patch:
        if variant == "merge-loop":
            patch.setitem(sys.modules, "tokenizers", None)  # import tokenizers now raises ImportError
        ours = load_tokenizer(files / "vocab.json")
    return Case(ours, gpt2_reference(files))


# ---------------------------------------------------------------- sentencepiece


def trained_sentencepiece(directory: Path, **options: object) -> tuple[Path, object]:
    import sentencepiece

    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(TRAINING), model_writer=out, minloglevel=2,
                                             **options)
    path = directory / "tokenizer.model"
    path.write_bytes(out.getvalue())
    return path, sentencepiece.SentencePieceProcessor(model_proto=out.getvalue())


@builds("sentencepiece:bpe", "sentencepiece:unigram")
def sentencepiece_model(directory: Path, variant: str) -> Case:
    """A BPE model with byte fallback, and a Unigram one without: what its vocabulary lacks is <unk> (id 0)."""
    if variant == "bpe":
        options: dict[str, object] = {"model_type": "bpe", "vocab_size": 800, "byte_fallback": True}
    else:
        options = {"model_type": "unigram", "vocab_size": 500}
    path, processor = trained_sentencepiece(directory, character_coverage=0.98, hard_vocab_limit=False, **options)
    return Case(load_tokenizer(path), lambda text: processor.encode(text, out_type=int))


# ---------------------------------------------------------------- tiktoken


def tiktoken_patterns() -> dict[str, str]:
    """Each OpenAI encoding's split pattern as tiktoken's own constructor states it (tiktoken_ext), its loaders
    held back so that nothing is downloaded."""
    from tiktoken_ext import openai_public

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {})
        patch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *args, **kwargs: {})
        return {name: openai_public.ENCODING_CONSTRUCTORS[name]()["pat_str"]
                for name in openai_public.ENCODING_CONSTRUCTORS}


@builds("tiktoken:cl100k_base", "tiktoken:gpt2", "tiktoken:o200k_base")
def tiktoken_file(directory: Path, variant: str) -> Case:
    """A .tiktoken file written by tiktoken.load.dump_tiktoken_bpe from ranks trained by tiktoken's own
    (educational) trainer with the pattern of the encoding the file's name names."""
    import tiktoken
    from tiktoken._educational import bpe_train
    from tiktoken.load import dump_tiktoken_bpe, load_tiktoken_bpe

    pattern = tiktoken_patterns()[variant]
    path = directory / f"{variant}.tiktoken"
    with pytest.MonkeyPatch.context() as patch:  # the writer opens its file through blobfile: a local file here
        patch.setitem(sys.modules, "blobfile", types.SimpleNamespace(BlobFile=open))
        dump_tiktoken_bpe(bpe_train("\n".join(SAMPLE), 340, pattern, visualise=None), str(path))
    library = tiktoken.Encoding(variant, pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(str(path)),
                                special_tokens={})
    return Case(load_tokenizer(path), library.encode_ordinary)


def test_the_split_patterns_embscope_copies_are_tiktokens():
    from embscope.tokenizers.tiktoken_bpe import OPENAI_ENCODINGS, PATTERN_BY_ENCODING

    patterns = tiktoken_patterns()
    assert set(OPENAI_ENCODINGS) == set(patterns) == set(PATTERN_BY_ENCODING)
    assert PATTERN_BY_ENCODING == patterns


# ---------------------------------------------------------------- no library: the published algorithm, restated


@builds("nanogpt_meta")
def nanogpt_meta(directory: Path, variant: str) -> Case:
    """data/shakespeare_char/prepare.py: chars = sorted(list(set(data))), stoi, pickled; sample.py's encoder is
    `encode = lambda s: [stoi[c] for c in s]` (a KeyError for a character outside the vocabulary)."""
    data = "\n".join(TRAINING)
    chars = sorted(set(data))
    stoi = {ch: i for i, ch in enumerate(chars)}
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}
    path = directory / "meta.pkl"
    with open(path, "wb") as file:
        pickle.dump(meta, file)
    return Case(load_tokenizer(path), lambda s: [stoi[c] for c in s], refused=(KeyError,))


class MinBPE:
    """karpathy/minbpe, restated: RegexTokenizer (a split pattern, chunks encoded apart) and BasicTokenizer (no
    pattern). train: merge the most frequent adjacent pair, new id 256 + i. encode: in each chunk, while some
    adjacent pair has a merge, merge every occurrence of the pair of lowest merge id. Tokenizer.save writes
    'minbpe v1', the pattern, the number of special tokens, then one 'id1 id2' line per merge."""

    def __init__(self, pattern: str, merges: dict[tuple[int, int], int] | None = None, engine: str = "regex"):
        import re

        import regex

        self.pattern = pattern
        # minbpe imports regex as re; nlm's trainer (sample_checkpoints/training/train.py) writes the same file with re
        self.split = (regex if engine == "regex" else re).compile(pattern) if pattern else None
        self.merges = merges or {}

    def chunks(self, text: str) -> list[list[int]]:
        pieces = self.split.findall(text) if self.split else [text]
        return [list(piece.encode("utf-8")) for piece in pieces]

    @staticmethod
    def pair_counts(ids: list[int], counts: dict[tuple[int, int], int]) -> None:
        for pair in itertools.pairwise(ids):
            counts[pair] = counts.get(pair, 0) + 1

    @staticmethod
    def replaced(ids: list[int], pair: tuple[int, int], new: int) -> list[int]:
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out.append(new)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    def train(self, text: str, vocab_size: int) -> MinBPE:
        chunks = self.chunks(text)
        for new in range(256, vocab_size):
            counts: dict[tuple[int, int], int] = {}
            for ids in chunks:
                self.pair_counts(ids, counts)
            if not counts:
                break
            pair = max(counts, key=counts.get)
            chunks = [self.replaced(ids, pair, new) for ids in chunks]
            self.merges[pair] = new
        return self

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for ids in self.chunks(text):
            while len(ids) >= 2:
                counts: dict[tuple[int, int], int] = {}
                self.pair_counts(ids, counts)
                pair = min(counts, key=lambda p: self.merges.get(p, float("inf")))
                if pair not in self.merges:
                    break
                ids = self.replaced(ids, pair, self.merges[pair])
            out.extend(ids)
        return out

    def save(self, path: Path) -> Path:
        lines = ["minbpe v1", self.pattern, "0", *(f"{a} {b}" for a, b in self.merges)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: Path) -> MinBPE:
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0] == "minbpe v1" and lines[2] == "0"
        merges = {tuple(map(int, line.split())): 256 + n for n, line in enumerate(lines[3:]) if line.strip()}
        return cls(lines[1], merges)  # type: ignore[arg-type]


GPT4_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""


# \w, \s and \d mean other characters in regex than in re (², ½, combining accents, U+001C..U+001F)
WORD_PATTERN = r"\w+|\s|[^\w\s]+"


@builds("minbpe:sample", "minbpe:gpt4-pattern", "minbpe:basic", "minbpe:word-pattern", "minbpe:word-pattern-re")
def minbpe(directory: Path, variant: str) -> Case:
    """The word pattern's file is the same whichever engine trained it, and the two engines cut some texts apart
    differently: embscope may refuse such a text (it cannot know the engine), never give either's ids for it."""
    if variant == "sample":  # the bundled sample's tokenizer, as the training script saved it
        path = ROOT / "sample_checkpoints" / "nlm" / "tokenizer.model"
        reference = MinBPE.load(path)
    else:
        pattern = {"gpt4-pattern": GPT4_PATTERN, "basic": ""}.get(variant, WORD_PATTERN)
        engine = "re" if variant.endswith("-re") else "regex"
        # the word pattern's text repeats what the engines cut apart differently, so that merges cross there
        text = "\n".join(SAMPLE) + (" cafe\u0301 x² 👩\u200d💻" * 20 if variant.startswith("word-pattern") else "")
        reference = MinBPE(pattern, engine=engine).train(text, 340)
        path = reference.save(directory / f"{variant}.model")
    return Case(load_tokenizer(path), reference.encode, may_refuse=variant.startswith("word-pattern"))


def harris_encode(segments: list[str], text: str) -> list[int]:
    """DESIGN.md's Harris rule: ids 0-255 are bytes, 256 BOS, 257 + i segment i; at each byte position the longest
    segment that matches there (the first listed of equal ones), else the byte."""
    data, ids, at = text.encode("utf-8"), [], 0
    encoded = [segment.encode("utf-8") for segment in segments]
    while at < len(data):
        matches = [(len(segment), -index) for index, segment in enumerate(encoded)
                   if segment and data.startswith(segment, at)]
        if matches:
            length, first = max(matches)
            ids.append(257 - first)
            at += length
        else:
            ids.append(data[at])
            at += 1
    return ids


@builds("harris")
def harris(directory: Path, variant: str) -> Case:
    # words, word starts with their space, overlapping prefixes, a repeat, multi-byte pieces, a lone space
    segments = ["the", " the", "th", "dog", " dog", "do", "token", "tokenizer", " token", "iz", "er", "ü", "ße",
                "日本", "語", "🙂", "  ", "\n\n", "dog", "er "]
    path = directory / "harris_segments.json"
    with open(path, "w", encoding="utf-8") as file:
        json.dump(segments, file, ensure_ascii=False)
    return Case(load_tokenizer(path), lambda text: harris_encode(segments, text))


def char_map_encode(index: dict[str, int], text: str) -> list[int]:
    """char_map.py's rule, restated: one character at a time where every key is one character; else, at each
    position, the longest key that matches there; a character no key covers is a KeyError."""
    if all(len(key) == 1 for key in index):
        return [index[char] for char in text]
    longest = max(map(len, index))
    ids, at = [], 0
    while at < len(text):
        length = next((n for n in range(longest, 0, -1) if text[at:at + n] in index), None)
        if length is None:
            raise KeyError(text[at])
        ids.append(index[text[at:at + length]])
        at += length
    return ids


@builds("char_map:characters", "char_map:tokens")
def char_map(directory: Path, variant: str) -> Case:
    """A Keras char tokenizer's word_index (ids from 1, by frequency), saved with json.dump; and one with
    multi-character tokens beside the characters."""
    data = "\n".join(TRAINING)
    chars = sorted(set(data), key=lambda c: (-data.count(c), c))
    index = {char: i + 1 for i, char in enumerate(chars)}
    if variant == "tokens":
        index |= {token: len(index) + 1 + i for i, token in enumerate(["the", "th", "dog", " dog", "ing", "日本語"])}
    path = directory / f"{variant}.json"
    with open(path, "w", encoding="utf-8") as file:
        json.dump(index, file, ensure_ascii=False)
    return Case(load_tokenizer(path), lambda text: char_map_encode(index, text), refused=(KeyError,))


# ---------------------------------------------------------------- CTranslate2 vocabulary lists


class NotOneToken(Exception):
    pass


def one_token(ids: list[int]) -> list[int]:
    if len(ids) != 1:
        raise NotOneToken(ids)
    return ids


@builds("vocabulary_list:sentencepiece", "vocabulary_list:byte-level")
def vocabulary_list(directory: Path, variant: str) -> Case:
    """CTranslate2's vocabulary file beside model.bin, as its converters write it: the model tokenizer's pieces
    in id order (OPUS-MT: SentencePiece pieces in vocabulary.txt; Whisper: GPT-2's byte-level tokens in
    vocabulary.json). It names ids and can neither split nor normalize text: a text the model's own tokenizer
    makes one token is found as that token, or refused ('ª', which SentencePiece's NFKC makes 'a'); any other
    text is refused."""
    if variant == "sentencepiece":
        _, processor = trained_sentencepiece(directory, model_type="unigram", vocab_size=500, character_coverage=0.98,
                                             hard_vocab_limit=False)
        pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        (directory / "vocabulary.txt").write_text("".join(f"{piece}\n" for piece in pieces), encoding="utf-8")
        ours = load_vocabulary_list(directory / "vocabulary.txt")
        return Case(ours, lambda text: one_token(processor.encode(text, out_type=int)), refused=(NotOneToken,),
                    may_refuse=True)
    files = gpt2_files(directory)
    vocab = json.loads((files / "vocab.json").read_text(encoding="utf-8"))
    tokens = sorted(vocab, key=vocab.get)
    (directory / "vocabulary.json").write_text(json.dumps(tokens), encoding="utf-8")
    reference = gpt2_reference(files)
    return Case(load_vocabulary_list(directory / "vocabulary.json"), lambda text: one_token(reference(text)),
                refused=(NotOneToken,), may_refuse=True)


# ---------------------------------------------------------------- the comparisons

@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Callable[[str], Case]:
    """The Case of a name in BUILDERS, built once for the module."""
    built: dict[str, Case] = {}

    def case(name: str) -> Case:
        if name not in built:
            variant = name.partition(":")[2]
            built[name] = BUILDERS[name](tmp_path_factory.mktemp(name.replace(":", "-")), variant)
        return built[name]

    return case


@pytest.mark.parametrize("name", BUILDERS)
def test_the_sample_gives_the_references_ids(name, cases):
    case = cases(name)
    for text in SAMPLE:
        case.check(text)


@pytest.mark.parametrize("name", BUILDERS)
@GENERATED
@given(text=TEXTS)
def test_generated_text_gives_the_references_ids(name, cases, text):
    cases(name).check(text)


# ---------------------------------------------------------------- the unknown token, as each library has it


def test_wordpiece_makes_an_over_long_word_unknown_as_bert_does(cases):
    bert_uncased = cases("bert:uncased")
    word = "a" * 101  # BertWordPieceTokenizer's max_input_chars_per_word is 100
    unk = bert_uncased.ours.unk_id
    assert bert_uncased.reference(word) == bert_uncased.ours.encode(word) == [unk]
    assert bert_uncased.ours.encode("a" * 100) == bert_uncased.reference("a" * 100) != [unk]
    with pytest.raises(TokenError, match="maps to its unknown token"):
        lookup_word(bert_uncased.ours, word)


def test_sentencepiece_unknown_is_id_0_without_byte_fallback_and_bytes_with_it(cases):
    sentencepiece_unigram, sentencepiece_bpe = cases("sentencepiece:unigram"), cases("sentencepiece:bpe")
    rare = "\u16a0"  # a runic letter the training text lacks
    assert sentencepiece_unigram.ours.unk_id == 0 and 0 in sentencepiece_unigram.reference(rare)
    assert sentencepiece_unigram.ours.encode(rare) == sentencepiece_unigram.reference(rare)
    with pytest.raises(TokenError, match=r"maps to its unknown token '<unk>' \(id 0\)"):
        lookup_word(sentencepiece_unigram.ours, rare)
    with_bytes = sentencepiece_bpe.ours.encode(rare)
    assert with_bytes == sentencepiece_bpe.reference(rare) and 0 not in with_bytes
    assert [sentencepiece_bpe.ours.token_string(id) for id in with_bytes[-3:]] == ["\\xe1", "\\x9a", "\\xa0"]
    assert lookup_word(sentencepiece_bpe.ours, rare).ids[-3:] == tuple(with_bytes[-3:])


def test_tokenizer_json_unknown_follows_the_model(cases):
    unigram_json, sentencepiece_style_bpe = cases("unigram_json"), cases("sentencepiece_style_bpe")
    rare = "\u16a0"
    assert unigram_json.ours.unk_id is not None and unigram_json.ours.unk_id in unigram_json.ours.encode(rare)
    fallback = sentencepiece_style_bpe.ours.encode(rare)
    assert fallback == sentencepiece_style_bpe.reference(rare) and sentencepiece_style_bpe.ours.unk_id not in fallback
