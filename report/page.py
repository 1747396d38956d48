"""HTML building blocks: escaped text, tables, figures with captions, the page shell.

Every figure is followed by (or sits beside) a table or sentence that carries the same numbers, so
the page reads without its pictures. The page holds no script and loads nothing: its style is
inline and its pictures are inline SVG.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

CSS = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 1.5em auto; max-width: 1100px; color: #1b1b1b;
       line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.5em; border-bottom: 2px solid #2b4a6f; padding-bottom: .2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; color: #2b4a6f; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: .6em 0; font-size: .88em; }
th, td { border: 1px solid #c8d0da; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #eef3fb; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
figure { margin: .8em 0; }
.pair { display: flex; flex-wrap: wrap; gap: 1.2em; align-items: flex-start; }
.pair > figure { flex: 0 1 auto; }
.pair > table { flex: 0 0 auto; margin-top: 1.5em; }
figure svg { max-width: 100%; height: auto; }
figcaption { font-size: .85em; color: #444; }
pre { background: #f6f8fa; padding: .6em; white-space: pre-wrap; font-size: .8em; }
.verdict-passed { color: #176b2c; font-weight: bold; }
.verdict-failed { color: #a11; font-weight: bold; }
.muted { color: #666; }
"""


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def num(x: float | int | None, digits: int = 4) -> str:
    """A number for people: thousands separators for large ones, significant digits for the rest."""
    if x is None:
        return "-"
    if isinstance(x, int) or (abs(x) >= 1e3 and float(x).is_integer() and abs(x) < 1e10):
        return f"{int(x):,}"
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
        return f"{x:.{digits}g}"
    return f"{x:,.{digits}g}" if abs(x) < 1e3 else f"{x:,.1f}"


def table(header: Sequence[str], rows: Iterable[Sequence[object]], *, cls: str = "", numeric: bool = True) -> str:
    """An HTML table; cells that are numbers are right-aligned and formatted with `num`."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for v in row:
            if numeric and isinstance(v, int | float) and not isinstance(v, bool):
                cells.append(f'<td class="num">{esc(num(v))}</td>')
            else:
                cells.append(f"<td>{v if isinstance(v, Raw) else esc(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def kv_table(pairs: Iterable[tuple[str, object]], *, cls: str = "") -> str:
    """A two-column table of names and values (a summary)."""
    rows = []
    for k, v in pairs:
        cell = (
            str(v)
            if isinstance(v, Raw)
            else esc(num(v) if isinstance(v, int | float) and not isinstance(v, bool) else v)
        )
        rows.append(f"<tr><th>{esc(k)}</th><td>{cell}</td></tr>")
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<table{attr}><tbody>{''.join(rows)}</tbody></table>"


class Raw(str):
    """HTML that is already safe (built by this module), inserted without escaping."""


def figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def pair(picture: str, numbers: str) -> str:
    """A figure and the table of its numbers side by side (stacked on a narrow screen)."""
    return f'<div class="pair">{picture}{numbers}</div>'


def scoped(html: str, prefix: str) -> str:
    """`html` with every id (and every reference to one) prefixed, to embed a report in another page
    without two elements sharing an id: ``id="roofline-..."`` becomes ``id="slowest.roofline-..."``."""
    return (
        html.replace(' id="', f' id="{prefix}')
        .replace('href="#', f'href="#{prefix}')
        .replace("url(#", f"url(#{prefix}")
    )


def section(title: str, body: str, *, id: str) -> str:
    return f'<section id="{esc(id)}"><h2>{esc(title)}</h2>{body}</section>'


def paragraph(text: str, *, cls: str = "") -> str:
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<p{attr}>{esc(text)}</p>"


def page(title: str, body: str) -> str:
    """The whole document: no script, no external resource."""
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{CSS}</style></head><body><h1>{esc(title)}</h1>{body}"
        '<footer class="muted"><p>tensormapper report: every picture has a table or sentence with its numbers.'
        "</p></footer></body></html>\n"
    )
