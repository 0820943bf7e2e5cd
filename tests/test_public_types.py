"""A user's script sees real types: the package ships py.typed and re-exports its API plainly, so mypy reveals
`embscope.open(...)` as Embeddings and a similarity's cosine as a float (None where undefined), not Any."""

from __future__ import annotations

from pathlib import Path

import pytest

import embscope

USER_SCRIPT = """\
import embscope

emb = embscope.open("ckpt.pt")
reveal_type(emb)
reveal_type(embscope.similarity(emb, ["king", "queen"]).pairs[0].cosine)
reveal_type(embscope.neighbors(emb, "king", k=5))
"""


def test_the_package_ships_py_typed():
    assert (Path(embscope.__file__).parent / "py.typed").is_file()
    import tomllib
    project = tomllib.loads((Path(embscope.__file__).parent.parent / "pyproject.toml").read_text())
    # the stub is the types mypy reads, and what lazy_loader imports the public names from
    assert {"py.typed", "__init__.pyi"} <= set(project["tool"]["setuptools"]["package-data"]["embscope"])


@pytest.mark.slow  # mypy reads the whole package: about 12 s of CPU
def test_mypy_reveals_real_types_in_a_users_script(tmp_path):
    from mypy import api
    (tmp_path / "user.py").write_text(USER_SCRIPT)
    out, err, code = api.run(["--no-incremental", "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent",
                              str(tmp_path / "user.py")])
    revealed = [line.split("Revealed type is ", 1)[1] for line in out.splitlines() if "Revealed type is" in line]
    assert revealed == ['"embscope.embeddings.Embeddings"', '"float | None"',
                        '"embscope.analysis.neighbors.NeighborsResult"'], (out, err)
    assert code == 0, out
