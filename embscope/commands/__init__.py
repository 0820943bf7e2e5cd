"""One module per command, each with `register(app)`. REGISTER names them, in the order --help lists them, and
cli.py registers those a run builds."""

from __future__ import annotations

from collections.abc import Callable

import typer

from . import (
    analogy,
    compare,
    export,
    geometry,
    info,
    neighbors,
    norms,
    params,
    positions,
    report,
    similarity,
    undertrained,
)
from . import map as map_

Register = Callable[[typer.Typer], None]

REGISTER: dict[str, Register] = {
    "info": info.register, "similarity": similarity.register, "neighbors": neighbors.register,
    "positions": positions.register, "norms": norms.register, "params": params.register,
    "undertrained": undertrained.register, "compare": compare.register, "geometry": geometry.register,
    "analogy": analogy.register, "map": map_.register, "export": export.register, "report": report.register,
}
