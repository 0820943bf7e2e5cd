"""One module per command, each with `register(app)`. REGISTER names them, in the order --help lists them, and
cli.py registers those a run builds. The modules are named through lazy modules, as the formats' readers are
(registry.py): mypy reads the modules themselves and checks every register against Register, and a run imports
only the modules of the commands it builds."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..registry import lazy_modules

if TYPE_CHECKING:
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
else:
    (analogy, compare, export, geometry, info, map_, neighbors, norms, params, positions, report, similarity,
     undertrained) = lazy_modules(__package__, "analogy", "compare", "export", "geometry", "info", "map", "neighbors",
                                  "norms", "params", "positions", "report", "similarity", "undertrained")

Register = Callable[["typer.Typer"], None]

REGISTER: dict[str, Register] = {
    "info": info.register, "similarity": similarity.register, "neighbors": neighbors.register,
    "positions": positions.register, "norms": norms.register, "params": params.register,
    "undertrained": undertrained.register, "compare": compare.register, "geometry": geometry.register,
    "analogy": analogy.register, "map": map_.register, "export": export.register, "report": report.register,
}
