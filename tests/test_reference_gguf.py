"""The tokenizers inside GGUF files, id for id against their references, on tests/tokenizer_corpus.py.

Files are written as llama.cpp's convert_hf_to_gguf.py writes them (gguf.GGUFWriter), from vocabularies trained
here by the real trainers. References:
- `llama` (SentencePiece) vocabularies: sentencepiece running the model trained here, and sentencepiece running a
  BPE ModelProto rebuilt from the GGUF's tokens, scores and types as gguf's own reader reads them (what the
  transformers GGUF converter rebuilds; the BPE encoder llama.cpp's llm_tokenizer_spm was ported from);
- `gpt2` (byte-level BPE) vocabularies: the tokenizers library's BPE of the GGUF's tokens and merges, cutting text
  with the regexes the file's tokenizer.ggml.pre names, each as a Split("isolated") as llama.cpp applies them.
embscope runs each twice: with sentencepiece or tokenizers doing the merges, and without them (its own loops)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_json
from hypothesis import HealthCheck, given, settings
from tokenizer_corpus import SAMPLE, TEXTS

import embscope
from embscope.core.errors import TokenError
from embscope.tokenizers.gguf_metadata import load_gguf_tokenizer
from embscope.tokenizers.gguf_pre import NAMES, NOT_RUN, lookup

gguf = pytest.importorskip("gguf")
spm = pytest.importorskip("sentencepiece")
D = 8
ENGINES = ("library", "own")
LIBRARY = {"llama": "sentencepiece", "gpt2": "tokenizers"}
# words embscope users look up, sentences and the corpus: what the tiny vocabularies are trained on
TRAINING = [*SAMPLE] * 3 + ["The dog bites the man.", "A cat and a dog; dogs and cats bite.", "queen tokenizer",
                            "the doghouse of the cat is dogged by dogs", "embedding hello world <b>bold</b>\n\n"] * 30
# Gemma's kind of user-defined symbols: runs of spaces, markup, a word
USER_DEFINED = ("\u2581\u2581", "\u2581\u2581\u2581", "<b>", "</b>", "\n\n", "dog")
HYPOTHESIS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def write_gguf(path: Path, tokenizer: dict, rows: int) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value in tokenizer.items():
        getattr(writer, key)(value)
    writer.add_tensor("token_embd.weight", np.random.default_rng(0).standard_normal((rows, D)).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def open_tokenizer(path: Path, engine: str, model: str):
    """embscope's tokenizer of the file, built with the library it prefers or with that library missing."""
    saved = sys.modules.get(LIBRARY[model])
    if engine == "own":
        sys.modules[LIBRARY[model]] = None  # type: ignore[assignment]
    try:
        embeddings = embscope.open(path)
        tokenizer = load_gguf_tokenizer(path, embeddings.checkpoint.tokenizer.args[1])
    finally:  # as it was: the library itself, or not imported yet (never left blocked for later tests)
        if saved is not None:
            sys.modules[LIBRARY[model]] = saved
        elif LIBRARY[model] in sys.modules and sys.modules[LIBRARY[model]] is None:
            del sys.modules[LIBRARY[model]]
    # the engine asked for is the one that runs
    if model == "llama":
        assert (tokenizer._library is not None) == (engine == "library")
    elif tokenizer._words is not None:
        assert ("_library_words" in tokenizer._words.__qualname__) == (engine == "library")
    return tokenizer


# -- llama (SentencePiece) -------------------------------------------------------------------------

