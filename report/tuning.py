"""The report of one tuning result: summary, roofline, breakdowns, search, loop nest, core grid."""

from __future__ import annotations

from typing import Any

from costmodels.protocol import Target
from costmodels.tenstorrent.hardware import TensixHardware
from mapper.result import TuneResult
from report.breakdown import Bars, bars_svg, bytes_bars, energy_bars, latency_bars
from report.core_grid import core_grid, core_grid_svg
from report.nest import nest_levels, nest_svg
from report.page import Raw, esc, figure, kv_table, num, pair, paragraph, section, table
from report.roofline import RooflinePoint, roofline_point, roofline_svg
from report.search_plots import UNITS, pareto_svg, trace_svg
from workload.problem import Problem


def verdict(result: TuneResult) -> tuple[str, str]:
    """(status, reason) of the executor's validation: passed, failed, not-checked or not validated."""
    v: dict[str, Any] = result.validation or {}
    if not v:
        return "not validated", "the search ran without the executor (--no-validate) or nothing was feasible"
    return str(v.get("status", "not-checked")), str(v.get("reason", ""))


def _verdict_cell(result: TuneResult) -> Raw:
    status, reason = verdict(result)
    cls = {"passed": "verdict-passed", "failed": "verdict-failed"}.get(status, "muted")
    return Raw(f'<span class="{cls}">{esc(status)}</span> {esc(reason)}')


def certificate_text(result: TuneResult) -> str:
    c = result.certificate
    if c is None:
        return "none"
    within = (
        "proven optimal over it"
        if c.complete
        else f"within {num(c.gap_bound)} of its optimum"
        if c.gap_bound is not None
        else "no bound"
    )
    return (
        f"{num(c.space_points)} points in {num(c.structures_total)} structure(s): {c.scored} scored, "
        f"{c.pruned_by_bound} pruned by bound, {c.unexplored} unexplored; {within}"
    )


def summary_rows(result: TuneResult) -> list[tuple[str, object]]:
    cost = result.cost
    rows: list[tuple[str, object]] = [
        ("target", f"{result.target} ({result.family})"),
        ("problem", result.problem),
        ("objectives", ", ".join(result.objectives)),
    ]
    for o in result.objectives:
        rows.append((f"best {o}", f"{num(result.values.get(o))} {UNITS.get(o, '')}".strip()))
    if cost is not None:
        rows.append(("latency", f"{num(cost.cycles)} cycles = {num(cost.seconds)} s at {num(cost.clock_hz / 1e9)} GHz"))
        rows.append(("bound by", cost.bound))
        rows.append(("utilization", f"{cost.utilization:.1%}"))
    rows += [
        ("roofline lower bound", f"{num(result.lower_bound.cycles)} cycles ({result.lower_bound.reason})"),
        ("gap to bound", "-" if result.gap is None else f"{result.gap:.1%}"),
        ("proven optimal", "yes" if result.proven_optimal else "no"),
        ("certificate", certificate_text(result)),
        ("validation", _verdict_cell(result)),
        ("strategy, stop", f"{result.strategy}, {result.stop_reason}"),
        ("points scored", result.counts.points_scored),
        ("search time", f"{num(result.seconds)} s" + (" (cached result)" if result.cached else "")),
        ("cost model", result.cost_model_version),
    ]
    if result.transform is not None:  # the folded stem, priced beside the problem (mapper.transforms)
        rows.append(("transform", result.transform.summary()))
    return rows


def roofline_table(points: list[RooflinePoint]) -> str:
    header = ["layer", "MAC per off-chip byte", "attained MAC/s", "peak MAC/s", "off-chip B/s", "ridge", "of roof"]
    rows = [
        [p.label, p.intensity, p.attained, p.roof.peak_macs_per_s, p.roof.bytes_per_s, p.roof.ridge,
         f"{p.fraction_of_roof:.1%}"]
        for p in points
    ]  # fmt: skip
    return table(header, rows, cls="roofline")


def _bars_table(bars: Bars, cls: str) -> str:
    parts = list(dict.fromkeys(p for v in bars.values.values() for p in v))
    if parts == [""]:
        return table(["", bars.unit], [[c, v[""]] for c, v in bars.values.items()], cls=cls)
    rows = [[c, *(v.get(p, 0.0) for p in parts), sum(v.values())] for c, v in bars.values.items()]
    return table(["", *[p or "(all)" for p in parts], "total"], rows, cls=cls)


def breakdown_sections(result: TuneResult) -> str:
    cost = result.cost
    if cost is None:
        return ""
    out = []
    lat = latency_bars(cost)
    out.append(pair(figure(bars_svg(lat, "latency"), f"{lat.title}: {lat.note}"), _bars_table(lat, "latency")))
    byt = bytes_bars(cost)
    out.append(
        pair(
            figure(bars_svg(byt, "bytes"), byt.title + (f": {byt.note}" if byt.note else "")), _bars_table(byt, "bytes")
        )
    )
    en = energy_bars(cost)
    if en is None:
        out.append(
            paragraph("Energy: this target's model prices no energy yet (CostReport.energy_pj is empty).", cls="muted")
        )
    else:
        out.append(
            pair(
                figure(bars_svg(en, "energy"), en.title + (f": {en.note}" if en.note else "")),
                _bars_table(en, "energy"),
            )
        )
    return section("Where the time, bytes and energy go", "".join(out), id="breakdown")


