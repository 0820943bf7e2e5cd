"""embscope: look inside the token and position embedding tables of a language-model checkpoint.

    import embscope
    emb = embscope.open("ckpt.pt")          # headers only; tables are read when used
    embscope.similarity(emb, ["king", "queen"]).pairs[0].cosine
    embscope.neighbors(emb, "king", k=5).neighbors
    embscope.undertrained_tables(emb).reports[0].candidates
    embscope.compare_series(["ckpt_1000.pt", "ckpt_2000.pt"], embscope.open).comparison
    embscope.geometry(emb, "token").isoscore

The names below are typed re-exports: __init__.pyi states them for mypy and editors (the package ships py.typed),
and each is imported from the module in EXPORTS on first use, so that `import embscope` and every command line run
(whose modules sit under this package) import only what they use. The commands answer through these same functions.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import blas  # noqa: F401  first: the BLAS settings numpy reads when it loads (blas.py)

# each public name: the module that defines it and its name there (the types are in __init__.pyi)
EXPORTS: dict[str, tuple[str, str]] = {
    "AnalogyResult": ("embscope.analysis.analogy", "AnalogyResult"),
    "Checkpoint": ("embscope.core.checkpoint", "Checkpoint"),
    "CheckpointError": ("embscope.core.errors", "CheckpointError"),
    "CompareOptions": ("embscope.analysis.compare", "CompareOptions"),
    "Comparison": ("embscope.analysis.compare", "Comparison"),
    "EmbeddingTables": ("embscope.core.checkpoint", "EmbeddingTables"),
    "Embeddings": ("embscope.embeddings", "Embeddings"),
    "EmbscopeError": ("embscope.core.errors", "EmbscopeError"),
    "Evaluation": ("embscope.analysis.analogy", "Evaluation"),
    "ExportRows": ("embscope.analysis.export", "ExportRows"),
    "Geometry": ("embscope.analysis.geometry", "Geometry"),
    "Head": ("embscope.core.role", "Head"),
    "InfoReport": ("embscope.analysis.info", "InfoReport"),
    "InputError": ("embscope.core.errors", "InputError"),
    "MissingPackageError": ("embscope.core.errors", "MissingPackageError"),
    "NeighborsResult": ("embscope.analysis.neighbors", "NeighborsResult"),
    "NormSummary": ("embscope.analysis.norms", "NormSummary"),
    "NormsReport": ("embscope.analysis.norms", "NormsReport"),
    "OpenOptions": ("embscope.formats", "OpenOptions"),
    "OptionError": ("embscope.core.errors", "OptionError"),
    "OutputComparison": ("embscope.analysis.compare_output", "OutputComparison"),
    "OutputError": ("embscope.core.errors", "OutputError"),
    "ParamsReport": ("embscope.analysis.params", "ParamsReport"),
    "PositionError": ("embscope.core.errors", "PositionError"),
    "PositionsResult": ("embscope.analysis.positions", "PositionsResult"),
    "Report": ("embscope.analysis.report", "Report"),
    "Role": ("embscope.core.role", "Role"),
    "RowSpec": ("embscope.analysis.export", "RowSpec"),
    "SeriesComparison": ("embscope.analysis.compare_series", "SeriesComparison"),
    "SimilarityResult": ("embscope.analysis.similarity", "SimilarityResult"),
    "Table": ("embscope.core.checkpoint", "Table"),
    "TableError": ("embscope.core.errors", "TableError"),
    "TableMap": ("embscope.analysis.map", "TableMap"),
    "TensorInfo": ("embscope.core.checkpoint", "TensorInfo"),
    "TokenError": ("embscope.core.errors", "TokenError"),
    "TokenKinds": ("embscope.analysis.token_kinds", "TokenKinds"),
    "TokenizerError": ("embscope.core.errors", "TokenizerError"),
    "UndertrainedReport": ("embscope.analysis.undertrained", "UndertrainedReport"),
    "UndertrainedTables": ("embscope.analysis.undertrained", "UndertrainedTables"),
    "UnsafePickleError": ("embscope.core.errors", "UnsafePickleError"),
    "WordLookup": ("embscope.lookup", "WordLookup"),
    "analogy": ("embscope.analysis.analogy", "analogy"),
    "compare_output": ("embscope.analysis.compare_output", "compare_output"),
    "compare_series": ("embscope.analysis.compare_series", "compare_series"),
    "default_pairs": ("embscope.analysis.positions", "default_pairs"),
    "evaluate_analogies": ("embscope.analysis.analogy", "evaluate"),
    "export_rows": ("embscope.analysis.export", "export_rows"),
    "find_tokenizer": ("embscope.tokenizers", "find_tokenizer"),
    "find_undertrained": ("embscope.analysis.undertrained", "find_undertrained"),
    "geometry": ("embscope.analysis.geometry", "geometry"),
    "info_report": ("embscope.analysis.info", "info_report"),
    "load_tokenizer": ("embscope.tokenizers", "load_tokenizer"),
    "lookup_word": ("embscope.lookup", "lookup_word"),
    "neighbors": ("embscope.analysis.neighbors", "neighbors"),
    "norms_report": ("embscope.analysis.norms", "norms_report"),
    "open": ("embscope.embeddings", "open"),
    "open_checkpoint": ("embscope.formats", "open_checkpoint"),
    "params_report": ("embscope.analysis.params", "params_report"),
    "position_pairs": ("embscope.analysis.positions", "position_pairs"),
    "position_profile": ("embscope.analysis.positions", "position_profile"),
    "positions": ("embscope.analysis.positions", "positions"),
    "read_question_file": ("embscope.analysis.analogy", "read_question_file"),
    "report": ("embscope.analysis.report", "gather"),
    "row_norms": ("embscope.analysis.norms", "row_norms"),
    "similarity": ("embscope.analysis.similarity", "similarity"),
    "similarity_pairs": ("embscope.analysis.similarity", "similarity_pairs"),
    "summarize": ("embscope.analysis.norms", "summarize"),
    "table_map": ("embscope.analysis.map", "table_map"),
    "token_kinds": ("embscope.analysis.token_kinds", "token_kinds"),
    "token_name": ("embscope.naming", "token_name"),
    "topk_all": ("embscope.analysis.neighbors", "topk_all"),
    "undertrained_tables": ("embscope.analysis.undertrained", "undertrained_tables"),
    "write_projector": ("embscope.render.export_files", "write_projector"),
    "write_report": ("embscope.render.report", "write"),
    "write_word2vec": ("embscope.render.export_files", "write_word2vec"),
}

__all__ = list(EXPORTS)


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept (PEP 562)."""
    if name == "__version__":
        from importlib.metadata import version
        return version("embscope")
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = EXPORTS[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *EXPORTS])