def train_sentencepiece(model_type: str, byte_fallback: bool, dummy_prefix: bool, user_defined=()):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TRAINING), model_writer=model, vocab_size=800 if byte_fallback else 500,
        model_type=model_type, byte_fallback=byte_fallback, add_dummy_prefix=dummy_prefix,
        normalization_rule_name="identity", remove_extra_whitespaces=False, character_coverage=0.98,
        user_defined_symbols=list(user_defined), hard_vocab_limit=False, minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def write_sentencepiece_gguf(path: Path, sp, add_space_prefix: bool | None, added=()) -> Path:
    """convert_hf_to_gguf.py's _create_vocab_sentencepiece and _set_vocab_sentencepiece: pieces, scores and
    types from the model (its user-defined symbols written as normal tokens), `added` as a tokenizer_config's
    non-special added tokens (user-defined, "▁" written as a space, score -1000); Gemma writes
    add_space_prefix false, Llama nothing (llama.cpp's default is true)."""
    n = sp.get_piece_size()
    tokens = [sp.id_to_piece(i) for i in range(n)]
    scores = [sp.get_score(i) for i in range(n)]
    types = [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i) else 6 if sp.is_byte(i)
             else 1 for i in range(n)]
    for piece in added:
        id = sp.piece_to_id(piece)
        tokens[id], types[id], scores[id] = piece.replace("\u2581", " "), 4, -1000.0
    tokenizer = {"add_tokenizer_model": "llama", "add_tokenizer_pre": "default", "add_token_list": tokens,
                 "add_token_scores": scores, "add_token_types": types, "add_unk_token_id": sp.unk_id(),
                 "add_bos_token_id": sp.bos_id(), "add_eos_token_id": sp.eos_id()}
    if add_space_prefix is not None:
        tokenizer["add_add_space_prefix"] = add_space_prefix
    return write_gguf(path, tokenizer, n)


def rebuilt_sentencepiece(path: Path):
    """sentencepiece over a BPE ModelProto of the GGUF's tokens, scores and types, read by gguf.GGUFReader."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    fields = gguf.GGUFReader(str(path)).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    scores = fields["tokenizer.ggml.scores"].contents()
    types = fields["tokenizer.ggml.token_type"].contents()
    prefix = fields["tokenizer.ggml.add_space_prefix"].contents() if "tokenizer.ggml.add_space_prefix" in fields else True
    proto = pb.ModelProto()
    for token, score, kind in zip(tokens, scores, types):
        piece = proto.pieces.add()
        piece.piece, piece.score, piece.type = token, score, kind
    proto.trainer_spec.model_type = pb.TrainerSpec.BPE
    proto.trainer_spec.byte_fallback = 6 in types
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = prefix
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = True
    return spm.SentencePieceProcessor(model_proto=proto.SerializeToString())


SPM_CASES = {  # name: (model type, byte fallback, add_dummy_prefix, tokenizer.ggml.add_space_prefix written)
    "llama-bpe": ("bpe", True, True, None),
    "gemma-bpe": ("bpe", True, False, False),
    "llama-bpe-no-bytes": ("bpe", False, True, None),
    "gemma-bpe-no-bytes": ("bpe", False, False, False),
    "llama-unigram": ("unigram", True, True, None),
    "gemma-unigram": ("unigram", True, False, False),
}


@pytest.fixture(scope="session")
def sentencepiece_files(tmp_path_factory):
    """Each case's trained model and its GGUF, trained once per session."""
    folder = tmp_path_factory.mktemp("spm")
    out = {}
    for name, (model_type, byte_fallback, prefix, key) in SPM_CASES.items():
        sp = train_sentencepiece(model_type, byte_fallback, prefix)
        out[name] = (sp, write_sentencepiece_gguf(folder / f"{name}.gguf", sp, key))
    sp = train_sentencepiece("bpe", True, False, USER_DEFINED)
    out["gemma-added"] = (sp, write_sentencepiece_gguf(folder / "gemma-added.gguf", sp, False, USER_DEFINED))
    out["gemma-plain"] = (sp, write_sentencepiece_gguf(folder / "gemma-plain.gguf", sp, False))
    return out


