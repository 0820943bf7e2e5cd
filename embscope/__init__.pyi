"""The types of the package face (embscope/__init__.py re-exports these names on first use): mypy and editors
read this file, so a user's script sees the real functions and results."""

from .analysis.analogy import AnalogyResult, Evaluation, analogy, evaluate_analogies, read_question_file
from .analysis.compare import CompareOptions, Comparison
from .analysis.compare_output import OutputComparison, compare_output
from .analysis.compare_series import SeriesComparison, compare_series
from .analysis.export import ExportRows, RowSpec, export_rows
from .analysis.geometry import Geometry, geometry
from .analysis.info import InfoReport, info_report
from .analysis.map import TableMap, table_map
from .analysis.neighbors import NeighborsResult, neighbors, topk_all
from .analysis.norms import NormsReport, NormSummary, norms_report, row_norms, summarize
from .analysis.params import ParamsReport, params_report
from .analysis.positions import PositionsResult, default_pairs, position_pairs, position_profile, positions
from .analysis.report import Report, report
from .analysis.similarity import SimilarityResult, similarity, similarity_pairs
from .analysis.token_kinds import TokenKinds, token_kinds
from .analysis.undertrained import UndertrainedReport, UndertrainedTables, find_undertrained, undertrained_tables
from .core.checkpoint import Checkpoint, EmbeddingTables, Table, TensorInfo
from .core.errors import (
    CheckpointError,
    EmbscopeError,
    InputError,
    MissingPackageError,
    OptionError,
    OutputError,
    PositionError,
    TableError,
    TokenError,
    TokenizerError,
    UnsafePickleError,
)
from .core.role import Head, Role
from .embeddings import Embeddings, open
from .formats import OpenOptions, open_checkpoint
from .lookup import WordLookup, lookup_word
from .naming import token_name
from .render.export_files import write_projector, write_word2vec
from .render.report import write_report
from .tokenizers import find_tokenizer, load_tokenizer

__all__ = [
    "AnalogyResult",
    "Checkpoint",
    "CheckpointError",
    "CompareOptions",
    "Comparison",
    "EmbeddingTables",
    "Embeddings",
    "EmbscopeError",
    "Evaluation",
    "ExportRows",
    "Geometry",
    "Head",
    "InfoReport",
    "InputError",
    "MissingPackageError",
    "NeighborsResult",
    "NormSummary",
    "NormsReport",
    "OpenOptions",
    "OptionError",
    "OutputComparison",
    "OutputError",
    "ParamsReport",
    "PositionError",
    "PositionsResult",
    "Report",
    "Role",
    "RowSpec",
    "SeriesComparison",
    "SimilarityResult",
    "Table",
    "TableError",
    "TableMap",
    "TensorInfo",
    "TokenError",
    "TokenKinds",
    "TokenizerError",
    "UndertrainedReport",
    "UndertrainedTables",
    "UnsafePickleError",
    "WordLookup",
    "analogy",
    "compare_output",
    "compare_series",
    "default_pairs",
    "evaluate_analogies",
    "export_rows",
    "find_tokenizer",
    "find_undertrained",
    "geometry",
    "info_report",
    "load_tokenizer",
    "lookup_word",
    "neighbors",
    "norms_report",
    "open",
    "open_checkpoint",
    "params_report",
    "position_pairs",
    "position_profile",
    "positions",
    "read_question_file",
    "report",
    "row_norms",
    "similarity",
    "similarity_pairs",
    "summarize",
    "table_map",
    "token_kinds",
    "token_name",
    "topk_all",
    "undertrained_tables",
    "write_projector",
    "write_report",
    "write_word2vec",
]


__version__: str
