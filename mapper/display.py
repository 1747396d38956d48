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
    if unit == "pJ":  # energy is priced in picojoules and shown in joules with a prefix (65.77 uJ)
        for scale, pre in ((1e12, ""), (1e9, "m"), (1e6, "u"), (1e3, "n")):
            if abs(value) >= scale:
                return f"{value / scale:.4g} {pre}J"
        return f"{value:.4g} pJ"
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
    t.add_row("proven optimal", "yes, over the target's search space" if r.proven_optimal else "no")
    cert = r.certificate
    if cert is not None:
        within = "" if cert.gap_bound is None or cert.complete else f"; within {cert.gap_bound:.2%} of the optimum"
        if cert.front_gap is not None and not cert.complete:
            within += f"; the front within {cert.front_gap:.2%} of every point of the space"
        t.add_row(
            "certificate",
            f"{cert.structures_total:,} structures of {cert.inner_points:,} points: {cert.scored:,} scored, "
            f"{cert.pruned_by_bound:,} pruned by bound, {cert.unexplored:,} unexplored{within}",
        )
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
    if r.transform is not None:
        t.add_row("transform", escape(r.transform.summary()))
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


def workload_objectives(w: WorkloadResult) -> list[str]:
    """The objectives of a workload's searches: the first (`WorkloadResult.objective`), then the others its layers'
    results carry (several objectives: each layer's mapping is its front's first point, the best first objective)."""
    others = next((r.objectives for r in w.results.values()), [w.objective])
    return [w.objective, *(o for o in others if o != w.objective)]


def show_workload(console: Console, w: WorkloadResult) -> None:
    """Per-layer and total summary of a workload; with several objectives, each layer's front size and the other
    objectives' values at its mapping (the front's first point), and their totals."""
    unit = UNITS.get(w.objective, "")
    objectives = workload_objectives(w)
    others = objectives[1:]
    t = Table(title=f"{w.workload} on {w.target}: {', '.join(objectives)}", title_justify="left")
    for col, just in (("#", "right"), ("layer", "left"), (w.objective, "right"), *((o, "right") for o in others)):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    if others:
        t.add_column("front", justify="right")
    t.add_column("gap", justify="right")
    t.add_column("optimal")
    t.add_column("time", justify="right")
    t.add_column("note")
    totals: dict[str, float | None] = dict.fromkeys(others, 0.0)
    for lay in w.layers:
        note = f"same as #{lay.duplicate_of}" if lay.duplicate_of is not None else ("cached" if lay.cached else "")
        r = w.results.get(lay.problem_hash)
        values = r.values if r is not None and r.feasible else {}
        for o in others:
            have = totals[o]
            totals[o] = None if have is None or values.get(o) is None else have + values[o]
        t.add_row(
            str(lay.index),
            escape(lay.label),
            fmt(lay.value, unit),
            *(fmt(values.get(o), UNITS.get(o, "")) for o in others),
            *([str(len(r.pareto)) if r is not None else "-"] if others else []),
            "-" if lay.gap is None else f"{lay.gap:.1%}",
            "yes" if lay.proven_optimal else "no",
            f"{lay.seconds:.2f} s",
            note,
        )
    console.print(t)
    at = "".join(f", {o} at those mappings {fmt(v, UNITS.get(o, ''))}" for o, v in totals.items())
    console.print(
        f"total {w.objective}: {fmt(w.total_value, unit)}{at}; {len(w.layers)} layers, {w.distinct} distinct, "
        f"{w.searched} searched, {w.proven_optimal} proven optimal; {w.seconds:.2f} s"
    )
    if w.network is not None:
        show_network(console, w)


