"""The optional packages embscope imports, each with the extra of pyproject.toml that installs it: an import that
fails on one of them is one line naming it, never a traceback, whichever module imported it first."""

from __future__ import annotations

from .core.errors import MissingPackageError

# the import name, and the extra (matplotlib and tokenizers are core dependencies; their extras stay, as aliases)
EXTRAS = {"torch": "torch", "matplotlib": "plot", "tokenizers": "hf", "regex": "regex", "tiktoken": "tiktoken",
          "sentencepiece": "sentencepiece", "gguf": "gguf", "onnx": "onnx", "h5py": "h5", "umap": "umap"}
PACKAGE_NAMES = {"umap": "umap-learn"}  # where pip's name is not the import's


def missing_package(err: ModuleNotFoundError, what: str) -> MissingPackageError | None:
    """The error to show for an import of an optional package that failed; None for any other module."""
    name = (err.name or "").split(".")[0]
    extra = EXTRAS.get(name)
    if extra is None:
        return None
    return MissingPackageError(what, PACKAGE_NAMES.get(name, name), extra)
