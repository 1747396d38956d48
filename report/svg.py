"""matplotlib figures as inline SVG text: the one place the report touches matplotlib's machinery.

Figures are built with `matplotlib.figure.Figure` and printed by the SVG backend's canvas, never
through pyplot, so no GUI backend is chosen and no global figure state is kept. Text stays text
(``svg.fonttype = none``): the page is smaller, searchable, and its numbers can be read by a
parser. The output is made fit to inline in HTML5 and free of any URL: the XML prolog, the
DOCTYPE, the RDF metadata and the namespace declarations are dropped, and ``xlink:href`` becomes
SVG 2's plain ``href``.
"""

from __future__ import annotations

import io
import re
from typing import Any

import matplotlib

matplotlib.use("svg", force=True)  # no GUI backend, whatever the environment says (MPLBACKEND)

from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

#: drawing settings for every figure of the report
STYLE: Any = {  # rc_context wants its own literal key type
    "svg.fonttype": "none",
    "svg.hashsalt": "tensormapper-report",  # deterministic ids: the same result gives the same page
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "font.family": "DejaVu Sans",
}

_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_XMLNS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')


def new_figure(width_in: float, height_in: float, *, left_in: float = 0.75, bottom_in: float = 0.5) -> Figure:
    """A figure of the given size in inches, with the report's style and fixed margins.

    Margins are fixed (`left_in`, `bottom_in` in inches for the tick labels) rather than computed by
    a layout engine: a constrained layout measures every text and tripled the rendering time.
    """
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width_in, height_in))
    fig.subplots_adjust(
        left=left_in / width_in, right=1 - 0.15 / width_in, bottom=bottom_in / height_in, top=1 - 0.35 / height_in
    )
    return fig


def svg_text(fig: Figure, *, label: str, name: str) -> str:
    """The figure as an inline ``<svg>`` element with `label` as its accessible name.

    Every id of the figure is prefixed with `name` (``roofline-...``), so several figures share a
    page without clashing ids, and an artist's gid set to ``point-0`` is found as ``roofline-point-0``.
    """
    buf = io.StringIO()
    with matplotlib.rc_context(STYLE):
        FigureCanvasSVG(fig).print_svg(buf, metadata={"Date": None})
    text = _XMLNS.sub("", _METADATA.sub("", _PROLOG.sub("", buf.getvalue(), count=1)))
    text = text.replace("xlink:href=", "href=")
    text = (
        text.replace(' id="', f' id="{name}-').replace('href="#', f'href="#{name}-').replace("url(#", f"url(#{name}-")
    )
    return text.replace("<svg ", f'<svg role="img" aria-label="{_attr(label)}" ', 1)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
