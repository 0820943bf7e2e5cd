"""Where batched work runs: the device and precision choices, torch imported only when a GPU needs it,
and how much memory one block of work may take."""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from typing import Any

from ..core.errors import MissingPackageError, OptionError
from ..core.memory import available_memory
from ..hardware import native_bf16
from .rows import SCORE_BLOCK_BYTES

DEVICES = ("auto", "cpu", "cuda", "mps")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "auto")

# On CUDA a block takes at most this much, and at most an eighth of the free device memory.
CUDA_BLOCK_BYTES = 1 << 30
# numbers a CPU pass touches below which it runs on one thread: a streamed search of the sample's 1,024 x 128 table
# took 31 ms on two threads and 10 ms on one (a pool started and joined for each block and selection)
SHARED_MIN_VALUES = 1 << 20


def torch_module() -> Any:
    """torch, or a one-line error naming the missing package."""
    try:
        import torch
    except ImportError:
        raise MissingPackageError("this device or precision", "torch", "torch") from None
    return torch


def gpu_evidence() -> bool:
    """Whether the machine shows a GPU without importing torch (~1.5 s): NVIDIA/ROCm/WSL device nodes on
    Linux, any macOS arm64 for MPS; CUDA_VISIBLE_DEVICES="" or "-1" counts as no GPU."""
    if sys.platform == "darwin":
        return os.uname().machine == "arm64"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return bool(glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd")
                or os.path.exists("/dev/dxg"))


def mps_available(torch: Any) -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_device(device: str = "auto") -> str:
    """Turn "auto" | "cpu" | "cuda" | "mps" into the device the kernels will use.

    "auto" gives "cuda" when torch sees a CUDA GPU, else "mps" when available, else "cpu"; torch is
    imported for it only when torch is installed and the machine shows a GPU (gpu_evidence).
    Asking for "cuda" or "mps" without one raises OptionError.
    """
    if device not in DEVICES:
        raise OptionError(f"device must be one of {', '.join(DEVICES)}; got {device!r}", option="device")
    if device == "cpu":
        return "cpu"
    if device == "auto":
        torch_loaded = "torch" in sys.modules
        if not torch_loaded and (importlib.util.find_spec("torch") is None or not gpu_evidence()):
            return "cpu"
        torch = torch_module()
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if mps_available(torch) else "cpu"
    torch = torch_module()
    if device == "cuda" and not torch.cuda.is_available():
        raise OptionError("device cuda was asked for, but torch sees no CUDA GPU on this machine", option="device")
    if device == "mps" and not mps_available(torch):
        raise OptionError("device mps was asked for, but torch reports MPS as unavailable", option="device")
    return device


# multiply-adds of a search below which "auto" stays fp32 on a CPU with native bf16: a fresh process pays about 1.1 s
# to import torch (2-core AMX Xeon, neighbors --all in fresh processes, alternated, load 1.8-2.5: 16,384 x 512,
# 1.4e11, bf16 2.75-2.90 s against fp32's 2.53-2.59 s; 24,576 x 512, 3.1e11, 3.66-3.70 s against 5.23-5.49 s)
BF16_LEAST_WORK = 3e11


def resolve_precision(precision: str, device: str, work: float | None = None) -> str:
    """Turn "auto" into a precision for the device; any other value passes through.

    "auto" is bf16 candidates made exact by an fp32 re-rank (bf16_exact) where bf16 is multiplied natively:
    a GPU that supports bf16 (else fp16 candidates), or a CPU with AMX or avx512_bf16 and torch installed (on a
    2-core AMX Xeon the exact bf16 search beat numpy's fp32, docs/speed.md) for a search of at least
    BF16_LEAST_WORK multiply-adds (`work`: queries x rows x dim; None: as large as that). On other CPUs, and for
    smaller searches, it is fp32: torch emulates bf16 there, several times slower than fp32.
    """
    if precision not in PRECISIONS:
        raise OptionError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}", option="precision")
    if precision != "auto":
        return precision
    if device == "cpu":
        large = work is None or work >= BF16_LEAST_WORK
        native = large and native_bf16() and importlib.util.find_spec("torch") is not None
        return "bf16" if native else "fp32"
    if device == "cuda":
        return "bf16" if torch_module().cuda.is_bf16_supported() else "fp16"
    return "fp16"


def precision_label(precision: str) -> str:
    """How a result names the arithmetic that ran: bf16 is exact (bf16_exact), fp16 and tf32 pick candidates
    that fp32 re-ranks, exact but for near-ties at the cut."""
    if precision == "bf16":
        return "bf16, exact by re-rank"
    return precision if precision == "fp32" else f"{precision} candidates, re-ranked in fp32"


def precision_run(precision: str, device: str) -> str:
    """The arithmetic that runs for a precision asked for on a device: resolve_precision's choice, and on the
    CPU fp32 for tf32 (a tensor-core mode that a CPU does not have)."""
    resolved = resolve_precision(precision, device)
    return "fp32" if device == "cpu" and resolved == "tf32" else resolved


def free_memory() -> int:
    """Bytes of RAM free for new work; a cautious guess when the OS will not say."""
    free = available_memory()
    return free if free is not None else 2 << 30


def cpu_threads() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def threads_for(values: int) -> int:
    """The threads a pass over `values` numbers shares its work with: one below SHARED_MIN_VALUES, where starting
    and joining a pool costs more than the second core saves."""
    return cpu_threads() if values >= SHARED_MIN_VALUES else 1


def cpu_block_bytes(n_columns: int, dim: int) -> int:
    """Bytes for one block of scores on the CPU: SCORE_BLOCK_BYTES, but no more than twice the unit table
    (a small table gains nothing from a huge block) nor an eighth of free RAM."""
    table_bytes = 4 * n_columns * dim
    return int(min(SCORE_BLOCK_BYTES, max(16 << 20, 2 * table_bytes), free_memory() // 8))


def torch_block_bytes(device: str) -> int:
    """Bytes for one block of scores on a torch device."""
    if device == "cuda":
        free, _ = torch_module().cuda.mem_get_info()
        return int(min(CUDA_BLOCK_BYTES, free // 8))
    return int(min(SCORE_BLOCK_BYTES, free_memory() // 8))
