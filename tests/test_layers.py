"""The registry's lists and the layers between them (DESIGN's rules, read from the import statements): every
function a format or tokenizer kind names is the module's own, a list refuses two kinds of one name instead of
letting the second replace the first, the core imports nothing above it, analysis imports no rich, typer or
matplotlib, no tokenizer imports a formats module (formats hand tokenizers data), no embscope modules import
each other in a circle, and render draws the statistics analysis measured."""

import ast
from pathlib import Path

import numpy as np
import pytest
import typer
from conftest import source_nodes

import embscope.tokenizers
from embscope.compute.topk import ENGINES
from embscope.formats import FORMATS
from embscope.registry import Entry, Kind, Probe, entries, find, listed, named
from embscope.render.export_files import WRITERS as EXPORT_WRITERS
from embscope.render.neighbors_out import WRITERS as NEIGHBOR_WRITERS
from embscope.render.report import WRITERS as REPORT_WRITERS
from embscope.tokenizers import KINDS


@pytest.mark.parametrize("kinds", [FORMATS, KINDS], ids=["formats", "tokenizers"])
def test_every_named_function_is_a_modules_own(kinds):
    package = "embscope.formats" if kinds is FORMATS else "embscope.tokenizers"
    for kind in kinds:
        for field in ("sniff", "open", "names", "load_name", "related"):
            value = getattr(kind, field)
            if value is not None and getattr(value, "__name__", "") != "<lambda>":
                assert callable(value) and value.__module__.startswith(package), (kind.name, field, value)


def test_two_kinds_of_one_name_are_refused():
    never = Kind("twice", lambda probe: False, None, "first")
    with pytest.raises(ValueError, match="two kinds of file are named 'twice'"):
        listed(never, Kind("other", lambda probe: False, None, "second"), never)


def test_a_table_of_entries_refuses_two_of_one_name_and_finds_by_name():
    table = entries(Entry("tsv", "write_tsv", "first"), Entry("npz", "write_npz", "second"))
    assert [entry.name for entry in table] == ["tsv", "npz"]  # in the order given
    assert (named(table, "npz"), find(table, "jsonl")) == ("write_npz", None)
    with pytest.raises(KeyError):
        named(table, "jsonl")
    with pytest.raises(ValueError, match="two entries of one table are named 'tsv'"):
        entries(*table, Entry("tsv", "again", "third"))


@pytest.mark.parametrize("table", [ENGINES, REPORT_WRITERS, EXPORT_WRITERS, NEIGHBOR_WRITERS],
                         ids=["engines", "report", "export", "neighbors"])
def test_every_table_is_entries_with_a_reason(table):
    assert table and all(isinstance(entry, Entry) and entry.why for entry in table)
    assert entries(*table) == table  # no name twice


def test_a_sniff_is_handed_a_probe(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\ndog\n")
    probe = Probe.peek(vocab)
    assert probe == Probe(vocab, b"[PAD]\n[UNK]\ndog\n", 16)
    assert [kind.name for kind in KINDS if kind.sniff(probe)] == ["wordpiece"]
    assert Probe.peek(tmp_path) is None and Probe.peek(tmp_path / "absent") is None


def imported_modules(folder: Path, package: str) -> set[tuple[str, str]]:
    """(file, module) for every import in the package's folder, relative imports made absolute."""
    found = set()
    for path in folder.glob("*.py"):
        for node in source_nodes(path):
            if isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                module = ".".join(part for part in (base, node.module or "") if part)
                found.update((path.name, f"{module}.{alias.name}" if not node.module else module)
                             for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update((path.name, alias.name) for alias in node.names)
    return found


def test_formats_hand_tokenizers_data_never_the_reverse():
    """The GGUF reader hands the tokenizer its metadata's arrays; the pickled vocabularies call storage's
    unpickle_plain, which lies beneath both: no tokenizer module imports a formats module."""
    folder = Path(embscope.tokenizers.__file__).parent
    found = imported_modules(folder, "embscope.tokenizers")
    assert {(name, module) for name, module in found if module.startswith("embscope.formats")} == set()
    assert ("nanogpt_meta.py", "embscope.storage.unpickle") in found


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
    from embscope.commands import REGISTER, command_module
    assert all(callable(command_module(name).register) for name in REGISTER)
    assert list(typer.main.get_command(build()).commands) == list(COMMANDS)


# --- the layers, read from every module's import statements -----------------------------------------------------

PACKAGE = Path(embscope.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module a file imports (at the top, under TYPE_CHECKING or inside a function), relative imports made
    absolute; `from package import module` names the module."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in source_nodes(path):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = ".".join(p for p in (base if node.level else "", node.module or "") if p)
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                is_module = (PACKAGE.parent / submodule.replace(".", "/")).with_suffix(".py").exists() or \
                    (PACKAGE.parent / submodule.replace(".", "/") / "__init__.py").exists()
                found.add(submodule if is_module else module)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """Every embscope module's imports: parsed by the worker that runs these tests, not at every worker's
    collection (a second or two of CPU)."""
    return {module_name(path): imports_of(path) for path in PACKAGE.rglob("*.py")}


def test_the_core_imports_nothing_of_embscope_above_it(graph):
    above = {(module, imported) for module, found in graph.items() if module.startswith("embscope.core")
             for imported in found if imported.startswith("embscope") and not imported.startswith("embscope.core")}
    assert above == set()
    assert "embscope.core.errors" in graph and "embscope.core.role" in graph["embscope.core.checkpoint"]


def test_analysis_imports_no_rich_typer_or_matplotlib(graph):
    drawing = {(module, imported) for module, found in graph.items() if module.startswith("embscope.analysis")
               for imported in found if imported.split(".")[0] in ("rich", "typer", "click", "matplotlib")}
    assert drawing == set()


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start] & graph.keys())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    work.append((nxt, iter(sorted(graph[nxt] & graph.keys()))))
                    break
                if nxt in stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_circles_are_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_embscope_modules_import_each_other_in_a_circle(graph):
    assert circles(graph) == []