def check_against_sentencepiece(tokenizer, reference, text: str) -> None:
    assert tokenizer.encode(text) == reference.encode(text), text


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", ["llama-bpe", "gemma-bpe", "llama-bpe-no-bytes", "gemma-bpe-no-bytes"])
def test_bpe_trained_sentencepiece_gives_the_trained_models_ids(sentencepiece_files, case, engine):
    sp, path = sentencepiece_files[case]
    tokenizer = open_tokenizer(path, engine, "llama")
    assert tokenizer.kind == "gguf (llama)" and tokenizer.unk_id == sp.unk_id()
    for text in SAMPLE:
        check_against_sentencepiece(tokenizer, sp, text)
    if "no-bytes" in case:  # a run of characters the vocabulary lacks is one unknown token, as sentencepiece gives
        assert tokenizer.encode("🙂🙂") == sp.encode("🙂🙂") and sp.encode("🙂🙂").count(sp.unk_id()) == 1


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", list(SPM_CASES))
def test_every_sentencepiece_gguf_gives_the_rebuilt_models_ids(sentencepiece_files, case, engine):
    _, path = sentencepiece_files[case]
    tokenizer, reference = open_tokenizer(path, engine, "llama"), rebuilt_sentencepiece(path)
    for text in SAMPLE:
        check_against_sentencepiece(tokenizer, reference, text)


@pytest.mark.parametrize("engine", ENGINES)
def test_generated_texts_give_both_references_ids(sentencepiece_files, engine):
    cases = [(open_tokenizer(path, engine, "llama"), sp, rebuilt_sentencepiece(path))
             for name, (sp, path) in sentencepiece_files.items() if name in ("llama-bpe", "gemma-bpe", "llama-unigram")]

    @HYPOTHESIS
    @given(TEXTS)
    def check(text):
        for tokenizer, trained, rebuilt in cases:
            check_against_sentencepiece(tokenizer, rebuilt, text)
            if "unigram" not in tokenizer.path.name:
                check_against_sentencepiece(tokenizer, trained, text)

    check()


def test_unigram_models_are_merged_as_llama_cpp_merges_them_not_as_sentencepiece_cuts_them(sentencepiece_files):
    # llama.cpp runs every `llama` vocabulary through its SentencePiece-BPE merges, Unigram-trained or not; the
    # trained model cuts words by Viterbi over the same scores, so many texts come out otherwise
    sp, path = sentencepiece_files["llama-unigram"]
    tokenizer, rebuilt = open_tokenizer(path, "library", "llama"), rebuilt_sentencepiece(path)
    differ = [text for text in SAMPLE if tokenizer.encode(text) != sp.encode(text)]
    assert all(tokenizer.encode(text) == rebuilt.encode(text) for text in SAMPLE)
    assert len(differ) > len(SAMPLE) // 10


@pytest.mark.parametrize("engine", ENGINES)
def test_gemma_user_defined_tokens_are_cut_out_first(sentencepiece_files, engine):
    # Gemma's user-defined pieces reach the GGUF as tokenizer_config's added tokens, with "▁" as a space: cut out
    # of the raw text, they give the ids the trained model gives by matching them after escaping spaces
    sp, path = sentencepiece_files["gemma-added"]
    tokenizer = open_tokenizer(path, engine, "llama")
    for text in (*SAMPLE, "a  b   c", "<b>dog</b>\n\nhot dogs", "dogdog  dog"):
        assert tokenizer.encode(text) == sp.encode(text), text
    assert tokenizer.token_string(sp.piece_to_id("\u2581\u2581")) == "  "
    assert tokenizer.encode("<b>") == [sp.piece_to_id("<b>")]


@pytest.mark.parametrize("engine", ENGINES)
def test_user_defined_symbols_written_as_normal_tokens_merge_by_their_score(sentencepiece_files, engine):
    # without a tokenizer_config the converter writes them as normal tokens of score 0, the highest: llama.cpp
    # then joins them first, like any token (the rebuilt model, with them normal, agrees)
    _, path = sentencepiece_files["gemma-plain"]
    tokenizer, rebuilt = open_tokenizer(path, engine, "llama"), rebuilt_sentencepiece(path)
    for text in (*SAMPLE, "a  b   c", "<b>dog</b>\n\nhot dogs"):
        assert tokenizer.encode(text) == rebuilt.encode(text), text


