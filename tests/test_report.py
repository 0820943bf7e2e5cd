"""`embscope report`: every section on the sample and on small files written here, the numbers in the page
equal to the commands' --json numbers and to plain numpy, the compare section over a run's folder, the
Markdown folder, sections that cannot be made saying why, no file that was read written over, and the page
loaded in headless Chromium: nothing requested, no console error, not blank."""

from __future__ import annotations

import json
import os
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from chromium import distinct_colours, find_chromium, inked_share, load
from conftest import harris_tokenizer, run, run_json

ROOT = Path(__file__).resolve().parent.parent
DOCS_EXAMPLE = re.compile(r"^\$ embscope report --out /tmp/embscope-report\.html\n(.*?)```", flags=re.MULTILINE | re.DOTALL)
SAMPLE_LINE = "checkpoint: bundled sample (Shakespeare GPT, step 3000); pass -c PATH for your own"
SECTIONS = ["info", "params", "norms", "positions", "undertrained", "neighbors", "map", "geometry", "compare"]
ONE_CHECKPOINT = "one checkpoint given: repeat -c, or give a folder of a run's checkpoints, to compare"
WORDS = ["king", "queen", "apple", "pear", "<b>x</b>"]  # the last is no probe word, and must be escaped
V, D, T = 270, 8, 20  # rows past the tokenizer's 262 ids are padding


# ----------------------------------------------------------------------------- reading the page back


class Page(HTMLParser):
    """Each section's tables (title, columns, rows of (text, data-value)) and paragraphs (class, text)."""

    def __init__(self, text: str):
        super().__init__()
        self.sections: dict[str, dict] = {}
        self.section: dict | None = None
        self.title: str | None = None
        self.text: list[str] | None = None
        self.value: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.section = self.sections[attrs["id"]] = {"tables": [], "paragraphs": [], "class": attrs.get("class")}
        elif self.section is None:
            return
        elif tag == "p":
            self.text, self.kind = [], attrs.get("class")
        elif tag == "table":
            self.section["tables"].append({"title": self.title, "columns": [], "rows": []})
            self.title = None
        elif tag == "tr" and self.section["tables"][-1]["columns"]:  # a row after the header row
            self.section["tables"][-1]["rows"].append([])
        if tag in ("td", "th"):
            self.text, self.value = [], attrs.get("data-value")

    def handle_endtag(self, tag):
        if self.section is None or self.text is None:
            return
        text = "".join(self.text)
        if tag == "p":
            if self.kind == "title":
                self.title = text
            else:
                self.section["paragraphs"].append((self.kind, text))
            self.text = None
        elif tag == "th":
            self.section["tables"][-1]["columns"].append(text)
            self.text = None
        elif tag == "td":
            self.section["tables"][-1]["rows"][-1].append((text, json.loads(self.value) if self.value else None))
            self.text = None

    def handle_data(self, data):
        if self.text is not None:
            self.text.append(data)

    def table(self, section: str, title: str | None = None, columns: tuple[str, ...] | None = None) -> dict:
        """The first table of `section` whose title starts with `title`, or whose columns start with `columns`."""
        for table in self.sections[section]["tables"]:
            if (title is not None and (table["title"] or "").startswith(title)) or \
                    (columns is not None and tuple(table["columns"][:len(columns)]) == columns):
                return table
        raise AssertionError(f"no table {title or columns} in {section}")

    def row(self, section: str, first: str, **which) -> dict[str, tuple[str, object]]:
        """The row whose first cell reads `first`, as column -> (text, value)."""
        table = self.table(section, **which)
        for row in table["rows"]:
            if row[0][0] == first:
                return dict(zip(table["columns"], row))
        raise AssertionError(f"no row {first!r} in {section}")

    def missing(self, section: str, kind: str = "missing") -> list[str]:
        """Why a section, or a part of it, was not made (kind missing: a failure) or left out (kind absent: the
        checkpoint has nothing for it)."""
        return [text for found, text in self.sections[section]["paragraphs"] if found == kind]


