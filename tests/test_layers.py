"""The registry's lists and the layers between them: every function a format or tokenizer kind names exists, a
list refuses two kinds of one name instead of letting the second replace the first, no tokenizer reaches into a
formats module, and render draws the statistics analysis measured."""

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import typer

import embscope.tokenizers
from embscope.formats import FORMATS
from embscope.registry import Kind, Probe, references
from embscope.tokenizers import KINDS


@pytest.mark.parametrize("kinds", [FORMATS, KINDS], ids=["formats", "tokenizers"])
def test_every_named_function_exists(kinds):
    found = references(kinds)
    assert {where.rsplit(".", 1)[0] for where, _ in found} == {kind.name for kind in kinds}
    for where, reference in found:
        assert callable(reference.resolve()), where


def test_two_kinds_of_one_name_are_refused():
    from embscope.registry import listed
    never = Kind("twice", lambda probe: False, None, "first")
    with pytest.raises(ValueError, match="two kinds of file are named 'twice'"):
        listed(never, Kind("other", lambda probe: False, None, "second"), never)


def test_a_sniff_is_handed_a_probe(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\ndog\n")
    probe = Probe.peek(vocab)
    assert probe == Probe(vocab, b"[PAD]\n[UNK]\ndog\n", 16)
    assert [kind.name for kind in KINDS if kind.sniff(probe)] == ["wordpiece"]
    assert Probe.peek(tmp_path) is None and Probe.peek(tmp_path / "absent") is None


def test_listing_the_kinds_imports_no_kind_module():
    code = ("import sys; from embscope.tokenizers import KINDS; from embscope.formats import FORMATS; "
            "print(sorted(m for m in sys.modules if m.startswith(('embscope.tokenizers.', 'embscope.formats.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert ast.literal_eval(out) == ["embscope.formats._base", "embscope.formats._checks", "embscope.formats.constants",
                         "embscope.formats.kinds", "embscope.tokenizers.base", "embscope.tokenizers.byte_alphabet",
                         "embscope.tokenizers.kinds"]


def imported_modules(folder: Path, package: str) -> set[tuple[str, str]]:
    """(file, module) for every import in the package's folder, relative imports made absolute."""
    found = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                module = ".".join(part for part in (base, node.module or "") if part)
                found.update((path.name, f"{module}.{alias.name}" if not node.module else module)
                             for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update((path.name, alias.name) for alias in node.names)
    return found


def test_tokenizers_use_only_the_formats_public_names():
    """The GGUF reader hands the tokenizer its metadata's arrays; the pickled vocabularies call formats'
    unpickle_plain: no tokenizer module reaches into a reader or a formats helper."""
    folder = Path(embscope.tokenizers.__file__).parent
    reaching = {(name, module) for name, module in imported_modules(folder, "embscope.tokenizers")
                if module.startswith("embscope.formats") and module != "embscope.formats"}
    assert reaching == set()
    assert ("nanogpt_meta.py", "embscope.formats") in imported_modules(folder, "embscope.tokenizers")


def test_the_report_carries_the_median_and_mad_its_robust_z_used():
    """The plots draw the band from the report: its median and MAD are plain numpy's, and norm_z is built on them."""
    from embscope.analysis.undertrained import find_undertrained
    rng = np.random.default_rng(0)
    table = rng.normal(size=(200, 8)).astype(np.float32)
    table[5] = np.nan  # a row whose norm is not finite is left out of both
    report = find_undertrained(table, None)
    norms = np.linalg.norm(table.astype(np.float64), axis=1)[np.isfinite(table).all(axis=1)]
    median = np.median(norms)
    mad = np.median(np.abs(norms - median))
    assert report.norm_median == pytest.approx(median, rel=1e-12)
    assert report.norm_mad == pytest.approx(mad, rel=1e-12)
    assert report.norm_z[0] == pytest.approx((report.norms[0] - median) / (1.4826 * mad), rel=1e-9)


def test_every_command_named_registers_one_command():
    from embscope.cli import COMMANDS, build
    from embscope.commands import REGISTER
    assert all(callable(register.resolve()) for register in REGISTER.values())
    assert list(typer.main.get_command(build()).commands) == list(COMMANDS)
