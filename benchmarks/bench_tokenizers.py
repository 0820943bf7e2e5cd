"""What opening a tokenizer and encoding one word costs a fresh process, against baselines measured in the
same run (these machines are noisy):

- GPT-2 vocab.json + merges.txt (50k merges, trained here by the tokenizers library): embscope, and
  embscope without the tokenizers library (regex + its own merge loop), against the library's own
  ByteLevelBPETokenizer opening the same files;
- a Hugging Face tokenizer.json, a 50k WordLevel one (as bench_similarity.py writes) and the 50k-merge BPE
  above saved as one: embscope's load, and its load + vocab_size, against the library's own
  Tokenizer.from_file, in-process medians;
- the sample's minbpe tokenizer.model: embscope's load + encode, against importing embscope.tokenizers;
- the other kinds a library runs, each trained here (a 30k BERT vocab.txt, a 32k SentencePiece BPE .model, a
  .tiktoken file of 20k ranks): embscope's open + encode of one word in a fresh process, against a bare script
  that reads the same file with the library (BertWordPieceTokenizer, SentencePieceProcessor, tiktoken.Encoding)
  and encodes the same word.
- the tokenizers GGUF files carry (gguf_vocabularies.py): SentencePiece at 32k and 262k pieces, a 128k-token
  byte-level BPE, against sentencepiece and tokenizers opening the same vocabulary their own way.

    python benchmarks/bench_tokenizers.py [--repeat 7]

Targets: GPT-2 within 2x of the library's own load (embscope also checks every merge, which the library
would panic on, and used to spend 0.36 s building character classes for re); the sample's tokenizer in a
few milliseconds. tokenizer.json: WordLevel within 1.2x of from_file (the document is parsed only by the
library); BPE pays for parsing it in Python too, to check the merges the library would panic on.
"""

from __future__ import annotations

import argparse
import base64
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from gguf_vocabularies import compare_gguf
from timing import median_time

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_TOKENIZER = ROOT / "sample_checkpoints" / "nlm" / "tokenizer.model"


def build_gpt2_files(directory: Path, merges: int = 50_000) -> Path:
    from tokenizers import ByteLevelBPETokenizer

    rng = random.Random(0)
    syllables = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiouy"] + list("0123456789.,;!?")
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 5))) for _ in range(200_000)]
    lines = [" ".join(rng.choices(words, k=12)) for _ in range(40_000)]
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(lines, vocab_size=256 + merges + 1, min_frequency=1,
                                special_tokens=["<|endoftext|>"], show_progress=False)
    trainer.save_model(str(directory))
    return directory / "vocab.json"


