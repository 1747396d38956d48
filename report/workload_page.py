"""The report of a workload: every layer on one roofline, latency per layer, and the slowest layer in detail."""

from __future__ import annotations

from collections.abc import Sequence

from costmodels.protocol import Target
from mapper.workloads import WorkloadResult
from report.breakdown import Bars, bars_svg
from report.page import esc, figure, kv_table, num, scoped, section, table
from report.roofline import RooflinePoint, roofline_point, roofline_svg
from report.search_plots import UNITS
from report.tuning import roofline_table, tune_body, verdict
from workload.problem import Problem


def layer_latency_bars(result: WorkloadResult) -> Bars:
    """Seconds of each distinct layer's best mapping (stacked per stall component when priced), per occurrence."""
    values: dict[str, dict[str, float]] = {}
    seen: set[str] = set()
    for lay in result.layers:
        r = result.results.get(lay.problem_hash)
        if r is None or r.cost is None or lay.problem_hash in seen:
            continue
        seen.add(lay.problem_hash)
        cost = r.cost
        if cost.stall_stack:
            values[lay.label] = {k: v / cost.clock_hz for k, v in cost.stall_stack.items()}
        else:
            values[lay.label] = {"": cost.seconds}
    return Bars("Latency of each distinct layer", "s", values, stacked=True)


def workload_body(result: WorkloadResult, problems: Sequence[Problem], target: Target | None = None) -> str:
    """Summary, roofline of the distinct layers, per-layer table and latency, the slowest layer in detail."""
    if len(problems) != len(result.layers):
        raise ValueError(f"the workload has {len(result.layers)} layers but {len(problems)} problems were given")
    unit = UNITS.get(result.objective, "")
    passed = sum(verdict(r)[0] == "passed" for r in result.results.values())
    summary = [
        ("workload", result.workload),
        ("target", result.target),
        ("objective", result.objective),
        (f"total {result.objective}", f"{num(result.total_value)} {unit}".strip()),
        ("layers (distinct, searched)", f"{len(result.layers)} ({result.distinct}, {result.searched})"),
        ("proven optimal", f"{result.proven_optimal} of {result.distinct} distinct layers"),
        ("validation", f"{passed} of {len(result.results)} distinct layers passed"),
        ("complete", "yes" if result.complete else "no: cancelled before every layer ended"),
        ("wall time", f"{num(result.seconds)} s"),
    ]
    parts = [section("Summary", kv_table(summary, cls="summary"), id="summary")]
    points: list[RooflinePoint] = []
    done: set[str] = set()
    for lay, prob in zip(result.layers, problems, strict=True):
        r = result.results.get(lay.problem_hash)
        if r is None or lay.problem_hash in done:
            continue
        done.add(lay.problem_hash)
        p = roofline_point(r, prob, lay.label)
        if p is not None:
            points.append(p)
    if points:
        fig = figure(
            roofline_svg(points, result.target), f"{len(points)} distinct layers on the roofline of {result.target}"
        )
        parts.append(section("Roofline", fig + roofline_table(points), id="roofline"))
    rows = []
    for lay in result.layers:
        r = result.results.get(lay.problem_hash)
        status = verdict(r)[0] if r is not None else "not searched"
        bound = r.cost.bound if r is not None and r.cost is not None else "-"
        rows.append([lay.index, lay.label, lay.value, "-" if lay.gap is None else f"{lay.gap:.1%}", bound,
                     "yes" if lay.proven_optimal else "no", status,
                     "" if lay.duplicate_of is None else f"same as layer {lay.duplicate_of}"])  # fmt: skip
    lat = layer_latency_bars(result)
    body = table(["#", "layer", f"{result.objective} ({unit})", "gap to bound", "bound by", "proven optimal",
                  "validation", ""], rows, cls="layers")  # fmt: skip
    if lat.values:
        body = figure(bars_svg(lat, "layers"), lat.title) + body
    parts.append(section("Layers", body, id="layers"))
    slowest = max(
        ((lay, prob) for lay, prob in zip(result.layers, problems, strict=True)
         if (r := result.results.get(lay.problem_hash)) is not None and r.cost is not None),
        key=lambda lp: result.results[lp[0].problem_hash].cost.seconds,  # type: ignore[union-attr]
        default=None,
    )  # fmt: skip
    if slowest is not None:
        lay, prob = slowest
        inner = scoped(tune_body(result.results[lay.problem_hash], prob, target, label=lay.label), "slowest.")
        parts.append(f'<section id="slowest"><h2>Slowest layer in detail: {esc(lay.label)}</h2>{inner}</section>')
    return "".join(parts)
