"""Where the time, the bytes and the energy go: bars from a cost report.

A cost report carries the latency as a stall stack (`CostReport.stall_stack`, summing to
`cycles`), bytes and energy per memory level and operand (`operand_bytes`, `operand_energy`) and
energy per component (`energy_breakdown`) when its target prices them. Where a target leaves them
empty the report draws what it has, and says so: the per-stage cycles of `breakdown` (stages
that overlap, so they are drawn side by side against the total, not stacked) and the bytes per
memory level of `bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.ticker import EngFormatter

from costmodels.protocol import CostReport
from report.svg import new_figure, svg_text


@dataclass(frozen=True)
class Bars:
    """A bar chart: categories, optionally split into stacked parts, with what it shows."""

    title: str
    unit: str
    values: dict[str, dict[str, float]]  # category -> part -> value ("" part: not split)
    stacked: bool  # parts add up to the category's total
    total: float | None = None  # a reference line (the latency in cycles for overlapping stages)
    note: str = ""

    def totals(self) -> dict[str, float]:
        return {c: sum(parts.values()) for c, parts in self.values.items()}


def latency_bars(cost: CostReport) -> Bars:
    """The stall stack when the target prices one, else the stages before overlap against the total."""
    if cost.stall_stack:
        return Bars(
            "Latency stall stack",
            "cycles",
            {"latency": dict(cost.stall_stack)},
            stacked=True,
            total=cost.cycles,
            note=f"components sum to the latency, {cost.cycles:,.0f} cycles",
        )
    return Bars(
        "Latency: cycles per stage",
        "cycles",
        {stage: {"": v} for stage, v in cost.breakdown.items()},
        stacked=False,
        total=cost.cycles,
        note=f"stages overlap (this target reports no stall stack): the line is the latency, {cost.cycles:,.0f} cycles",
    )


def bytes_bars(cost: CostReport) -> Bars:
    """Bytes per memory level, split per operand when the target says which operand moves them."""
    if cost.operand_bytes:
        return Bars("Bytes per memory level and operand", "bytes", dict(cost.operand_bytes), stacked=True)
    return Bars(
        "Bytes per memory level",
        "bytes",
        {level: {"": v} for level, v in cost.bytes.items()},
        stacked=False,
        note="this target does not split bytes per operand",
    )


def energy_bars(cost: CostReport) -> Bars | None:
    """Energy per memory level and operand (else per component), None when the target prices no energy."""
    if cost.operand_energy:
        values = {lvl: dict(parts) for lvl, parts in cost.operand_energy.items()}
        if "mac" in cost.energy_breakdown:
            values["mac"] = {"": cost.energy_breakdown["mac"]}
        return Bars("Energy per memory level and operand", "pJ", values, stacked=True, note=_energy_note(cost))
    if cost.energy_breakdown:
        values = {c: {"": v} for c, v in cost.energy_breakdown.items()}
        return Bars("Energy per component", "pJ", values, stacked=True, note=_energy_note(cost))
    return None


def _energy_note(cost: CostReport) -> str:
    return f"total {cost.energy_pj:,.0f} pJ" if cost.energy_pj is not None else ""


def bars_svg(bars: Bars, name: str) -> str:
    """Horizontal bars, one per category; stacked parts in the operands' colours."""
    cats = list(bars.values)
    parts = list(dict.fromkeys(p for v in bars.values.values() for p in v))
    fig = new_figure(7.0, 0.4 * len(cats) + 1.0, left_in=0.25 + 0.075 * max(len(c) for c in cats))
    ax = fig.add_subplot()
    left = [0.0] * len(cats)
    for j, part in enumerate(parts):
        widths = [bars.values[c].get(part, 0.0) for c in cats]
        drawn = ax.barh(cats, widths, left=left if bars.stacked else None, color=f"C{j % 10}", label=part or None)
        for c, rect in zip(cats, drawn.patches, strict=True):
            rect.set_gid(f"bar-{c}-{part}" if part else f"bar-{c}")
        if bars.stacked:
            left = [a + w for a, w in zip(left, widths, strict=True)]
    if bars.total is not None:
        ax.axvline(bars.total, color="#b22", lw=1.2, ls="--").set_gid("total")
    if any(parts):  # beside the bars, never over them
        width = fig.get_figwidth()
        fig.subplots_adjust(right=1 - (0.75 + 0.07 * max(len(p) for p in parts)) / width)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ends = [*left, *(sum(v.values()) if bars.stacked else max(v.values(), default=0.0) for v in bars.values.values())]
    ends.append(bars.total or 0.0)
    if max(ends) > 0:
        ax.set_xlim(0, 1.04 * max(ends))  # the longest bar ends inside the frame
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(EngFormatter())  # 2 M rather than an offset "1e6"
    ax.set_xlabel(bars.unit)
    ax.set_title(bars.title)
    return svg_text(fig, label=f"{bars.title} ({bars.unit})", name=name)