@pytest.mark.parametrize("engine", ENGINES)
def test_a_space_is_put_before_the_text_after_a_user_defined_token(tmp_path, engine):
    # llama.cpp prefixes every stretch of text that follows a user-defined token (is_prev_special), not only
    # the first, when add_space_prefix is true: "a<u>b" is " a", <u>, " b". Worked out by hand on this vocabulary
    tokens = ["<unk>", "<u>", "\u2581", "a", "b", "\u2581a", "\u2581b"]
    path = write_gguf(tmp_path / "prefix.gguf", {
        "add_tokenizer_model": "llama", "add_token_list": tokens, "add_token_scores": [0, 0, -1, -2, -3, -4, -5],
        "add_token_types": [2, 4, 1, 1, 1, 1, 1], "add_unk_token_id": 0}, len(tokens))
    tokenizer = open_tokenizer(path, engine, "llama")
    assert tokenizer.encode("a<u>b") == [5, 1, 6]
    assert tokenizer.encode("<u>") == [1] and tokenizer.encode("b<u>") == [6, 1]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_pair_is_dropped_once_its_left_symbol_was_joined_away(tmp_path, engine):
    # the reported bug, by hand: in "xabc" the pairs queue as xa (-1), bc (-2), ab (-3). xa joins, leaving "a"
    # empty; bc joins, so "b" is now "bc", as long as "ab" was when it was queued: only the empty left side tells
    # that "ab" is stale. Dropped, xa + bc join into xabc (-4); kept, "bc" would be joined into the empty "a"
    tokens = ["<unk>", "x", "a", "b", "c", "bc", "xa", "ab", "xabc"]
    path = write_gguf(tmp_path / "stale.gguf", {
        "add_tokenizer_model": "llama", "add_token_list": tokens, "add_token_scores": [0, -9, -9, -9, -9, -2, -1, -3, -4],
        "add_token_types": [2] + [1] * 8, "add_add_space_prefix": False}, len(tokens))
    tokenizer = open_tokenizer(path, engine, "llama")
    assert tokenizer.encode("xabc") == [8]
    assert tokenizer.encode("abc") == [2, 5]  # bc (-2) before ab (-3); a + bc is no token


# -- gpt2 (byte-level BPE) -------------------------------------------------------------------------------

def train_byte_level(pre: str):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    library = Tokenizer(models.BPE())
    library.pre_tokenizer = reference_pre_tokenizer(pre)
    library.train_from_iterator(TRAINING, trainers.BpeTrainer(
        vocab_size=700, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return library


def reference_pre_tokenizer(pre: str | None):
    from tokenizers import Regex, pre_tokenizers
    patterns = lookup(pre).patterns
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(p), "isolated") for p in patterns]
                                   + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def write_byte_level_gguf(path: Path, library, pre: str | None, added=()) -> Path:
    """convert_hf_to_gguf.py's _set_vocab_gpt2: the tokens in GPT-2's byte alphabet, special ones as control,
    non-special added ones as user-defined (as the text they stand for), the merges, and the pre name."""
    import json
    model = json.loads(library.to_str())["model"]
    tokens = [token for token, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])] + list(added)
    types = [3 if token == "<|endoftext|>" else 1 for token in tokens[:len(tokens) - len(added)]] + [4] * len(added)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    tokenizer = {"add_tokenizer_model": "gpt2", "add_token_list": tokens, "add_token_types": types,
                 "add_token_merges": merges}
    if pre is not None:
        tokenizer["add_tokenizer_pre"] = pre
    return write_gguf(path, tokenizer, len(tokens))


