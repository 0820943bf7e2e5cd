"""embscope: look inside the token and position embedding tables of a language-model checkpoint.

    import embscope
    emb = embscope.open("ckpt.pt")          # headers only; tables are read when used
    embscope.similarity(emb, ["king", "queen"]).pairs[0].cosine
    embscope.neighbors(emb, "king", k=5).neighbors
"""

from .analysis.norms import NormSummary, row_norms, summarize
from .analysis.params import ParamsReport, params_report
from .analysis.positions import default_pairs, position_pairs, position_profile
from .analysis.similarity import NeighborsResult, SimilarityResult, neighbors, similarity, similarity_pairs, topk_all
from .analysis.token_kinds import TokenKinds, token_kinds
from .analysis.undertrained import UndertrainedReport, find_undertrained
from .checkpoint import Checkpoint, EmbeddingTables, Table, TensorInfo
from .embeddings import Embeddings, open
from .errors import CheckpointError, EmbscopeError, PositionError, TableError, TokenError, UnsafePickleError
from .formats import OpenOptions, open_checkpoint
from .lookup import WordLookup, lookup_word
from .tokenizers import find_tokenizer, load_tokenizer

__all__ = [
    "Checkpoint", "CheckpointError", "EmbeddingTables", "Embeddings", "EmbscopeError", "NeighborsResult",
    "NormSummary", "OpenOptions", "ParamsReport", "PositionError", "SimilarityResult", "Table", "TableError",
    "TensorInfo", "TokenError", "TokenKinds", "UndertrainedReport", "UnsafePickleError", "WordLookup", "default_pairs",
    "find_tokenizer", "find_undertrained", "load_tokenizer", "lookup_word", "neighbors", "open", "open_checkpoint", "params_report", "position_pairs",
    "position_profile", "row_norms", "similarity", "similarity_pairs", "summarize", "token_kinds", "topk_all",
]
__version__ = "0.1.0"
