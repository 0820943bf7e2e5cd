"""Nothing a native library prints reaches the terminal (issue 33, class A). The tokenizers library's Rust panic
hook (round four's r01: a Unigram tokenizer.json whose Precompiled charsmap is damaged panics on every encode)
and sentencepiece's absl log (r02: a NUL piece with byte fallback) write to file descriptor 2 directly, past
sys.stderr: only a real process shows them, so each case runs the real command line and reads its fd 2."""

from __future__ import annotations

import base64
import json
import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["\u2581dog", "\u2581cat", "\u2581the", "\u2581father", "\u2581", "d", "o", "g", "c", "a", "t", "h", "e", "f", "r"]


def embscope(*args: object, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The command line in a process of its own, as a shell runs it."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "embscope", *map(str, args)], capture_output=True, text=True,
                          env=environment, cwd=cwd or ROOT, timeout=300, check=False)


def safetensors_table(path: Path, rows: int = 64, dim: int = 8) -> None:
    from safetensors.numpy import save_file
    save_file({"wte.weight": np.random.default_rng(0).standard_normal((rows, dim)).astype(np.float32)}, str(path))


def precompiled_unigram(folder: Path, charsmap: str) -> Path:
    """r01's tokenizer.json: a Unigram model behind a Precompiled normalizer with the charsmap given (base64)."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"version": "1.0", "added_tokens": [],
           "normalizer": {"type": "Precompiled", "precompiled_charsmap": charsmap},
           "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
           "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": False,
                     "vocab": [["<unk>", 0.0]] + [[w, -1.0 - i] for i, w in enumerate(WORDS)]}}
    (folder / "tokenizer.json").write_text(json.dumps(doc))
    safetensors_table(folder / "model.safetensors")
    return folder


def damaged_charsmap() -> str:
    """A trie of 64 random bytes: the library indexes past its end on every encode, and panics."""
    rng = random.Random(0)
    return base64.b64encode(struct.pack("<I", 64) + bytes(rng.getrandbits(8) for _ in range(64)) + b"ab\0").decode()


def test_the_library_does_panic_on_this_file_so_the_test_can_fail(tmp_path):
    """The control: the library itself prints a panic on fd 2 for this tokenizer (the hook runs before Python
    sees the PanicException)."""
    folder = precompiled_unigram(tmp_path / "m", damaged_charsmap())
    code = ("import sys, tokenizers\nt = tokenizers.Tokenizer.from_file(sys.argv[1])\n"
            "try:\n    t.encode('dog')\nexcept BaseException:\n    pass\n")
    done = subprocess.run([sys.executable, "-c", code, str(folder / "tokenizer.json")], capture_output=True, text=True,
                          timeout=60, check=False)
    assert "panicked at" in done.stderr


@pytest.mark.parametrize("backtrace", [None, pytest.param("1", marks=pytest.mark.slow)])  # "1": three processes more
# (four seconds of CPU), CI's slow step; the README's command runs the same runs without RUST_BACKTRACE
def test_a_panicking_tokenizer_leaves_stderr_empty_or_one_line(tmp_path, backtrace):
    folder = precompiled_unigram(tmp_path / "m", damaged_charsmap())
    env = {"RUST_BACKTRACE": backtrace} if backtrace else {}
    for args in (["undertrained", "--json"], ["map", "--json"]):
        done = embscope(*args, "-c", folder, env=env)
        assert done.returncode == 0 and done.stderr == "", (args, done.stderr[-1000:])
        json.loads(done.stdout)
    done = embscope("similarity", "dog", "cat", "-c", folder, env=env)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [done.stderr.strip()] and done.stderr.startswith("Error: "), done.stderr[-500:]


def test_a_charsmap_that_is_not_base64_panics_while_loading_and_says_nothing(tmp_path):
    folder = precompiled_unigram(tmp_path / "m", "AAAAA")
    done = embscope("norms", "--json", "-c", folder)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    done = embscope("similarity", "dog", "cat", "-c", folder)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1 and done.stderr.startswith("Error: ")


def sentencepiece_with_nul(path: Path) -> int:
    """r02's tokenizer.model: a BPE model with byte fallback (the 256 <0xNN> pieces) and a NORMAL piece "\\0",
    which sentencepiece logs about (through absl, to fd 2) every time it loads the model. Its piece count."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    proto = pb.ModelProto()
    proto.trainer_spec.model_type = pb.TrainerSpec.BPE
    proto.trainer_spec.byte_fallback = True
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = False
    pieces = [("<unk>", pb.ModelProto.SentencePiece.UNKNOWN), ("<s>", pb.ModelProto.SentencePiece.CONTROL),
              ("</s>", pb.ModelProto.SentencePiece.CONTROL)]
    pieces += [(f"<0x{b:02X}>", pb.ModelProto.SentencePiece.BYTE) for b in range(256)]
    pieces += [("\0", pb.ModelProto.SentencePiece.NORMAL), ("\u2581dog", pb.ModelProto.SentencePiece.NORMAL),
               ("\u2581cat", pb.ModelProto.SentencePiece.NORMAL)]
    for piece, kind in pieces:
        proto.pieces.add(piece=piece, score=0.0, type=kind)
    path.write_bytes(proto.SerializeToString())
    return len(pieces)


