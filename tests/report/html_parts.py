"""Reading a report page back: its sections, tables and inline SVG pictures (html.parser, xml.etree)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Table:
    cls: str
    rows: list[list[str]] = field(default_factory=list)  # header row first when it has one


class PageParser(HTMLParser):
    """Section ids, headings, tables (cells as text) and the number of script/link/img/iframe tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[str] = []
        self.headings: list[str] = []
        self.tables: list[Table] = []
        self.fetching: list[str] = []  # tags that could load something
        self._cell: list[str] | None = None
        self._heading: list[str] | None = None
        self._svg_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "svg":
            self._svg_depth += 1
        if tag in ("script", "link", "img", "iframe", "object", "embed") or (tag != "a" and a.get("src")):
            self.fetching.append(tag)
        if tag == "section" and a.get("id"):
            self.sections.append(str(a["id"]))
        elif tag in ("h1", "h2", "h3"):
            self._heading = []
        elif tag == "table":
            self.tables.append(Table(str(a.get("class") or "")))
        elif tag == "tr" and self.tables:
            self.tables[-1].rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._svg_depth -= 1
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1].rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag in ("h1", "h2", "h3") and self._heading is not None:
            self.headings.append("".join(self._heading).strip())
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._heading is not None:
            self._heading.append(data)

    def table(self, cls: str) -> Table:
        found = [t for t in self.tables if t.cls == cls]
        assert found, f"no table of class {cls}: {[t.cls for t in self.tables]}"
        return found[0]

    def summary(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self.table("summary").rows}


def parse(html: str) -> PageParser:
    p = PageParser()
    p.feed(html)
    p.close()
    return p


def svgs(html: str) -> dict[str, ET.Element]:
    """Every inline picture, parsed as XML, by the name its ids start with (roofline, nest, cores...; the
    first picture of a name wins; a picture embedded with a scope, ``slowest.roofline-...``, by its name)."""
    out: dict[str, ET.Element] = {}
    for text in re.findall(r"<svg\b.*?</svg>", html, flags=re.S):
        root = ET.fromstring(text)
        first = next(e.get("id") for e in root.iter() if e.get("id"))
        assert first is not None
        out.setdefault(first.split("-")[0].split(".")[-1], root)
    return out


def ids(root: ET.Element, prefix: str) -> list[str]:
    return [str(e.get("id")) for e in root.iter() if str(e.get("id") or "").startswith(prefix)]


def texts(root: ET.Element) -> str:
    return " ".join("".join(e.itertext()) for e in root.iter("text"))


def number(cell: str) -> float:
    """A table cell written by `report.page.num` back to a float."""
    return float(cell.replace(",", "").split()[0])


def all_ids(html: str) -> list[str]:
    return re.findall(r'\sid="([^"]+)"', html)
