"""Each tick label, axis label, annotation and legend text of a figure laid out once for its renderer, not at each
measurement.

matplotlib lays a text out (its font found, the font's line metrics read, each line measured, the box rotated and
aligned) each time its extent is asked for, and a tick label's is asked for again and again: by the margins
(render.margins), by its axis at the draw, and, each time, once more to place the axis label beside the tick labels
(Axis._update_label_position); a legend's texts are laid out seven times a figure (its box measured for the margins,
its best place found, and at the draw), an annotation's four. `remember_layouts` gives each of them a memo of its last
layout, keyed by all that the layout reads: the renderer and its dpi, the string, the font, the rotation and its
mode, the alignments, the line spacing, math and TeX. The same inputs give the same layout: the figure drawn is the
same. (A title is laid out once or twice: a memo gains nothing there.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.text import Text


def remember_layouts(figure: Figure) -> None:
    """Every axis's tick labels (the ticks its locators give now, made now as the layout would make them) and axis
    label, and each axes' texts and annotations and its legend's texts, lay themselves out once per renderer and
    state."""
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            ticks = [*axis.get_major_ticks(len(axis.get_majorticklocs())),
                     *axis.get_minor_ticks(len(axis.get_minorticklocs()))]
            for text in (axis.label, *(t.label1 for t in ticks), *(t.label2 for t in ticks)):
                remember(text)
        legend = ax.get_legend()
        for text in (*ax.texts, *((legend.get_title(), *legend.get_texts()) if legend is not None else ())):
            remember(text)


def inputs(text: Any, renderer: Any) -> tuple[Any, ...]:
    """All that matplotlib's Text._get_layout reads of `text` (a matplotlib Text) and `renderer`."""
    return (renderer, text.get_figure(root=True).dpi, text.get_text(), hash(text.get_fontproperties()),
            text.get_usetex(), text.get_parse_math(), text._linespacing, text._multialignment, text.get_rotation(),
            text.get_rotation_mode(), text.get_horizontalalignment(), text.get_verticalalignment())


def remember(text: Text) -> None:
    """`text` lays itself out again only when an input of its layout changed (a wrapped text, whose lines depend on
    where it stands, each time)."""
    lay_out = text._get_layout  # type: ignore[attr-defined]  # matplotlib's own, bound to the text
    if hasattr(lay_out, "__wrapped__"):  # a figure laid out twice (the map's labels, then the page): one memo
        return
    last: list[Any] = []  # [inputs, layout] of the last layout: a text keeps one

    def remembered(renderer: Any) -> Any:
        if text.get_wrap():
            return lay_out(renderer)
        key = inputs(text, renderer)
        if not last or last[0] != key:
            last[:] = [key, lay_out(renderer)]
        return last[1]

    remembered.__wrapped__ = lay_out  # type: ignore[attr-defined]
    text._get_layout = remembered  # type: ignore[attr-defined]