def test_the_sentencepiece_log_stays_off_stderr(tmp_path):
    folder = tmp_path / "sp"
    folder.mkdir()
    count = sentencepiece_with_nul(folder / "tokenizer.model")
    np.save(folder / "wte.npy", np.random.default_rng(0).standard_normal((count, 8)).astype(np.float32))
    load = "import sys, sentencepiece as s\ns.SentencePieceProcessor().LoadFromSerializedProto(open(sys.argv[1], 'rb').read())"
    control = subprocess.run([sys.executable, "-c", load, str(folder / "tokenizer.model")], capture_output=True, text=True, timeout=60, check=False)
    assert "null character" in control.stderr  # the library does log here
    for args in (["info"], ["similarity", "dog", "cat", "--json"]):
        done = embscope(*args, "-c", folder)
        assert done.returncode == 0 and done.stderr == "", (args, done.stderr)


def python(code: str) -> subprocess.CompletedProcess:
    """`code` run by Python in a process of its own, embscope importable: its fd 2 is what the test reads."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_capture_hands_back_what_fd_2_got_and_restores_it(tmp_path):
    code = ("import os, sys\nfrom embscope.quiet import native_stderr\n"
            "with native_stderr() as outer:\n"
            "    os.write(2, b'native one\\n')\n"
            "    with native_stderr() as inner:\n"
            "        os.write(2, b'native two\\n')\n"
            "os.write(2, b'after\\n')\n"
            "print(repr(outer.text), repr(inner.text), outer.first_line())\n")
    done = python(code)
    assert done.stderr == "after\n"
    assert done.stdout.strip() == "'native one\\nnative two\\n' '' native one"


def test_a_child_started_inside_children_quiet_never_reaches_fd_2_and_fd_2_comes_back(tmp_path):
    code = ("import os, subprocess, sys\nfrom embscope.quiet import children_quiet, native_stderr\n"
            "writer = [sys.executable, '-c', 'import os, time; time.sleep(0.3); os.write(2, b\"child\\\\n\")']\n"
            "with children_quiet():\n"
            "    os.write(2, b'inside\\n')\n"
            "    child = subprocess.Popen(writer)\n"  # prints after the block has ended
            "os.write(2, b'after\\n')\n"
            "child.wait()\n"
            "with native_stderr() as captured:\n"  # a later capture does not get the child's text either
            "    os.write(2, b'native\\n')\n"
            "print(repr(captured.text), child.returncode)\n")
    done = python(code)
    assert done.stderr == "after\n"
    assert done.stdout.strip() == "'native\\n' 0"