def reference_bpe(path: Path, pre: str | None, fields=None):
    """The tokenizers library's BPE of the GGUF's tokens and merges, read by gguf.GGUFReader."""
    from tokenizers import AddedToken, Tokenizer, models
    fields = fields or gguf.GGUFReader(str(path)).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    types = fields["tokenizer.ggml.token_type"].contents() if "tokenizer.ggml.token_type" in fields else []
    merges = [tuple(m.split(" ", 1)) for m in fields["tokenizer.ggml.merges"].contents()]
    library = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges,
                                   ignore_merges=NAMES[pre or "default"][1]))
    library.pre_tokenizer = reference_pre_tokenizer(pre)
    library.add_tokens([AddedToken(t, normalized=False, special=False) for t, k in zip(tokens, types) if k == 4])
    return library


@pytest.fixture(scope="session")
def byte_level_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    general = train_byte_level("gpt-2")
    # one vocabulary under a name of every pre-tokenizer type (the merges need not fit the cutting to be
    # compared), and vocabularies trained with their own cutting for the pre-tokenizers of the commonest models
    # (AFMoE's first regex names llama.cpp's own digit code, which the library cannot read: test_gguf_pre.py)
    names = {(kind, ignore): name for name, (kind, ignore) in reversed(NAMES.items())
             if kind not in NOT_RUN and kind != "AFMOE"}
    files = {name: (name, write_byte_level_gguf(folder / f"any-{name}.gguf", general, name)) for name in names.values()}
    files["(none)"] = (None, write_byte_level_gguf(folder / "any-none.gguf", general, None))
    for pre in ("llama-bpe", "qwen2", "gpt-4o", "tekken", "deepseek-v3"):
        files[f"own-{pre}"] = (pre, write_byte_level_gguf(folder / f"own-{pre}.gguf", train_byte_level(pre), pre,
                                                         added=["  ", "<tag>", "zebra"]))
    return files


def compared_texts(pre: str | None) -> list[str]:
    from test_gguf_pre import LLAMA_CPP_READS_OTHERWISE
    kind = NAMES[pre or "default"][0]
    return [text for text in SAMPLE if (kind, text) not in LLAMA_CPP_READS_OTHERWISE]


# the merge loops differ between the engines, the cutting does not: without the library, a few names suffice
OWN_LOOP_NAMES = ("(none)", "gpt-2", "qwen2", "own-llama-bpe", "own-tekken", "own-deepseek-v3")


@pytest.mark.parametrize("engine", ENGINES)
def test_every_pre_tokenizer_gives_the_libraries_ids(byte_level_files, engine):
    general = gguf.GGUFReader(str(byte_level_files["(none)"][1])).fields  # every "any-" file holds this vocabulary
    for name, (pre, path) in byte_level_files.items():
        if engine == "own" and name not in OWN_LOOP_NAMES:
            continue
        tokenizer = open_tokenizer(path, engine, "gpt2")
        reference = reference_bpe(path, pre, None if name.startswith("own-") else general)
        for text in compared_texts(pre):
            assert tokenizer.encode(text) == reference.encode(text, add_special_tokens=False).ids, (name, text)


@pytest.mark.parametrize("engine", ENGINES)
def test_generated_texts_give_the_libraries_ids(byte_level_files, engine):
    cases = [(open_tokenizer(path, engine, "gpt2"), reference_bpe(path, pre))
             for name, (pre, path) in byte_level_files.items() if name in ("own-llama-bpe", "own-qwen2", "gpt-2")]

    @HYPOTHESIS
    @given(TEXTS.filter(assigned_in_unicode))
    def check(text):
        for tokenizer, reference in cases:
            assert tokenizer.encode(text) == reference.encode(text, add_special_tokens=False).ids, text

    check()


