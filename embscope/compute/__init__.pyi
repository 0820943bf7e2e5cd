"""The types of compute's names (compute/__init__.py re-exports them on first use): mypy and editors read this
file."""

from .cosines import RandomPairs, cosine_blocks, cosines_to, pair_cosines, random_pairs
from .devices import DEVICES, PRECISIONS, precision_label, precision_run, resolve_device, resolve_precision
from .rows import TableChecksum, mean_row, raw_blocks, row_blocks, row_norms, unit_rows
from .streamed import StreamedTopK
from .topk import TopK, topk_rows, topk_scores, topk_stream, topk_vectors

__all__ = [
    "DEVICES",
    "PRECISIONS",
    "RandomPairs",
    "StreamedTopK",
    "TableChecksum",
    "TopK",
    "cosine_blocks",
    "cosines_to",
    "mean_row",
    "pair_cosines",
    "precision_label",
    "precision_run",
    "random_pairs",
    "raw_blocks",
    "resolve_device",
    "resolve_precision",
    "row_blocks",
    "row_norms",
    "topk_rows",
    "topk_scores",
    "topk_stream",
    "topk_vectors",
    "unit_rows",
]
