"""What the CPU can do natively, read from /proc/cpuinfo (Linux); None where the system does not say."""

from __future__ import annotations

from pathlib import Path

from .core import files
from .core.errors import CheckpointError, Message, Option

CPU_INFO = Path("/proc/cpuinfo")
MAX_CPU_INFO = 16 << 20  # a few KB per core: far past a machine of a thousand cores
BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 instructions that multiply bf16 without converting first


def native_bf16(cpu_info: Path | None = None) -> bool | None:
    """Whether the CPU multiplies bf16 natively; None when there is no cpuinfo to read."""
    try:  # a system file, not an input of the answer: not recorded
        text = files.read_bytes(cpu_info or CPU_INFO, MAX_CPU_INFO, "/proc/cpuinfo", record=False)
    except CheckpointError:
        return None
    for line in text.decode("utf-8", "replace").splitlines():
        if line.startswith("flags"):
            return any(flag in line.split() for flag in BF16_FLAGS)
    return None


def bf16_note(device: str, precision: str) -> str | None:
    """The one note for bf16 arithmetic on a CPU that only emulates it."""
    if device != "cpu" or precision != "bf16" or native_bf16() is not False:
        return None
    return Message(Option("precision", "bf16"), " on this CPU: it has no native bf16 matmul "
                   f"({' or '.join(BF16_FLAGS)} not in {CPU_INFO}), so torch emulates it and fp32 is likely as fast")
