"""embscope's version, written here only: pyproject.toml reads it (tool.setuptools.dynamic), and the package, the
CLI and the report take it from here, not from importlib.metadata (about 17 ms of imports at each start)."""

VERSION = "0.1.0"