def show_network(console: Console, w: WorkloadResult) -> None:
    """The joint layout choice of a Tenstorrent workload, per layer, beside the layer-by-layer optimum."""
    n = w.network
    assert n is not None
    t = Table(title=f"{w.workload} on {w.target}: layouts chosen jointly", title_justify="left")
    for col in ("#", "layer", "form", "layout", "memory", "input", "output", "time", "reshard", "alone"):
        t.add_column(
            col, justify="left" if col in ("layer", "form", "layout", "memory", "input", "output") else "right"
        )
    for lay in n.layers:
        t.add_row(
            str(lay.index),
            escape(lay.label),
            lay.form,
            lay.layout,
            lay.memory,
            escape(lay.input),
            lay.output,
            fmt(lay.seconds, "s"),
            fmt(lay.reshard_seconds, "s") if lay.reshard_seconds else "",
            fmt(lay.alone_seconds, "s"),
        )
    console.print(t)
    console.print(
        f"joint: {fmt(n.total_seconds, 's')} ({n.reshards} reshards, {fmt(n.reshard_seconds, 's')}; "
        f"{n.spilled_edges} chain edges through DRAM); layer by layer in L1 (greedy): {fmt(n.greedy_seconds, 's')}; "
        f"each layer alone, DRAM in and out: {fmt(n.layer_by_layer_seconds, 's')}"
    )


def _validation_word(r: TuneResult | WorkloadResult) -> str:
    results = list(r.results.values()) if isinstance(r, WorkloadResult) else [r]
    verdicts = [x.validation_passed for x in results]
    if any(v is False for v in verdicts):
        return "FAILED"
    if verdicts and all(v is True for v in verdicts):
        return "passed"
    return "-" if all(v is None for v in verdicts) else "partly"


def comparison_table(rows: list[tuple[str, TuneResult | WorkloadResult | None, str | None]]) -> Table:
    """One row per target of a comparison: best value (a workload's total), gap, optimality, validation."""
    first = next((r for _, r, _ in rows if r is not None), None)
    objective = (first.objective if isinstance(first, WorkloadResult) else first.objectives[0]) if first else "value"
    what = first.workload if isinstance(first, WorkloadResult) else (first.problem if first else "")
    t = Table(title=escape(f"{what}: {objective} by target"), title_justify="left")
    for col, just in (("target", "left"), (objective, "right"), ("gap", "right"), ("optimal", "left")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    t.add_column("validation")
    t.add_column("stop / note")
    unit = UNITS.get(objective, "")
    for target, r, error in rows:
        if r is None:
            t.add_row(escape(target), "-", "-", "-", "-", escape(f"error: {error or 'no result'}"))
        elif isinstance(r, WorkloadResult):
            gaps = [lay.gap for lay in r.layers if lay.gap is not None]
            t.add_row(
                escape(target),
                fmt(r.total_value, unit),
                f"max {max(gaps):.1%}" if gaps else "-",
                f"{r.proven_optimal}/{r.distinct} layers",
                _validation_word(r),
                f"{len(r.layers)} layers, {r.seconds:.2f} s",
            )
        else:
            t.add_row(
                escape(target),
                fmt(r.best_value(), unit),
                "-" if r.gap is None else f"{r.gap:.2%}",
                "yes" if r.proven_optimal else "no",
                _validation_word(r),
                escape(r.stop_reason + ("" if r.feasible else "; infeasible") + (" (cached)" if r.cached else "")),
            )
    return t


def show_comparison(console: Console, rows: list[tuple[str, TuneResult | WorkloadResult | None, str | None]]) -> None:
    """The comparison table of several targets."""
    console.print(comparison_table(rows))


def _cell(value: object, width: int = 1000) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v, width) for v in value)
    text = "" if value is None else str(value).strip().split("\n")[0]
    return text if len(text) <= width else text[: width - 3] + "..."


def _scalar(value: object) -> bool:
    if isinstance(value, list | tuple):
        return all(_scalar(v) and not isinstance(v, list | tuple) for v in value)
    return not isinstance(value, dict)


def generic_table(title: str, rows: object) -> Table | Text:
    """A JSON list of objects as a table: the columns whose values are scalars (or lists of them), in order of
    first appearance; nested objects are left to ``--json``. Anything else is shown as JSON text."""
    if isinstance(rows, dict):
        items = next((v for v in rows.values() if isinstance(v, list)), None)
        rows = items if items is not None else [rows]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        import json

        return Text(json.dumps(rows, indent=2, default=str))
    columns: list[str] = []
    for r in rows:
        columns.extend(k for k, v in r.items() if k not in columns and _scalar(v))
    columns = [c for c in columns if all(_scalar(r.get(c)) for r in rows)]
    t = Table(title=escape(title), title_justify="left")
    for col in columns:
        t.add_column(escape(col), overflow="fold")
    for r in rows:
        t.add_row(*(escape(_cell(r.get(c))) for c in columns))
    return t
