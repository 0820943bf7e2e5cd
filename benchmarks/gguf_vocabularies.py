"""bench_tokenizers.py's GGUF part: opening the tokenizer a GGUF file carries and encoding one word, in a fresh
process, against the libraries' own bare scripts on the same vocabulary, measured in the same run:

- SentencePiece (`llama`) vocabularies of Llama 2's size (32k) and Gemma 3's (262k): embscope on the GGUF (the
  merges in sentencepiece, and without it in its own loop), against sentencepiece loading the same vocabulary's
  tokenizer.model;
- a byte-level BPE (`gpt2`, Llama 3's pre-tokenizer) of Llama 3's size (128k tokens, 280k merges): embscope on
  the GGUF (the merges in tokenizers, and without it), against tokenizers' Tokenizer.from_file on a
  tokenizer.json of the same tokens and merges.

The vocabularies are made here: random pieces with descending scores for SentencePiece (any pieces encode), and
merges of random earlier tokens for BPE, so that every merge joins two tokens into a third."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

LLAMA_CPP_PRE = "llama-bpe"
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def sentencepiece_vocabulary(size: int, seed: int = 0) -> tuple[list[str], list[float], list[int]]:
    """<unk> <s> </s>, the 256 byte pieces, then word pieces (half of them word-initial) down to `size`."""
    rng = random.Random(seed)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{byte:02X}>" for byte in range(256)] + ["\u2581"] + list(LETTERS)
    seen = set(tokens)
    for word in ("dog", "cat", "the"):
        for piece in (word, "\u2581" + word):
            tokens.append(piece)
            seen.add(piece)
    while len(tokens) < size:
        piece = ("\u2581" if rng.random() < 0.5 else "") + "".join(rng.choices(LETTERS, k=rng.randint(2, 8)))
        if piece not in seen:
            seen.add(piece)
            tokens.append(piece)
    types = [2, 3, 3] + [6] * 256 + [1] * (size - 259)
    scores = [0.0] * 259 + [-float(i) for i in range(size - 259)]
    return tokens, scores, types


def write_sentencepiece(directory: Path, size: int) -> tuple[Path, Path]:
    """The vocabulary as a GGUF (as convert_hf_to_gguf.py writes a llama vocabulary) and as tokenizer.model."""
    import gguf
    from sentencepiece import sentencepiece_model_pb2 as pb
    tokens, scores, types = sentencepiece_vocabulary(size)
    path = directory / f"spm-{size}.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_tensor("token_embd.weight", np.zeros((size, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    proto = pb.ModelProto()
    for token, score, kind in zip(tokens, scores, types):
        piece = proto.pieces.add()
        piece.piece, piece.score, piece.type = token, score, kind
    proto.trainer_spec.model_type = pb.TrainerSpec.BPE
    proto.trainer_spec.byte_fallback = True
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = True
    proto.normalizer_spec.remove_extra_whitespaces = False
    model = directory / f"spm-{size}.model"
    model.write_bytes(proto.SerializeToString())
    return path, model


def byte_level_vocabulary(tokens: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """GPT-2's 256 byte symbols, then tokens made by joining two earlier ones (short ones first), each with the
    merge that made it and one for every other cut of it into two tokens, as real merge lists have (Llama 3:
    128k tokens, 280k merges)."""
    from tokenizers import pre_tokenizers
    rng = random.Random(seed)
    vocab = sorted(pre_tokenizers.ByteLevel.alphabet())
    seen = set(vocab)
    pairs: list[str] = []
    while len(vocab) < tokens:
        pool = vocab[: 256 + len(vocab) // 8]
        token = rng.choice(pool) + rng.choice(pool)
        if token in seen or len(token) > 10:
            continue
        seen.add(token)
        vocab.append(token)
        pairs += [f"{token[:cut]} {token[cut:]}" for cut in range(1, len(token))
                  if token[:cut] in seen and token[cut:] in seen]
    return vocab, pairs


def write_byte_level(directory: Path, tokens: int) -> tuple[Path, Path, int]:
    """The vocabulary as a GGUF `gpt2` vocabulary and as the tokenizer.json the library reads."""
    import gguf
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    from embscope.tokenizers.gguf_pre import lookup
    vocab, pairs = byte_level_vocabulary(tokens)
    path = directory / "bpe.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(LLAMA_CPP_PRE)
    writer.add_token_list(vocab)
    writer.add_token_types([1] * len(vocab))
    writer.add_token_merges(pairs)
    writer.add_tensor("token_embd.weight", np.zeros((len(vocab), 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    library = Tokenizer(models.BPE({t: i for i, t in enumerate(vocab)}, [tuple(p.split(" ")) for p in pairs],
                                   ignore_merges=True))
    pre = lookup(LLAMA_CPP_PRE)
    assert pre is not None
    library.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(p), "isolated") for p in pre.patterns]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    document = directory / "bpe.json"
    library.save(str(document))
    return path, document, len(pairs)


BARE_SENTENCEPIECE = """import gguf, sentencepiece
from sentencepiece import sentencepiece_model_pb2 as pb
fields = gguf.GGUFReader({path!r}).fields
proto = pb.ModelProto()
for token, score, kind in zip(*(fields["tokenizer.ggml." + key].contents() for key in ("tokens", "scores", "token_type"))):
    piece = proto.pieces.add()
    piece.piece, piece.score, piece.type = token, score, kind
