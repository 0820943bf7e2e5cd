"""Figures look as embscope draws them whatever matplotlib finds around it (a matplotlibrc in the working
directory or the user's config, a font cache not built yet), nothing from matplotlib reaches stderr, and a token
no installed font can draw is shown escaped, never as an empty box. The reference for "a font can draw it" is
matplotlib's own: drawing text with a glyph the font lacks is what makes it warn."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from embscope.render import plot_style
from embscope.render.plot_style import drawable, style

DOG = "\u72ac"  # CJK UNIFIED IDEOGRAPH-72AC: DejaVu Sans has no glyph for it
SPACE_SYMBOL = "\u2420"  # SYMBOL FOR SPACE, which embscope shows for a token's spaces; DejaVu lacks it too


def installed_fonts_with(character: str) -> list[str]:
    """The installed fonts (matplotlib's list) whose character map holds `character`, LastResort's boxes aside."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font
    found = []
    for entry in font_manager.fontManager.ttflist:
        if "LastResort" in entry.fname:
            continue
        try:
            if ord(character) in FT2Font(entry.fname).get_charmap():
                found.append(entry.name)
        except (OSError, RuntimeError):
            continue
    return found


def cjk_checkpoint(folder: Path) -> Path:
    """A safetensors table whose tokenizer.json (a WordLevel vocabulary) holds a CJK token and a GPT-2 style token,
    the CJK row with the largest norm and a row with a leading space the smallest: both drawn by name."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers
    folder.mkdir()
    words = [DOG, " the", "\u0120dog", *[f"w{i}" for i in range(37)]]
    table = np.random.default_rng(0).standard_normal((len(words), 8)).astype(np.float32)
    table[0] *= 30
    table[1] *= 0.01
    save_file({"wte.weight": table}, str(folder / "model.safetensors"))
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def test_a_character_no_font_has_is_escaped_and_nothing_warns(tmp_path):
    import embscope
    from embscope.analysis.norms import norms_report
    from embscope.render import norms
    emb = embscope.open(cjk_checkpoint(tmp_path / "cjk"))
    with style():
        figure = norms.figure(emb, norms_report(emb, "token", 6.0))
    labels = [t.get_text() for ax in figure.axes for t in (*ax.texts, *ax.get_yticklabels())]
    dog_label = next(label for label in labels if "(row 0)" in label)
    space_label = next(label for label in labels if "(row 1)" in label)
    if installed_fonts_with(DOG):
        assert dog_label.startswith(DOG)
    else:
        assert dog_label.startswith("\\u72ac")
    if not installed_fonts_with(SPACE_SYMBOL):
        assert space_label.startswith("\u2423the")  # the open box, which DejaVu Sans draws
    assert any(label.startswith("\u0120dog") for label in labels)  # GPT-2's byte symbols are in DejaVu Sans
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure.canvas.draw()  # matplotlib warns of every glyph its fonts lack
    assert [str(w.message) for w in caught] == []


def test_drawable_keeps_what_fonts_draw_and_cuts_what_would_take_minutes():
    assert drawable("caf\u00e9 \u0120x") == "caf\u00e9 \u0120x"
    assert drawable("a\x1bb") == "a\\x1bb"
    long = drawable("ab " * 70_000 + "end")
    assert len(long) == 80 and "\u2026" in long and long.endswith("end") and "characters" not in long


def run_in_a_child(runs: list[list[str]], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """Each command line run in turn in one child process (a fresh interpreter: matplotlib reads ./matplotlibrc when
    it is imported), as the CLI runs it; what the child writes on stdout and stderr, and its exit code."""
    code = ("import sys\nfrom embscope.cli import build\nfor args in " + repr(runs) + ":\n"
            "    code = build(args[:1])(args, standalone_mode=False)\n"
            "    if code:\n        sys.exit(code)\n")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          check=False, timeout=240)


@pytest.fixture
def hostile_matplotlib(tmp_path):
    """A checkpoint folder that ships a matplotlibrc with usetex on and a bad value (matplotlib reads ./matplotlibrc
    first), and a user config folder with a matplotlibrc of its own and no font cache built yet."""
    folder = cjk_checkpoint(tmp_path / "model")
    (folder / "matplotlibrc").write_text("text.usetex: True\nfont.size: banana\nfont.family: NoSuchFont\n")
    config = tmp_path / "mplconfig"
    config.mkdir()
    (config / "matplotlibrc").write_text("text.usetex: True\naxes.prop_cycle: cycler('color', ['zz'])\n")
    env = {k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"}
    env |= {"MPLCONFIGDIR": str(config), "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "PYTHONPATH": os.pathsep.join(sys.path)}
    return folder, env


@pytest.mark.slow  # seconds of subprocesses: CI's slow step runs it; a cheaper test of the same feature stays in the suite
def test_plots_and_reports_ignore_a_matplotlibrc_and_say_nothing_on_stderr(hostile_matplotlib):
    folder, env = hostile_matplotlib
    page = folder.parent / "r.html"
    done = run_in_a_child([["norms", "--table", "token", "--plot", "-c", ".", "--json"],
                           ["report", "-c", ".", "--out", str(page)], ["report", "-c", ".", "--format", "md"]],
                          folder, env)
    assert (done.returncode, done.stderr) == (0, "")
    plot = folder / json.loads(done.stdout.splitlines()[0])["plot"]
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert "<svg" in page.read_text() and "usetex" not in page.read_text()
    (markdown,) = folder.glob("*-report")
    assert b"<svg" in (markdown / "norms-token.svg").read_bytes()[:1000]  # the Markdown's figures, drawn by matplotlib


def test_a_figure_tries_dejavu_then_each_fallback_in_order(monkeypatch):
    """The fonts a text is drawn with are DejaVu Sans, then each installed fallback in FALLBACK_FAMILIES' order,
    each once (the last reached through the generic family), as matplotlib's own findfont finds each by name;
    an SVG's <text> names them all, then the generic family. Two of matplotlib's own fonts stand in for
    fallbacks here, since the machine may have none."""
    import matplotlib
    from matplotlib import font_manager
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    chain = ("DejaVu Sans", "DejaVu Serif", "DejaVu Sans Mono")
    monkeypatch.setattr(plot_style, "families", lambda: chain)
    with style():
        found = font_manager.fontManager._find_fonts_by_props(font_manager.FontProperties())
        figure = Figure()
        FigureCanvasSVG(figure)
        figure.text(0.5, 0.5, "dog")
        out = io.StringIO()
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            figure.savefig(out, format="svg")
    expected = [font_manager.findfont(font_manager.FontProperties(family=name), fallback_to_default=False)
                for name in chain]
    assert [str(path) for path in found] == expected
    assert "font-family: 'DejaVu Sans', 'DejaVu Serif', 'DejaVu Sans Mono', sans-serif" in out.getvalue()
