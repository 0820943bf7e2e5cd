"""embscope: look inside the token and position embedding tables of a language-model checkpoint.

    import embscope
    emb = embscope.open("ckpt.pt")          # headers only; tables are read when used
    embscope.similarity(emb, ["king", "queen"]).pairs[0].cosine
    embscope.neighbors(emb, "king", k=5).neighbors

Each name below is imported when first used, so `import embscope` (and every command) loads only the
modules it needs.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it
_API = {
    "NormSummary": "analysis.norms", "NormsReport": "analysis.norms", "norms_report": "analysis.norms",
    "row_norms": "analysis.norms", "summarize": "analysis.norms",
    "TokenKinds": "analysis.token_kinds", "token_kinds": "analysis.token_kinds",
    "UndertrainedReport": "analysis.undertrained", "find_undertrained": "analysis.undertrained",
    "InfoReport": "analysis.info", "info_report": "analysis.info",
    "ParamsReport": "analysis.params", "params_report": "analysis.params",
    "PositionsResult": "analysis.positions", "default_pairs": "analysis.positions",
    "position_pairs": "analysis.positions", "position_profile": "analysis.positions", "positions": "analysis.positions",
    "NeighborsResult": "analysis.similarity", "SimilarityResult": "analysis.similarity",
    "neighbors": "analysis.similarity", "similarity": "analysis.similarity",
    "similarity_pairs": "analysis.similarity", "topk_all": "analysis.similarity",
    "Head": "roles", "Role": "roles",
    "Checkpoint": "checkpoint", "EmbeddingTables": "checkpoint", "Table": "checkpoint", "TensorInfo": "checkpoint",
    "Embeddings": "embeddings", "open": "embeddings",
    "CheckpointError": "errors", "EmbscopeError": "errors", "PositionError": "errors", "TableError": "errors",
    "TokenError": "errors", "UnsafePickleError": "errors",
    "OpenOptions": "formats", "open_checkpoint": "formats",
    "WordLookup": "lookup", "lookup_word": "lookup",
    "token_name": "naming",
    "find_tokenizer": "tokenizers", "load_tokenizer": "tokenizers",
}
__all__ = sorted(_API)  # noqa: PLE0605  the names of the table above, kept in one place


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version
        return version("embscope")
    if name not in _API:
        raise AttributeError(f"module 'embscope' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
