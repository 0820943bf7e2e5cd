"""embscope: look inside the token and position embedding tables of a language-model checkpoint.

    import embscope
    emb = embscope.open("ckpt.pt")          # headers only; tables are read when used
    embscope.similarity(emb, ["king", "queen"]).pairs[0].cosine
    embscope.neighbors(emb, "king", k=5).neighbors
    embscope.undertrained_tables(emb).reports[0].candidates
    embscope.compare_series(["ckpt_1000.pt", "ckpt_2000.pt"], embscope.open).comparison
    embscope.geometry(emb, "token").isoscore

Each name below is imported when first used, so `import embscope` (and every command) loads only the
modules it needs; numpy itself is imported by the functions that make arrays, so opening a checkpoint and
looking words up load none, nor do the cosines of a few rows of a pickle, safetensors, .npy or ANDREA file
(other formats hand their tables to numpy). The commands answer through these same functions.
"""

from __future__ import annotations

from typing import Any

from .registry import lazy_attributes

# public name -> the module that defines it ("module:name" where the module calls it otherwise)
_API = {
    "AnalogyResult": "analysis.analogy", "Evaluation": "analysis.analogy", "analogy": "analysis.analogy",
    "evaluate_analogies": "analysis.analogy:evaluate", "read_question_file": "analysis.analogy",
    "CompareOptions": "analysis.compare", "Comparison": "analysis.compare",
    "SeriesComparison": "analysis.compare_series", "compare_series": "analysis.compare_series",
    "OutputComparison": "analysis.compare_output", "compare_output": "analysis.compare_output",
    "Geometry": "analysis.geometry", "geometry": "analysis.geometry",
    "ExportRows": "analysis.export", "RowSpec": "analysis.export", "export_rows": "analysis.export",
    "write_projector": "render.export_files", "write_word2vec": "render.export_files",
    "TableMap": "analysis.map", "table_map": "analysis.map",
    "NormSummary": "analysis.norms", "NormsReport": "analysis.norms", "norms_report": "analysis.norms",
    "row_norms": "analysis.norms", "summarize": "analysis.norms",
    "Report": "analysis.report", "report": "analysis.report:gather", "write_report": "render.report:write",
    "TokenKinds": "analysis.token_kinds", "token_kinds": "analysis.token_kinds",
    "UndertrainedReport": "analysis.undertrained", "UndertrainedTables": "analysis.undertrained",
    "find_undertrained": "analysis.undertrained", "undertrained_tables": "analysis.undertrained",
    "InfoReport": "analysis.info", "info_report": "analysis.info",
    "ParamsReport": "analysis.params", "params_report": "analysis.params",
    "PositionsResult": "analysis.positions", "default_pairs": "analysis.positions",
    "position_pairs": "analysis.positions", "position_profile": "analysis.positions", "positions": "analysis.positions",
    "NeighborsResult": "analysis.neighbors", "neighbors": "analysis.neighbors", "topk_all": "analysis.neighbors",
    "SimilarityResult": "analysis.similarity", "similarity": "analysis.similarity",
    "similarity_pairs": "analysis.similarity",
    "Head": "roles", "Role": "roles",
    "Checkpoint": "checkpoint", "EmbeddingTables": "checkpoint", "Table": "checkpoint", "TensorInfo": "checkpoint",
    "Embeddings": "embeddings", "open": "embeddings",
    "CheckpointError": "errors", "EmbscopeError": "errors", "InputError": "errors", "MissingPackageError": "errors",
    "OptionError": "errors", "OutputError": "errors", "PositionError": "errors", "TableError": "errors",
    "TokenError": "errors", "TokenizerError": "errors", "UnsafePickleError": "errors",
    "OpenOptions": "formats", "open_checkpoint": "formats",
    "WordLookup": "lookup", "lookup_word": "lookup",
    "token_name": "naming",
    "find_tokenizer": "tokenizers", "load_tokenizer": "tokenizers",
}
__all__ = sorted(_API)  # noqa: PLE0605  the names of the table above, kept in one place


_attribute = lazy_attributes(__name__, _API, globals())


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version
        return version("embscope")
    return _attribute(name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
