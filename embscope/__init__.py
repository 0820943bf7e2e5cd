"""embscope: look inside the token and position embedding tables of a language-model checkpoint.

    import embscope
    emb = embscope.open("ckpt.pt")          # headers only; tables are read when used
    embscope.similarity(emb, ["king", "queen"]).pairs[0].cosine
    embscope.neighbors(emb, "king", k=5).neighbors
    embscope.undertrained_tables(emb).reports[0].candidates
    embscope.compare_series(["ckpt_1000.pt", "ckpt_2000.pt"], embscope.open).comparison
    embscope.geometry(emb, "token").isoscore

The public names are typed re-exports stated in __init__.pyi, which mypy and editors read (the package ships
py.typed); lazy_loader (scientific Python's SPEC 1) reads the same stub and imports each name's module on first use,
so that `import embscope` and every command line run (whose modules sit under this package) import only what they
use. The commands answer through these same functions.
"""

from __future__ import annotations

from typing import Any

import lazy_loader

from . import blas  # noqa: F401  first: the BLAS settings numpy reads when it loads (blas.py)
from .version import VERSION

_exported, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)


def __getattr__(name: str) -> Any:
    """A public name of __init__.pyi, imported on first use; and the version (embscope/version.py)."""
    if name == "__version__":
        return VERSION
    return _exported(name)