def parse(path: Path) -> Page:
    return Page(path.read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- files written here


def small_run(folder: Path) -> dict:
    """A run's folder: two checkpoints (steps 100 and 200) of a token table with the tokenizer's words, and a
    position table whose position 0 stands out; the second has drifted, and WORDS[-1]'s row is far out."""
    folder.mkdir()
    ids = harris_tokenizer(folder, WORDS)
    rng = np.random.default_rng(0)
    token = rng.standard_normal((V, D)).astype(np.float32)
    position = rng.standard_normal((T, D)).astype(np.float32)
    position[0] *= 6
    later_token = token + np.float32(0.2) * rng.standard_normal((V, D)).astype(np.float32)
    later_token[ids[WORDS[-1]]] *= 40
    later_position = position + np.float32(0.1) * rng.standard_normal((T, D)).astype(np.float32)
    np.savez(folder / "ckpt_100.npz", token_emb=token, pos_emb=position)
    np.savez(folder / "ckpt_200.npz", token_emb=later_token, pos_emb=later_position)
    return {"ids": ids, "first": (token, position), "last": (later_token, later_position)}


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("sample") / "report.html"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("EMBSCOPE_CHECKPOINT", raising=False)
        result = run("report", "--out", out)
    return out, result.stdout, parse(out)


@pytest.fixture(scope="module")
def run_report(tmp_path_factory):
    """The report on a run's folder: --json, and the page it wrote."""
    base = tmp_path_factory.mktemp("run")
    made = small_run(base / "run")
    out = base / "run.html"
    document = run_json("report", "-c", base / "run", "--out", out, "--words", "king,queen,qz")
    return made, base / "run", document, parse(out), out


# ----------------------------------------------------------------------------- the sample


def test_the_sample_report_names_its_checkpoint_and_says_why_a_section_is_missing(sample_report):
    out, stdout, page = sample_report
    assert stdout.splitlines() == [
        SAMPLE_LINE,
        f"wrote the report to {out}: info, params, norms, positions, undertrained, neighbors, map, geometry",
        f"left out: compare ({ONE_CHECKPOINT})"]
    assert list(page.sections) == SECTIONS
    # docs/commands.md shows this run (its console example runs in CI's slow step: tests/test_readme.py)
    example = DOCS_EXAMPLE.search((ROOT / "docs" / "commands.md").read_text(encoding="utf-8"))
    assert example and example[1].replace("/tmp/embscope-report.html", str(out)).splitlines() == stdout.splitlines()
    assert page.missing("compare", "absent") == [f"left out: {ONE_CHECKPOINT}"]
    assert page.sections["compare"]["class"] == "absent"
    assert all(page.sections[s]["tables"] for s in SECTIONS[:-1])
    no_head = "no output projection in the file (tied, or a model without a language-model head)"
    # a tied head is a fact about the model, not a failure of the report: said plainly, never as an error
    assert page.missing("norms", "absent") == [f"left out: output projection: {no_head}"]
    assert all(page.missing(section) == [] for section in SECTIONS)


def test_the_sample_report_holds_the_numbers_the_commands_print(sample_report):
    _, _, page = sample_report
    params = run_json("params")
    assert page.row("params", "whole checkpoint", columns=("table",))["parameters"][1] == params["total"]
    token = page.row("params", "token (token_emb)", columns=("table",))
    assert token["parameters"][1] == params["token"] and token["share of total"] == ("13.69%", params["shares"]["token"])
    assert page.row("params", "position (pos_emb)", columns=("table",))["share of total"][1] == \
        params["shares"]["position"]

    norms = run_json("norms", "--table", "position")
    zero = next(a for a in norms["anomalies"] if a["index"] == 0)
    shown = page.table("positions", title="position 0 against the mean")["rows"][0]
    assert shown[0] == (f"{zero['norm']:.4g}", zero["norm"]) and shown[1][1] == norms["mean"]
    assert shown[2] == (f"{zero['ratio_to_mean']:.2f}x", zero["ratio_to_mean"]) and shown[3][1] == zero["z"] and shown[4][0] == "yes"

    profile = run_json("positions", "--profile")["profile"]["offsets"]
    by_distance = page.table("positions", title="similarity by distance")["rows"]
    assert [(row[0][1], row[1][1], row[3][1]) for row in by_distance] == \
        [(o["offset"], o["mean"], o["pairs"]) for o in profile]

    for word in ("the", "king"):
        found = run_json("neighbors", word)["neighbors"]
        table = page.table("neighbors", title=f"{word} -> ")
        assert [(row[1][1], row[2][0], row[3][1]) for row in table["rows"]] == \
            [(n["id"], n["token"], n["cosine"]) for n in found]

    probes = run_json("map")["probes"]
    placed = page.table("map", columns=("word", "tokens"))["rows"]
    assert [(row[0][0], row[2][1], row[3][1]) for row in placed] == [(p["label"], p["x"], p["y"]) for p in probes]

    candidates = run_json("undertrained")["candidates"]
    verified = sum(c["verified"] for c in candidates)
    listed = page.table("undertrained", title=f"candidates ({len(candidates)}; {verified} verified")["rows"]
    assert len(listed) == 20
    assert [(row[0][1], row[2][1], row[3][1]) for row in listed] == \
        [(c["id"], c["score"], c["norm"]) for c in candidates[:20]]


def test_a_note_on_the_probe_words_given_again_still_says_what_it_is(sample_report):
    """The map's words are the neighbours' probe words, with the same lookup note; a note given again is cut to what
    precedes its first colon (said_once), which here is the words the note is about, not its gist: the map said only
    'the, and, king, ...' and where the note was."""
    page = sample_report[2]
    space = "the space before the word is a token of its own (id 32), so it was left out"
    for section in ("neighbors", "map"):
        said = [text for kind, text in page.sections[section]["paragraphs"] if kind == "note" and "king, man" in text]
        assert said == [f"note: the, and, king, man, woman, father, mother, good: {space}"], section


def test_the_page_is_self_contained(sample_report):
    text = sample_report[0].read_text(encoding="utf-8")
    assert "<script" not in text and "<link" not in text and "@import" not in text and "<iframe" not in text
    for attribute in re.findall(r'(?:href|src)="([^"]*)"', text):
        assert attribute.startswith(("#", "data:image/png;base64,")), attribute
    assert set(re.findall(r"url\((.)", text)) == {"#"}
    # the only URLs left are the SVG namespaces, which name and fetch nothing
    assert set(re.findall(r"https?://[^\s\"'<>)]+", text)) <= {"http://www.w3.org/2000/svg",
                                                                "http://www.w3.org/1999/xlink"}
    assert "<!--" not in text and "<metadata>" not in text
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))  # figures never share an id