def assigned_in_unicode(text: str) -> bool:
    """Characters Python's Unicode tables know: llama.cpp's categories come from its own (newer) copy, and the
    regex and tokenizers libraries' from theirs, so a character newer than Python's is read three ways."""
    import unicodedata
    return all(unicodedata.category(char) != "Cn" for char in text)


@pytest.mark.parametrize("engine", ENGINES)
def test_ignore_merges_takes_a_word_that_is_a_token_whole(tmp_path, engine):
    # by hand: merges b+c (rank 0), a+b (1), ab+c (2); "abc" merges to a + bc, and a + bc is no merge. Llama 3's
    # pre-tokenizer sets ignore_merges, so the word, being a token, is taken whole; GPT-2's does not
    tokens = ["a", "b", "c", "ab", "bc", "abc"]
    for pre, expected in (("llama-bpe", [5]), ("gpt-2", [0, 4])):
        path = write_gguf(tmp_path / f"{pre}.gguf", {"add_tokenizer_model": "gpt2", "add_tokenizer_pre": pre,
                                                     "add_token_list": tokens, "add_token_merges": ["b c", "a b", "ab c"]},
                          len(tokens))
        assert open_tokenizer(path, engine, "gpt2").encode("abc") == expected
        assert reference_bpe(path, pre).encode("abc").ids == expected


def test_an_unknown_pre_tokenizer_is_named_and_words_are_not_guessed(tmp_path):
    tokens = ["a", "b", "ab"]
    path = write_gguf(tmp_path / "odd.gguf", {"add_tokenizer_model": "gpt2", "add_tokenizer_pre": "my-own",
                                              "add_token_list": tokens, "add_token_merges": ["a b"]}, len(tokens))
    tokenizer = embscope.open(path).tokenizer
    assert tokenizer.notes == ((f"odd.gguf names the pre-tokenizer 'my-own', which llama.cpp does not know (it refuses "
                                f"such a file; llama.cpp src/llama-vocab.cpp at 0c1e57098 knows {len(NAMES)} names): "
                                "ids are named, words cannot be looked up"),)
    with pytest.raises(TokenError, match=r"^odd.gguf names the pre-tokenizer 'my-own', which llama.cpp does not know"):
        tokenizer.encode("ab")
    assert tokenizer.token_string(2) == "ab"
    doc = run_json("similarity", "--ids", "0", "2", "-c", path)
    assert doc["pairs"][0]["b_tokens"] == ["ab"]


def test_a_file_without_a_pre_tokenizer_is_cut_as_llama_cpp_cuts_it_and_says_so(byte_level_files):
    _, path = byte_level_files["(none)"]
    note = ("the file names no pre-tokenizer (tokenizer.ggml.pre): text is cut as llama.cpp then cuts it "
            "('default'), which may not be how the model was trained")
    assert embscope.open(path).tokenizer.notes == (note,)
    assert note in run_json("info", "-c", path)["notes"]


# -- the command line --------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["llama-bpe", "gemma-bpe"])
def test_similarity_on_a_sentencepiece_gguf_prints_the_reference_ids(sentencepiece_files, case):
    sp, path = sentencepiece_files[case]
    doc = run_json("similarity", "cat", "dog", "-c", path)
    for query in doc["queries"]:
        assert query["ids"] == sp.encode(query["form"]), query
    if case == "llama-bpe":  # llama.cpp puts a space before the text: "cat" is the one token "▁cat"
        assert [q["ids"] for q in doc["queries"]] == [[sp.piece_to_id("▁cat")], [sp.piece_to_id("▁dog")]]


def test_similarity_on_a_byte_level_gguf_prints_the_reference_ids(byte_level_files):
    pre, path = byte_level_files["own-llama-bpe"]
    reference = reference_bpe(path, pre)
    doc = run_json("similarity", "cat", "dog", "-c", path)
    for query in doc["queries"]:
        assert query["ids"] == reference.encode(query["form"], add_special_tokens=False).ids, query