def write_word_level(path: Path, words: int = 50_000) -> Path:
    """A WordLevel tokenizer.json whose words are w0, w1, ... (bench_similarity.py's write_vocabulary_model)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    named = {0: "[UNK]", 1000: "dog", 2000: "cat"}
    tokenizer = Tokenizer(models.WordLevel({named.get(i, f"w{i}"): i for i in range(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return path


def write_byte_level_bpe(vocab: Path, path: Path) -> Path:
    """The GPT-2 files as the tokenizer.json the library writes for them."""
    from tokenizers import ByteLevelBPETokenizer

    ByteLevelBPETokenizer(str(vocab), str(vocab.with_name("merges.txt")))._tokenizer.save(str(path))
    return path


def compare_tokenizer_json(name: str, path: Path, repeat: int) -> None:
    from tokenizers import Tokenizer

    from embscope.tokenizers import load_tokenizer

    library = median_time(lambda: Tokenizer.from_file(str(path)), repeat)
    ours = median_time(lambda: load_tokenizer(path), repeat)
    sized = median_time(lambda: load_tokenizer(path).vocab_size, repeat)
    print(f"{name} tokenizer.json ({path.stat().st_size / 1e6:.1f} MB), in-process medians: tokenizers' "
          f"Tokenizer.from_file {library * 1000:.0f} ms; embscope's load {ours * 1000:.0f} ms ({ours / library:.2f}x); "
          f"load + vocab_size {sized * 1000:.0f} ms ({sized / library:.2f}x)")


def timed_in_fresh_process(setup: str, work: str, repeat: int) -> float:
    """Median seconds of ``work`` (after ``setup``, untimed), each time in a fresh Python process: the
    per-process cost is what a command pays."""
    code = f"{setup}\nimport time\nstart = time.perf_counter()\n{work}\nprint(time.perf_counter() - start)"
    times = [float(subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True,
                                  text=True).stdout) for _ in range(repeat)]
    return statistics.median(times)


def training_lines(count: int = 30_000) -> list[str]:
    rng = random.Random(1)
    syllables = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiouy"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(60_000)] + ["dog", "cat"] * 500
    return [" ".join(rng.choices(words, k=12)) for _ in range(count)]


def library_kinds(directory: Path, repeat: int) -> None:
    """embscope against a bare script of the library, for each kind a library runs: open + encode ' dog'."""
    import io

    import sentencepiece
    from tiktoken._educational import bpe_train
    from tokenizers import BertWordPieceTokenizer

    from embscope.tokenizers.tiktoken_bpe import CL100K_PATTERN

    lines = training_lines()
    bert = BertWordPieceTokenizer(lowercase=True)
    bert.train_from_iterator(lines, vocab_size=30_000, show_progress=False)
    bert.save_model(str(directory))
    vocab_txt = directory / "vocab.txt"
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=32_000,
                                             model_type="bpe", byte_fallback=True, minloglevel=2)
    spm = directory / "tokenizer.model"
    spm.write_bytes(model.getvalue())
    ranks = bpe_train("\n".join(lines[:2000]), 2_000, CL100K_PATTERN, visualise=None)
    tiktoken_file = directory / "cl100k_base.tiktoken"
    tiktoken_file.write_bytes(b"".join(base64.b64encode(token) + b" %d\n" % rank
                                       for token, rank in sorted(ranks.items(), key=lambda item: item[1])))
    bert_code = (f"from tokenizers import BertWordPieceTokenizer\n"
                 f"BertWordPieceTokenizer({str(vocab_txt)!r}).encode(' dog', add_special_tokens=False)")
    spm_code = f"import sentencepiece\nsentencepiece.SentencePieceProcessor(model_file={str(spm)!r}).encode(' dog')"
    tiktoken_code = ("import tiktoken\nfrom tiktoken.load import load_tiktoken_bpe\n"
                     f"tiktoken.Encoding('x', pat_str={CL100K_PATTERN!r}, special_tokens={{}}, "
                     f"mergeable_ranks=load_tiktoken_bpe({str(tiktoken_file)!r})).encode_ordinary(' dog')")
    kinds = {"BERT vocab.txt (30k)": (vocab_txt, bert_code), "SentencePiece BPE .model (32k)": (spm, spm_code),
             "tiktoken file (2k ranks)": (tiktoken_file, tiktoken_code)}
    for name, (path, bare_code) in kinds.items():
        bare = timed_in_fresh_process("", bare_code, repeat)
        ours = timed_in_fresh_process("from embscope.tokenizers import load_tokenizer",
                                      f"load_tokenizer({str(path)!r}).encode(' dog')", repeat)
        print(f"{name}, open + encode one word in a fresh process: the library's own {bare * 1000:.0f} ms (its "
              f"import included); embscope {ours * 1000:.0f} ms ({ours / bare:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    embscope = "from embscope.tokenizers import load_tokenizer"
    with tempfile.TemporaryDirectory() as tmp:
        vocab = build_gpt2_files(Path(tmp))
        merges = vocab.with_name("merges.txt")
        library = timed_in_fresh_process(
            "", f"from tokenizers import ByteLevelBPETokenizer\n"
                f"ByteLevelBPETokenizer({str(vocab)!r}, {str(merges)!r}).encode(' dog')", args.repeat)
        ours = timed_in_fresh_process(embscope, f"load_tokenizer({str(vocab)!r}).encode(' dog')", args.repeat)
        merge_loop = timed_in_fresh_process(
            f"import sys; sys.modules['tokenizers'] = None\n{embscope}",
            f"load_tokenizer({str(vocab)!r}).encode(' dog')", args.repeat)
        print(f"GPT-2 vocab.json + merges.txt (50k merges), open + encode one word in a fresh process: "
              f"tokenizers' ByteLevelBPETokenizer {library * 1000:.0f} ms (its import included); embscope "
              f"{ours * 1000:.0f} ms ({ours / library:.2f}x); embscope without tokenizers {merge_loop * 1000:.0f} ms "
              f"({merge_loop / library:.2f}x)")
        compare_tokenizer_json("50k-word WordLevel", write_word_level(Path(tmp) / "words.json"), args.repeat)
        compare_tokenizer_json("50k-merge byte-level BPE", write_byte_level_bpe(vocab, Path(tmp) / "bpe.json"),
                               args.repeat)
        library_kinds(Path(tmp), args.repeat)
        compare_gguf(Path(tmp), args.repeat, timed_in_fresh_process)
    baseline = timed_in_fresh_process(embscope, f"open({str(SAMPLE_TOKENIZER)!r}, 'rb').read()", args.repeat)
    sample = timed_in_fresh_process(embscope, f"load_tokenizer({str(SAMPLE_TOKENIZER)!r}).encode(' dog')", args.repeat)
    print(f"sample minbpe tokenizer.model, open + encode one word: {sample * 1000:.1f} ms, against "
          f"{baseline * 1000:.2f} ms to read its bytes")


if __name__ == "__main__":
    main()
