"""The checkpoints of one training run, in step order: the files named, or the checkpoints a folder holds.

A folder's checkpoints are its files that a format reader recognises (nanoGPT `ckpt*.pt`, ANDREA dumps, nlm
pickles, ...) and its Hugging Face Trainer `checkpoint-N/` folders. The step is the one the file records; else
the one its name says (`step500_fp16`, `ckpt1000`; else its epoch, `epoch10`), else the last number standing alone
in its name (`model_300`, never gpt2's 2), else the step in its folder's name (`checkpoint-500/model.safetensors`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .core.checkpoint import Checkpoint
from .core.errors import CheckpointError, Message, Option, OptionError
from .core.text import quote
from .formats import sniff_readable
from .listing import clipped_list
from .storage.constants import NOT_WEIGHTS, PREFERRED_IN_DIRECTORY

TRAINER_FOLDER = re.compile(r"checkpoint-\d+")  # what transformers' Trainer names each save
# a number standing alone in a file's name (ckpt_300, 1000.pt); one glued to letters names no step: step500_fp16's 16
# is a dtype and gpt2's 2 a model, and taken as steps they ordered a run's files by name and misled its audit
NUMBER = re.compile(r"(?<![^\W_])\d+(?![^\W_])")
# a name that says its step (checkpoint-500, ckpt1000, step_1000, iter3000); for a folder the only rule, or
# runs/exp3 would be step 3
STEP_FOLDER = re.compile(r"(?:checkpoint|ckpt|step|iter)[-_]?(\d+)", re.IGNORECASE)
# a file's name that says its epoch (epoch10.pt): no step, but where no step is said it orders the run as one does
EPOCH = re.compile(r"epoch[-_]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Step:
    value: int | None
    source: str | None  # "file" (the checkpoint records it), "name" (read from a file or folder name), None

    def text(self) -> str:
        if self.value is None:
            return "step unknown"
        return f"step {self.value:,}" + (" (from the name)" if self.source == "name" else "")


def path_list(paths: Sequence[Path], option: str) -> Sequence[Path]:
    """`paths`, the checkpoints of an argument that takes several; one path given whole is refused, since going
    through a str opened each of its characters ('m' for '.../nlm') and a Path has no length (TypeError)."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise OptionError(Message("expected a list of checkpoints for ", Option(option), ", found the one path "
                                  f"{quote(os.fsdecode(paths))}: pass [path]"), option=option)
    return paths


def step_from_name(path: Path) -> int | None:
    """The step the name (without suffix) says, else the epoch it says, else its last number standing alone, else the
    step in the name of the folder holding it."""
    name = path.stem if path.is_file() else path.name
    numbers = ([found[1] for found in STEP_FOLDER.finditer(name)] or [found[1] for found in EPOCH.finditer(name)]
               or NUMBER.findall(name))
    if numbers:
        return int(numbers[-1])
    folder = STEP_FOLDER.search(path.parent.name) if path.is_file() else None
    return int(folder[1]) if folder else None


def checkpoint_step(checkpoint: Checkpoint) -> Step:
    if checkpoint.step is not None:
        return Step(checkpoint.step, "file")
    from_name = step_from_name(checkpoint.path)
    return Step(from_name, "name" if from_name is not None else None)


def folder_checkpoints(folder: Path) -> list[Path]:
    """The checkpoint files and Trainer checkpoint folders directly inside `folder`, by name."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as err:
        raise CheckpointError(f"expected a readable folder of checkpoints at {quote(folder)}, found "
                              f"{err.strerror or err}") from None
    files = [p for p in entries if p.is_file() and p.name not in NOT_WEIGHTS and sniff_readable(p) is not None]
    folders = [p for p in entries if p.is_dir() and TRAINER_FOLDER.fullmatch(p.name)]
    return files + folders


def is_run_folder(path: Path) -> bool:
    """A folder of a run's checkpoints (two or more), rather than one checkpoint's folder (a Hugging Face
    directory, sharded or not, or a folder holding one weights file)."""
    if not path.is_dir() or any((path / name).is_file() for name in PREFERRED_IN_DIRECTORY):
        return False
    return len(folder_checkpoints(path)) >= 2


def in_step_order(found: list[tuple[Path, Step]]) -> tuple[list[tuple[Path, Step]], list[str]]:
    """Known steps first, in order (ties by name); checkpoints with no step after them, by name, with a note."""
    known = sorted((entry for entry in found if entry[1].value is not None), key=lambda e: (e[1].value, e[0].name))
    unknown = [entry for entry in found if entry[1].value is None]
    notes = []
    if unknown:
        names = clipped_list([quote(path.name) for path, _ in unknown], "checkpoints", where=None)
        notes.append(f"{names}: no step in the file or its name, so placed last, in name order")
    counted = Counter(step.value for _, step in known)
    repeated = sorted(s for s, n in counted.items() if n > 1 and s is not None)
    if repeated:
        notes.append(f"several checkpoints are at step {', '.join(f'{s:,}' for s in repeated)}: ordered by name")
    return known + unknown, notes
