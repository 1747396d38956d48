"""Where each layer sits on its target's roofline: arithmetic intensity against attained throughput.

The roof is the target's own lower bound (`Target.lower_bound`): its compute cycles are the
problem's MACs at the peak rate, its memory cycles the problem's minimum bytes at the off-chip
bandwidth, so ``peak = macs / compute_cycles`` MAC/cycle and ``bandwidth = min_bytes /
memory_cycles`` B/cycle, both times the clock. The peak is the one for this problem's dtypes
(and, on Tenstorrent, the fastest fidelity the search allows). A layer's point is its best
mapping's ``macs / offchip_bytes`` (MAC per off-chip byte) and ``macs / seconds`` (MAC/s).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter

from mapper.result import TuneResult
from report.svg import new_figure, svg_text
from workload.problem import Problem


@dataclass(frozen=True)
class Roof:
    """A target's ceilings for one problem: peak MAC/s and off-chip bytes/s."""

    peak_macs_per_s: float
    bytes_per_s: float

    @property
    def ridge(self) -> float:
        """MAC per byte where the bandwidth slope meets the compute ceiling."""
        return self.peak_macs_per_s / self.bytes_per_s


@dataclass(frozen=True)
class RooflinePoint:
    """One layer's best mapping on the roofline."""

    label: str
    intensity: float  # MAC per off-chip byte
    attained: float  # MAC/s
    roof: Roof

    @property
    def fraction_of_roof(self) -> float:
        """Attained throughput / the roof at this intensity (1: on the roofline)."""
        return self.attained / min(self.roof.peak_macs_per_s, self.intensity * self.roof.bytes_per_s)


def roof_of(result: TuneResult, problem: Problem) -> Roof | None:
    """The ceilings from the result's lower bound (None without a cost report or a positive bound)."""
    lb, cost = result.lower_bound, result.cost
    if cost is None or lb.compute_cycles <= 0 or lb.memory_cycles <= 0:
        return None
    return Roof(problem.macs / lb.compute_cycles * cost.clock_hz, problem.min_bytes / lb.memory_cycles * cost.clock_hz)


def roofline_point(result: TuneResult, problem: Problem, label: str) -> RooflinePoint | None:
    """The best mapping's point (None when nothing feasible was found or it moves no off-chip byte)."""
    roof = roof_of(result, problem)
    cost = result.cost
    if roof is None or cost is None or cost.offchip_bytes <= 0 or cost.seconds <= 0:
        return None
    return RooflinePoint(label, problem.macs / cost.offchip_bytes, problem.macs / cost.seconds, roof)


def _si(x: float) -> str:
    """288e9 -> '288 G', 3.2768e13 -> '32.8 T' (three significant digits)."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}"
    return f"{x:.3g} "


def roofline_svg(points: list[RooflinePoint], target: str) -> str:
    """Log-log roofline: each distinct roof as a line, each layer as a labelled point."""
    fig = new_figure(7.0, 4.2, left_in=1.15)
    ax = fig.add_subplot()
    xs = [p.intensity for p in points]
    roofs = list(dict.fromkeys(p.roof for p in points))
    lo = min([*xs, *(r.ridge for r in roofs)]) / 8
    hi = max([*xs, *(r.ridge for r in roofs)]) * 8
    grid = np.geomspace(lo, hi, 200)
    for j, r in enumerate(roofs):
        line = ax.plot(grid, np.minimum(r.peak_macs_per_s, grid * r.bytes_per_s), color="#333", lw=1.5 - 0.3 * j)[0]
        line.set_gid(f"roof-{j}")
        ax.annotate(
            f"peak {_si(r.peak_macs_per_s)}MAC/s, {_si(r.bytes_per_s)}B/s",
            (r.ridge, r.peak_macs_per_s), textcoords="offset points", xytext=(6, -12 - 10 * j), fontsize=8,
        )  # fmt: skip
    for i, p in enumerate(points):
        dot = ax.scatter([p.intensity], [p.attained], s=28, zorder=3, color=f"C{i % 10}")
        dot.set_gid(f"point-{i}")
        if len(points) <= 12:
            # staggered so layers on the same spot stay readable
            ax.annotate(p.label, (p.intensity, p.attained), textcoords="offset points", xytext=(5, -10 - 8 * (i % 3)),
                        fontsize=7)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis, unit in ((ax.xaxis, ""), (ax.yaxis, "MAC/s")):  # 1-2-5 steps with SI prefixes: 20 TMAC/s
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(EngFormatter(unit=unit, places=0))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("arithmetic intensity (MAC per off-chip byte)")
    ax.set_ylabel("attained throughput")
    ax.set_title(f"Roofline on {target}")
    return svg_text(fig, label=f"roofline of {len(points)} layer(s) on {target}", name="roofline")
