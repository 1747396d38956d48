"""Readable rich tables of mapper results, for people (machines read ``--json``)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from mapper.result import TuneResult
from mapper.workloads import WorkloadResult

UNITS = {"latency": "s", "offchip_bytes": "B", "footprint": "B", "energy": "pJ"}


def fmt(value: float | None, unit: str = "") -> str:
    """A number with an SI prefix (``1.23 ms``, ``4.5 MB``)."""
    if value is None:
        return "-"
    if unit == "s":
        for scale, pre in ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n")):
            if abs(value) >= scale:
                return f"{value / scale:.4g} {pre}s"
        return f"{value:.3g} s"
    for scale, pre in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {pre}{unit}"
    return f"{value:.4g} {unit}".rstrip()


def result_table(r: TuneResult) -> Table:
    """Key facts of one result: best values, bound, gap, optimality, budget spent."""
    t = Table(title=escape(f"{r.problem}  on  {r.target}"), show_header=False, title_justify="left")
    t.add_column("what", style="bold")
    t.add_column("value")
    for name in r.objectives:
        t.add_row(name, fmt(r.values.get(name), UNITS.get(name, "")))
    if r.cost is not None:
        t.add_row("cycles", f"{r.cost.cycles:,.0f} ({r.cost.bound}-bound, utilisation {r.cost.utilization:.1%})")
    t.add_row("roofline bound", f"{r.lower_bound.cycles:,.0f} cycles ({r.lower_bound.reason})")
    t.add_row("gap to bound", "-" if r.gap is None else f"{r.gap:.2%}")
    t.add_row("proven optimal", "yes" if r.proven_optimal else "no")
    t.add_row("strategy / stop", f"{r.strategy} / {r.stop_reason}" + (" (cached)" if r.cached else ""))
    c = r.counts
    t.add_row(
        "budget spent",
        f"{c.trials} trials ({c.complete} feasible, {c.infeasible} infeasible), "
        f"{c.points_scored:,} points scored in {r.seconds:.3f} s",
    )
    if r.scorer_rate:
        sub = f"; {r.inner_points:,} points per trial" if r.counts.trials else ""
        t.add_row("scorer", f"{r.scorer_rate / 1e6:.2f} M points/s measured{sub}")
    for v in c.top_violations:
        t.add_row(escape(f"ruled out: {v.code}"), escape(f"{v.count}x  {v.message}"))
    if r.validation_passed is not None:
        t.add_row("validation", "passed" if r.validation_passed else "FAILED")
    elif r.validation is not None and r.validation.get("status") == "not-checked":
        t.add_row("validation", escape(str(r.validation.get("reason", "not checked"))))
    if r.point:
        t.add_row("point", escape(", ".join(f"{k}={v}" for k, v in r.point.items())))
    t.add_row("cost model", r.cost_model_version)
    for n in r.notes:
        t.add_row("note", escape(n))
    return t


def pareto_table(r: TuneResult) -> Table:
    t = Table(title=f"Pareto front ({len(r.pareto)} mappings)", title_justify="left")
    for name in r.objectives:
        t.add_column(name, justify="right")
    t.add_column("point")
    for p in r.pareto:
        t.add_row(
            *(fmt(p.values[o], UNITS.get(o, "")) for o in r.objectives),
            escape(", ".join(f"{k}={v}" for k, v in p.point.items())),
        )
    return t


def show_result(console: Console, r: TuneResult) -> None:
    parts: list[Table | Text] = [result_table(r)]
    if len(r.pareto) > 1:
        parts.append(pareto_table(r))
    if r.render:
        parts.append(Text(r.render))
    console.print(Group(*parts))


def show_workload(console: Console, w: WorkloadResult) -> None:
    """Per-layer and total summary of a workload."""
    unit = UNITS.get(w.objective, "")
    t = Table(title=f"{w.workload} on {w.target}: {w.objective}", title_justify="left")
    for col, just in (("#", "right"), ("layer", "left"), (w.objective, "right"), ("gap", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    t.add_column("optimal")
    t.add_column("time", justify="right")
    t.add_column("note")
    for lay in w.layers:
        note = f"same as #{lay.duplicate_of}" if lay.duplicate_of is not None else ("cached" if lay.cached else "")
        t.add_row(
            str(lay.index),
            escape(lay.label),
            fmt(lay.value, unit),
            "-" if lay.gap is None else f"{lay.gap:.1%}",
            "yes" if lay.proven_optimal else "no",
            f"{lay.seconds:.2f} s",
            note,
        )
    console.print(t)
    console.print(
        f"total {w.objective}: {fmt(w.total_value, unit)}; {len(w.layers)} layers, {w.distinct} distinct, "
        f"{w.searched} searched, {w.proven_optimal} proven optimal; {w.seconds:.2f} s"
    )
