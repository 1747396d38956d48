"""Readable dump of a Tensix mapping: the point's knobs, then the loop nest level by level."""

from __future__ import annotations

from costmodels.ir import Mapping
from costmodels.tenstorrent.cost import PARAMS
from costmodels.tenstorrent.mapping import point_of


def render_mapping(preset: str, mapping: Mapping) -> str:
    """The knobs on one line (``preset: layout=..., ...``), then one line per level (``*`` = spatial)."""
    p = point_of(mapping) or {}
    lines = [f"{preset}: " + ", ".join(f"{k}={p.get(k, '?')}" for k in PARAMS)]
    for lvl in mapping.levels:
        loops = " ".join(f"{lp.axis}{'*' if lp.spatial else ''}={lp.factor}" for lp in lvl.loops)
        lines.append(f"  {lvl.name:9s} {loops}")
    return "\n".join(lines)
