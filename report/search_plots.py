"""How the search went: the convergence trace and the Pareto front of several objectives."""

from __future__ import annotations

from mapper.result import TuneResult
from report.svg import new_figure, svg_text

#: the unit each objective is drawn in
UNITS = {"latency": "s", "offchip_bytes": "bytes", "footprint": "bytes", "energy": "pJ"}
#: how each objective is drawn on an axis: (factor, unit); tables keep the units above
AXIS_UNITS = {"latency": (1e6, "µs"), "offchip_bytes": (1e-3, "kB"), "footprint": (1e-3, "kB"), "energy": (1e-6, "µJ")}


def _axis(objective: str) -> tuple[float, str]:
    return AXIS_UNITS.get(objective, (1.0, ""))


def trace_series(result: TuneResult) -> tuple[list[float], list[float], str]:
    """(x, best value so far, x label): x is points scored when the trace has them, else trials/chunks.

    Entries before the first feasible mapping (None) are left out.
    """
    use_points = len(result.trace_points) == len(result.trace) and bool(result.trace_points)
    xs: list[float] = []
    ys: list[float] = []
    for i, v in enumerate(result.trace):
        if v is None:
            continue
        xs.append(float(result.trace_points[i]) if use_points else float(i + 1))
        ys.append(float(v))
    label = "points scored" if use_points else "trial / chunk"
    return xs, ys, label


def trace_svg(result: TuneResult) -> str | None:
    """Best first objective against the search's progress (None when no step found a feasible mapping)."""
    xs, ys, xlabel = trace_series(result)
    if not xs:
        return None
    objective = result.objectives[0]
    k, unit = _axis(objective)
    ys = [y * k for y in ys]
    fig = new_figure(7.0, 3.0)
    ax = fig.add_subplot()
    ax.step(xs, ys, where="post", color="C0")[0].set_gid("trace")
    ax.scatter(xs, ys, s=12, color="C0", zorder=3)
    if result.certificate is not None and result.certificate.best_remaining_bound is not None:
        ax.axhline(
            result.certificate.best_remaining_bound * k, color="#777", ls=":", lw=1, label="best remaining bound"
        )
        ax.legend(fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"best {objective} ({unit})")
    ax.set_title("Convergence")
    return svg_text(fig, label=f"convergence of the best {objective} over {len(xs)} steps", name="trace")


def pareto_svg(result: TuneResult) -> str | None:
    """The front on the first two objectives, the chosen mapping marked (None with fewer than two)."""
    if len(result.objectives) < 2 or not result.pareto:
        return None
    a, b = result.objectives[0], result.objectives[1]
    (ka, ua), (kb, ub) = _axis(a), _axis(b)
    pts = sorted((p.values[a] * ka, p.values[b] * kb) for p in result.pareto if a in p.values and b in p.values)
    if not pts:
        return None
    fig = new_figure(6.0, 3.6)
    ax = fig.add_subplot()
    ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", color="#999", lw=0.8)
    for i, (x, y) in enumerate(pts):
        ax.scatter([x], [y], s=22, color="C1", zorder=3).set_gid(f"point-{i}")
    if a in result.values and b in result.values:
        ax.scatter([result.values[a] * ka], [result.values[b] * kb], s=90, facecolors="none", edgecolors="C3", lw=1.5,
                   zorder=4, label="best (first objective)").set_gid("best")  # fmt: skip
        ax.legend(fontsize=8)
    ax.set_xlabel(f"{a} ({ua})")
    ax.set_ylabel(f"{b} ({ub})")
    ax.set_title(f"Pareto front ({len(pts)} mappings)")
    return svg_text(fig, label=f"Pareto front of {len(pts)} mappings on {a} and {b}", name="pareto")