@pytest.mark.slow  # a browser's start and a page's layout: the page's own bytes are checked above without one
def test_the_page_renders_in_chromium_without_a_request_or_an_error(sample_report):
    if find_chromium() is None:
        if os.environ.get("EMBSCOPE_REQUIRE_CHROMIUM"):
            pytest.fail("Chromium is required here (EMBSCOPE_REQUIRE_CHROMIUM) and not installed")
        pytest.skip("Chromium is not installed (apt-get install chromium): the page is not loaded in a browser")
    path = sample_report[0]
    page = load(path, clips=("#figure-positions svg",), values=(
        "[...document.querySelectorAll('section')].map(s => s.id).join(' ')",
        "[...document.querySelectorAll('figure svg')].filter(s => s.getBoundingClientRect().width > 300).length"))
    # data: URLs are the page's own bytes (matplotlib keeps the heatmap as a PNG inside its SVG): nothing is fetched
    assert page.requests[0] == page.url
    assert [url for url in page.requests[1:] if not url.startswith("data:")] == []
    assert (page.console, page.exceptions, page.log_errors) == ([], [], [])
    assert list(page.values.values()) == [" ".join(SECTIONS), 8]
    assert inked_share(page.screenshot) > 0.03 and distinct_colours(page.screenshot) > 100
    heatmap = page.clips["#figure-positions svg"]
    assert heatmap.shape[1] > 600 and distinct_colours(heatmap) > 1000  # the RdBu heatmap and its curve


# ----------------------------------------------------------------------------- a run of small checkpoints


def test_a_run_folder_gives_every_section_and_the_compare_section(run_report):
    made, folder, document, page, out = run_report
    assert document["checkpoint"] == str(folder / "ckpt_200.npz") and document["step"] is None
    assert document["out"] == str(out) and document["format"] == "html" and document["files"] == [str(out)]
    assert document["sections"] == SECTIONS and document["missing"] == {}
    assert document["checkpoints"] == [str(folder / "ckpt_100.npz"), str(folder / "ckpt_200.npz")]
    assert list(page.sections) == SECTIONS
    # the compare figure is on the page (what it draws: tests/test_report_figures.py)
    assert re.findall(r'<figure id="figure-([\w-]+)"', out.read_text(encoding="utf-8")) == [
        "norms-token", "norms-position", "positions", "undertrained", "map-token", "map-position", "geometry-token",
        "geometry-position", "compare"]

    token_a, token_b = made["first"][0], made["last"][0]
    cosines = np.sum(token_a * token_b.astype(np.float64), axis=1) / (
        np.linalg.norm(token_a.astype(np.float64), axis=1) * np.linalg.norm(token_b.astype(np.float64), axis=1))
    compared = page.row("compare", "mean row cosine A vs B", columns=("measure",))["value"]
    assert compared[1] == pytest.approx(cosines.mean(), rel=1e-12)
    assert compared[1] == run_json("compare", folder / "ckpt_100.npz", folder / "ckpt_200.npz",
                                   "--sample", "0")["tables"]["token"]["mean_row_cosine"]
    movers = page.table("compare", title="top movers")["rows"]
    assert movers[0][0][1] == made["ids"][WORDS[-1]] and movers[0][1][0] == WORDS[-1]