def search_section(result: TuneResult) -> str:
    out = []
    svg = trace_svg(result)
    if svg is None:
        why = (
            "An enumeration of several objectives keeps a Pareto front, not a best value per chunk: no trace."
            if len(result.objectives) > 1 and result.trace
            else "No step of the search found a feasible mapping to trace."
        )
        out.append(paragraph(why, cls="muted"))
    else:
        steps = [v for v in result.trace if v is not None]
        out.append(
            figure(svg, f"best {result.objectives[0]} after each step: first {num(steps[0])}, last {num(steps[-1])} "
                   f"over {len(result.trace)} step(s)")
        )  # fmt: skip
    pareto = pareto_svg(result)
    if pareto is not None:
        objs = result.objectives
        rows = [
            [*(p.values.get(o) for o in objs), ", ".join(f"{k}={v}" for k, v in p.point.items())] for p in result.pareto
        ]
        out.append(
            figure(pareto, f"Pareto front: {len(result.pareto)} mapping(s)")
            + table([*objs, "point"], rows, cls="pareto")
        )
    return section("Search", "".join(out), id="search")


def nest_section(result: TuneResult, problem: Problem) -> str:
    if result.mapping is None:
        return ""
    levels = nest_levels(problem, result.mapping, result.family)
    names = [o.name for o in problem.operands]
    rows = [
        [lv.name, lv.loops, *(f"{'x'.join(map(str, lv.operand_tile[n]))} in {lv.memory[n] or '?'}" for n in names)]
        for lv in levels
    ]
    body = figure(nest_svg(levels), f"loop nest, {len(levels)} levels, outermost outside (* spatial loop)")
    body += table(["level", "loops", *[f"{n} tile, memory" for n in names]], rows, cls="nest", numeric=False)
    if result.render:
        body += f"<h3>The target's own dump</h3><pre>{esc(result.render)}</pre>"
    return section("Loop nest", body, id="nest")


def grid_section(result: TuneResult, problem: Problem, target: Target | None) -> str:
    if target is None or result.family != "tenstorrent" or result.mapping is None:
        return ""
    layout = result.mapping.knobs.get("layout")
    hw = target.hardware
    if not isinstance(layout, str) or not isinstance(hw, TensixHardware):
        return ""
    grid = core_grid(problem, hw, layout)
    if grid is None:
        return ""
    rows = [[f"({s.x}, {s.y})", "idle" if s.idle else f"{s.rows[0]}-{s.rows[1] - 1}",
             "idle" if s.idle else f"{s.channels[0]}-{s.channels[1] - 1}"] for s in grid.cores]  # fmt: skip
    body = figure(
        core_grid_svg(grid),
        f"layout {layout} on the {grid.grid_y}x{grid.grid_x} grid: output sticks (r) and channels (c) of each core, "
        "in whole 32-row tiles per core as the cost model prices them (cores past the last shard are idle)",
    )
    body += f"<details><summary>each core's shard ({len(grid.cores)} cores)</summary>"
    body += table(["core (x, y)", "output sticks", "output channels"], rows, cls="cores", numeric=False) + "</details>"
    return section("Core grid", body, id="cores")


def tune_body(result: TuneResult, problem: Problem, target: Target | None = None, *, label: str = "") -> str:
    """Every section of one result's report."""
    if result.transform is not None and result.transform.chosen:  # the mapping is the folded conv's
        from workload.conv_fold import folded_problem

        problem = folded_problem(problem)
    parts = [section("Summary", kv_table(summary_rows(result), cls="summary"), id="summary")]
    point = roofline_point(result, problem, label or problem.label or "problem")
    if point is not None:
        cap = (f"intensity {num(point.intensity)} MAC/B, attained {num(point.attained)} MAC/s, "
               f"{point.fraction_of_roof:.1%} of the roof at that intensity")  # fmt: skip
        parts.append(
            section(
                "Roofline",
                pair(figure(roofline_svg([point], result.target), cap), roofline_table([point])),
                id="roofline",
            )
        )
    if result.counts.top_violations:
        rows = [[v.code, v.count, v.unit, v.message] for v in result.counts.top_violations]
        title = "Constraints that ruled mappings out" if result.feasible else "Why no mapping is feasible"
        parts.append(
            section(title, table(["constraint", "count", "of", "message"], rows, cls="violations"), id="violations")
        )
    parts.append(breakdown_sections(result))
    parts.append(search_section(result))
    parts.append(nest_section(result, problem))
    parts.append(grid_section(result, problem, target))
    notes = [*result.notes, *(result.cost.notes if result.cost else ())]
    if notes:
        parts.append(section("Notes", "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>", id="notes"))
    return "".join(parts)