proto.trainer_spec.model_type = pb.TrainerSpec.BPE
proto.trainer_spec.byte_fallback = True
proto.normalizer_spec.name = "identity"
proto.normalizer_spec.remove_extra_whitespaces = False
sentencepiece.SentencePieceProcessor(model_proto=proto.SerializeToString()).encode(' dog')"""


def compare_gguf(directory: Path, repeat: int, timed) -> None:
    """Print each vocabulary's figures; `timed(setup, work, repeat)` times `work` in fresh processes. Besides the
    libraries on their own files: embscope opening the GGUF without its tokenizer (what the tokenizer adds is the
    difference), and for SentencePiece the bare script a user would write on the GGUF (gguf's GGUFReader, a
    ModelProto, sentencepiece)."""
    ours = "import embscope"
    without = "import sys; sys.modules[{name!r}] = None\nimport embscope"
    encode = "embscope.open({path!r}).tokenizer.encode(' dog')"
    opened = "embscope.open({path!r})"
    for size in (32_000, 262_144):
        path, model = write_sentencepiece(directory, size)
        library = timed("import sentencepiece",
                        f"sentencepiece.SentencePieceProcessor(model_file={str(model)!r}).encode(' dog')", repeat)
        bare = timed("", BARE_SENTENCEPIECE.format(path=str(path)), repeat)
        open_only = timed(ours, opened.format(path=str(path)), repeat)
        embscope = timed(ours, encode.format(path=str(path)), repeat)
        own = timed(without.format(name="sentencepiece"), encode.format(path=str(path)), repeat)
        print(f"SentencePiece GGUF ({size:,} pieces), open + encode one word in a fresh process: sentencepiece on "
              f"its tokenizer.model {library * 1000:.0f} ms; a bare script on the GGUF (GGUFReader + sentencepiece) "
              f"{bare * 1000:.0f} ms; embscope {embscope * 1000:.0f} ms ({embscope / bare:.2f}x the bare script), of "
              f"which the tokenizer {(embscope - open_only) * 1000:.0f} ms; without sentencepiece {own * 1000:.0f} ms "
              f"(the tokenizer {(own - open_only) * 1000:.0f} ms)")
    path, document, merges = write_byte_level(directory, 128_256)
    library = timed("from tokenizers import Tokenizer",
                    f"Tokenizer.from_file({str(document)!r}).encode(' dog')", repeat)
    open_only = timed(ours, opened.format(path=str(path)), repeat)
    embscope = timed(ours, encode.format(path=str(path)), repeat)
    own = timed(without.format(name="tokenizers"), encode.format(path=str(path)), repeat)
    print(f"byte-level BPE GGUF (128k tokens, {merges // 1000}k merges, {LLAMA_CPP_PRE}), open + encode one word in a "
          f"fresh process: tokenizers' Tokenizer.from_file on its tokenizer.json {library * 1000:.0f} ms; embscope on "
          f"the GGUF {embscope * 1000:.0f} ms ({embscope / library:.2f}x), of which the tokenizer "
          f"{(embscope - open_only) * 1000:.0f} ms; without tokenizers {own * 1000:.0f} ms ({own / library:.2f}x)")
