"""What running h5py in a child process costs (formats/_isolated.py): a BERT-base sized tf_model.h5, written
by h5py, opened and read through embscope against the same h5py calls made in this process, in the same run.

    python3 benchmarks/bench_h5_child.py [--repeat 9]

(1) the catalogue (every dataset's record and the Keras version): embscope's open_h5 (one fork) vs
    keras_h5.catalogue called here;
(2) a gzip-compressed 30,522 x 768 word table read through h5py: embscope's read (a fork, shared memory) vs
    h5py's read_direct here.
Each prints both medians, the difference in milliseconds and the ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import median_time

from embscope.formats import OpenOptions
from embscope.formats._isolated import run_isolated
from embscope.formats.keras_h5 import Source, catalogue, open_h5

PREFIX = "tf_bert_model/bert/embeddings/"


def write(path: Path) -> None:
    import h5py
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = b"2.15.0"
        f.create_dataset(PREFIX + "word_embeddings/weight:0", data=rng.standard_normal((30522, 768)).astype("f4"),
                         compression="gzip", compression_opts=1)
        f.create_dataset(PREFIX + "position_embeddings/embeddings:0", data=rng.standard_normal((512, 768)).astype("f4"))
        for layer in range(12):  # the rest of a BERT-base, to list (never read: unwritten)
            for name, shape in (("attention/self/query/kernel:0", (768, 768)), ("attention/self/query/bias:0", (768,)),
                                ("attention/self/key/kernel:0", (768, 768)), ("attention/self/key/bias:0", (768,)),
                                ("attention/self/value/kernel:0", (768, 768)), ("attention/self/value/bias:0", (768,)),
                                ("intermediate/dense/kernel:0", (768, 3072)), ("output/dense/kernel:0", (3072, 768)),
                                ("output/LayerNorm/gamma:0", (768,)), ("output/LayerNorm/beta:0", (768,))):
                f.create_dataset(f"tf_bert_model/bert/encoder/layer_._{layer}/{name}", shape=shape, dtype="f4")


def direct_read(path: Path) -> np.ndarray:
    import h5py
    with h5py.File(path, "r", locking=False) as f:
        dataset = f[PREFIX + "word_embeddings/weight:0"]
        out = np.empty(dataset.shape, dataset.dtype)
        dataset.read_direct(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "tf_model.h5"
        write(path)
        print(f"file: {path.stat().st_size / 2**20:.1f} MiB, {len(catalogue(Source(path), str(path))['datasets'])} datasets")
        word = PREFIX.replace("/", ".") + "word_embeddings.weight"
        ours = open_h5(path, OpenOptions()).tensors[word]
        assert np.array_equal(ours.read(), direct_read(path))  # the child's table is h5py's, byte for byte
        for label, isolated, here in (
            ("fork alone", lambda: run_isolated(lambda: 1, seconds=5, memory=1 << 30, what="", library=""),
             lambda: 1),
            ("catalogue", lambda: open_h5(path, OpenOptions()), lambda: catalogue(Source(path), str(path))),
            ("gzip table read", lambda: ours.read(), lambda: direct_read(path)),
        ):
            child, inline = median_time(isolated, args.repeat), median_time(here, args.repeat)
            ratio = f"ratio {child / inline:5.2f}x" if inline > 1e-4 else ""
            print(f"{label:16s} child {child * 1000:8.1f} ms   in-process {inline * 1000:8.1f} ms   "
                  f"+{(child - inline) * 1000:6.1f} ms   {ratio}")


if __name__ == "__main__":
    main()