def test_the_run_report_numbers_are_numpys_for_the_last_checkpoint(run_report):
    made, _, _, page, _ = run_report
    token, position = made["last"]
    assert page.row("params", "whole checkpoint", columns=("table",))["parameters"][1] == (V + T) * D
    norms = np.linalg.norm(position.astype(np.float64), axis=1)
    shown = page.table("positions", title="position 0 against the mean")["rows"][0]
    assert shown[0][1] == pytest.approx(norms[0], rel=1e-6) and shown[1][1] == pytest.approx(norms.mean(), rel=1e-6)
    assert shown[2][1] == pytest.approx(norms[0] / norms.mean(), rel=1e-6)

    unit = token.astype(np.float64) / np.linalg.norm(token.astype(np.float64), axis=1, keepdims=True)
    king = made["ids"]["king"]
    similar = unit @ unit[king]
    similar[king] = -np.inf
    listed = page.table("neighbors", title="king -> ")["rows"]
    assert [row[1][1] for row in listed] == np.argsort(-similar)[:10].tolist()
    assert [row[3][1] for row in listed] == pytest.approx(np.sort(similar)[::-1][:10], rel=1e-6)
    # --words: a word of two tokens is the mean of their rows, as `neighbors` forms it
    assert [t["title"] for t in page.sections["neighbors"]["tables"]] == [
        f"king -> {king} 'king'", f"queen -> {made['ids']['queen']} 'queen'", "qz -> 113 'q' 122 'z'"]
    assert page.sections["neighbors"]["paragraphs"][0] == (None, ("words: given with --words; for each, the 10 "
                                                           "nearest rows of the token table by cosine (`embscope "
                                                           "neighbors WORD`)"))
    assert page.table("map", title="words on the map: given with --words")["rows"][2][1][0] == "113 'q' 122 'z'"


def test_strings_from_the_file_are_escaped(run_report):
    text = run_report[4].read_text(encoding="utf-8")
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text
    anomalies = run_report[3].table("norms", title="anomalies")["rows"]
    assert (anomalies[0][0][1], anomalies[0][1][0]) == (run_report[0]["ids"][WORDS[-1]], WORDS[-1])


# ----------------------------------------------------------------------------- Markdown, missing sections, files


def test_markdown_writes_a_folder_and_says_why_sections_are_missing(tmp_path):
    path = tmp_path / "tied.npz"  # no position table, no tokenizer, a tied head, a table named like markup
    table = np.random.default_rng(1).standard_normal((50, D)).astype(np.float32)
    np.savez(path, **{"<b>x</b>": table, "lm_head.weight": table.copy()})  # a saved copy of a tied head
    out = tmp_path / "md"
    lines = run("report", "-c", path, "--token-key", "<b>x</b>", "--format", "md", "--out", out).stdout.splitlines()
    no_position = ("expected a learned position table, found none among 2 tensors by name or config size "
                   "(rotary and other computed positions have none); candidates: "
                   "'lm_head.weight' (50 x 8 float32); name one with --pos-key NAME")
    no_tokenizer = ("no probe words to look up: no tokenizer found beside the checkpoint: tokens print as #id, words "
                    "cannot be looked up")
    assert lines == [f"checkpoint: {path} (step unknown)",
                     (f"wrote the report to {out / 'report.md'}, with 4 figures (SVG) beside it: info, params, norms, "
                     "undertrained, map, geometry"),
                     f"left out: positions ({no_position})", f"left out: neighbors ({no_tokenizer})",
                     f"left out: compare ({ONE_CHECKPOINT})"]
    figures = ["geometry-token", "map-token", "norms-token", "undertrained"]
    assert sorted(p.name for p in out.iterdir()) == sorted([*(f"{f}.svg" for f in figures), "report.md"])
    assert all(b"<svg" in (out / f"{f}.svg").read_bytes()[:1000] for f in figures)
    text = (out / "report.md").read_text(encoding="utf-8")
    assert sorted(re.findall(r"\]\(([\w-]+)\.svg\)", text)) == figures
    assert "9. [Across checkpoints](#across-checkpoints) (left out)" in text

    def said(why: str) -> str:  # Markdown's backslash before each character that would act inline
        return "*left out:* " + re.sub(r"([\\`*_\[\]<>&|~#])", r"\\\1", why)

    tied = "lm_head.weight holds exactly the values of token_emb: a saved copy of a tied head, counted once"
    for why in (no_position, no_tokenizer, ONE_CHECKPOINT, ("position table: no learned position table (see the "
                "positions section)"), f"output projection: {tied.replace('token_emb', '<b>x</b>')}"):
        assert said(why) in text, why
    assert "<b>" not in text and "### token table '\\<b\\>x\\</b\\>': 50 rows x 8" in text


