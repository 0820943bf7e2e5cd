"""embscope: look inside the token and position embedding tables of a language-model checkpoint."""

from .checkpoint import Checkpoint, EmbeddingTables, Table, TensorInfo
from .embeddings import Embeddings, open
from .errors import CheckpointError, EmbscopeError, PositionError, TableError, TokenError, UnsafePickleError
from .formats import OpenOptions, open_checkpoint
from .analysis.params import ParamsReport, params_report

__all__ = [
    "Checkpoint", "CheckpointError", "EmbeddingTables", "Embeddings", "EmbscopeError", "OpenOptions",
    "ParamsReport", "PositionError", "Table", "TableError", "TensorInfo", "TokenError", "UnsafePickleError",
    "open", "open_checkpoint", "params_report",
]
__version__ = "0.1.0"
