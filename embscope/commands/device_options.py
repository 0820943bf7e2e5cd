"""--device and --precision, for the commands whose batched work can run on a GPU. Apart from commands.options, so
that a command without them starts without compute.devices (and the /proc/cpuinfo reader it imports)."""

# No `from __future__ import annotations`: see commands.options.

from enum import Enum
from typing import Annotated

import typer

from ..compute.devices import DEVICES, PRECISIONS

# the values come from compute, the one place that knows the devices and arithmetic it supports
Device = Enum("Device", {value: value for value in DEVICES}, type=str)  # type: ignore[misc]
Precision = Enum("Precision", {value: value for value in PRECISIONS}, type=str)  # type: ignore[misc]
AUTO_DEVICE = Device("auto")
AUTO_PRECISION = Precision("auto")  # bf16 made exact where bf16 is native, else fp32 (compute.resolve_precision)

DeviceOption = Annotated[Device, typer.Option(
    "--device", help="Where the batched work runs; auto = a GPU when torch sees one.")]
PrecisionOption = Annotated[Precision, typer.Option(
    "--precision", help="Arithmetic for the batched products; auto: a bf16 pass made exact by an fp32 re-rank where "
            "bf16 is native (a GPU; a CPU with AMX or avx512_bf16, for a search of 3e11 multiply-adds or more), else fp32.")]