def test_the_output_is_checked_before_any_work(tmp_path):
    result = run("report", "--out", tmp_path / "report.txt", code=2)
    assert result.stderr.splitlines()[0] == (f"Error: Invalid value for '--out': expected a report file ending in "
                                             f".html or .htm, found '{tmp_path / 'report.txt'}'")
    result = run("report", "--format", "md", "--out", tmp_path / "report.md", code=2)
    assert result.stderr.splitlines()[0] == (f"Error: Invalid value for '--out': expected a folder for --format md "
                                             f"(report.md and the figures go in it), found the file name "
                                             f"'{tmp_path / 'report.md'}'")
    result = run("report", "--out", tmp_path / "missing" / "report.html", code=1)
    assert result.stderr == f"Error: expected an existing directory for --out, found none: '{tmp_path / 'missing'}'\n"
    assert run("report", "--words", " , ", code=2).stderr.splitlines()[0] == \
        "Error: Invalid value for '--words': expected words separated by commas, found none"
    assert list(tmp_path.iterdir()) == []


def test_no_file_that_was_read_is_written(tmp_path):
    weights = tmp_path / "weights.html"  # an .npz under another name: the format is read from its bytes
    with open(weights, "wb") as f:
        np.savez(f, token_emb=np.eye(6, dtype=np.float32))
    before = weights.read_bytes()
    result = run("report", "-c", weights, "--out", weights, code=1)
    assert result.stderr == (f"Error: expected the report file to name a new file, found '{weights}', a file this "
                             "answer was read from: it is never written over\n")
    assert weights.read_bytes() == before

    folder = tmp_path / "md"
    folder.mkdir()
    figure_named = folder / "positions.svg"
    with open(figure_named, "wb") as f:
        np.savez(f, token_emb=np.eye(6, dtype=np.float32), pos_emb=np.eye(6, dtype=np.float32)[::-1].copy())
    before = figure_named.read_bytes()
    result = run("report", "-c", figure_named, "--format", "md", "--out", folder, code=1)
    assert result.stderr == (f"Error: expected the plot file to name a new file, found '{figure_named}', a file "
                             "this answer was read from: it is never written over\n")
    assert figure_named.read_bytes() == before and sorted(folder.iterdir()) == [figure_named]


def test_without_matplotlib_markdown_names_the_extra(tmp_path, monkeypatch):
    """The page is still written, a line in place of each figure: tests/test_report_figures.py."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    result = run("report", "--format", "md", "--out", tmp_path / "md", code=1)
    assert result.stderr == ("Error: embscope report --format md needs the 'matplotlib' package (pip install "
                             "'embscope[plot]')\n")
    assert list(tmp_path.iterdir()) == []


def test_the_sample_report_prints_no_path_of_the_installed_package(sample_report):
    from embscope.sample import sample_directory
    out, stdout, _ = sample_report
    page = out.read_text(encoding="utf-8")
    assert str(sample_directory()) not in page and str(sample_directory()) not in stdout
    assert "nlm/tokenizer.model (bundled sample)" in page
    assert "<title>embscope report: bundled sample (Shakespeare GPT), step 3000</title>" in page


def test_a_note_that_only_begins_as_an_earlier_one_is_given_whole():
    """said_once points back to an earlier note a later one repeats, with what the section adds; a note that
    merely begins with the same characters (another row, a longer number) is another note, given whole."""
    from embscope.render.report_content import Line, Section, said_once

    earlier = "no tokenizer: rows 1-4 are zero"
    made = said_once([Section("info", "Checkpoint and tables", (Line(earlier, "note"),)),
                      Section("norms", "Row norms", (Line(earlier + "0 and more", "note"),
                                                     Line(earlier + "; padding rows cannot be told apart", "note")))])
    assert [block.text for block in made[1].blocks] == [
        earlier + "0 and more",
        "no tokenizer (the note under Checkpoint and tables above); padding rows cannot be told apart"]
