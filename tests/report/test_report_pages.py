"""The HTML report of a result on each family, and of a small workload: its parts are there and carry
the result's numbers; the page loads nothing from anywhere."""

from __future__ import annotations

import re
from functools import cache

import pytest

from costmodels import get_target
from costmodels.protocol import Target
from mapper import SearchSettings, tune
from mapper.result import TuneResult
from mapper.workloads import tune_layers
from report import comparison_report, tune_report, workload_report
from report.page import num
from tests.report.html_parts import all_ids, ids, number, parse, svgs, texts
from workload import conv2d, einsum
from workload.problem import Problem

GEMM = einsum("mk,kn->mn", {"m": 256, "k": 256, "n": 256}, weight="B")
CONV = conv2d(batch=1, in_channels=32, out_channels=32, input_height=14, input_width=14, kernel=(3, 3),
              stride=(1, 1), padding=(1, 1))  # fmt: skip
CASES = {"rngd": GEMM, "trn2": GEMM, "ascend-910b": GEMM, "wormhole-n150": CONV}

# The roof of each target for a bf16 problem, from the reference documents (not from the code):
# peak MAC/s and off-chip bytes/s.
ROOFS = {
    # hardware-facts.md §1.1: 512 slices x 256 MAC/cycle (bf16: 8 rows x 32) at 1.0 GHz; HBM 1.5 TB/s
    "rngd": (512 * 256 * 1.0e9, 1.5e12),
    # hardware-facts.md §2.1: Trn2 8 NeuronCores, 128 x 128 PE array at 2.4 GHz; HBM 2.9 TB/s
    "trn2": (8 * 128 * 128 * 2.4e9, 2.9e12),
    # hardware-facts.md §3.1: 24 AIC x 16x16x16 fractal per cycle at 1800 MHz; DDR 32 B/cycle per AIC
    "ascend-910b": (24 * 16 * 16 * 16 * 1.8e9, 24 * 32 * 1.8e9),
    # hardware-facts.md §4.1: 64 cores x 32^3 MAC per 64 cycles at HiFi4 (the default) at 1.0 GHz; 288 GB/s
    "wormhole-n150": (64 * 32**3 / 64 * 1.0e9, 288e9),
}


@cache
def tuned(target: str, objectives: tuple[str, ...] = ("latency",)) -> tuple[TuneResult, Problem, Target]:
    t = get_target(target)
    problem = CASES[target]
    budget = {"max_seconds": 3.0} if len(objectives) > 1 else {}  # a front on a large space runs to its budget
    return tune(problem, t, SearchSettings(objectives=objectives, **budget)), problem, t


@cache
def page(target: str, objectives: tuple[str, ...] = ("latency",)) -> str:
    r, p, t = tuned(target, objectives)
    return tune_report(r, p, t)


def no_outside_reference(html: str) -> None:
    assert not re.search(r"https?://", html), "the page names a host"
    assert not re.search(r"\b(src|xlink:href)\s*=", html)
    assert not re.search(r"@import|url\((?!#)", html), "the style loads something"
    assert parse(html).fetching == []


@pytest.mark.parametrize("target", list(CASES))
def test_a_report_on_each_family_has_every_part_and_nothing_from_elsewhere(target: str) -> None:
    r, _problem, _ = tuned(target)
    html = page(target)
    doc = parse(html)
    no_outside_reference(html)
    assert html.startswith("<!DOCTYPE html>")
    for part in ("summary", "roofline", "breakdown", "search", "nest"):
        assert part in doc.sections
    assert ("cores" in doc.sections) == (target == "wormhole-n150")
    pictures = svgs(html)
    assert {"roofline", "latency", "bytes", "trace", "nest"} <= set(pictures)
    for svg in pictures.values():
        assert svg.get("role") == "img" and svg.get("aria-label")  # named for people who cannot see it
    summary = doc.summary()
    assert summary["target"] == f"{target} ({r.family})"
    assert summary["problem"] == r.problem
    assert r.gap is not None and summary["gap to bound"] == f"{r.gap:.1%}"
    assert summary["validation"].startswith("passed") and r.validation_passed
    assert summary["proven optimal"] == ("yes" if r.proven_optimal else "no")
    assert summary["certificate"].startswith(f"{num(r.certificate.space_points)} points")  # type: ignore[union-attr]


@pytest.mark.parametrize("target", list(CASES))
def test_the_roofline_point_comes_from_the_cost_report_under_the_documented_roof(target: str) -> None:
    r, problem, _ = tuned(target)
    assert r.cost is not None
    row = parse(page(target)).table("roofline").rows[1]
    intensity, attained, peak, bandwidth = (number(c) for c in row[1:5])
    assert intensity == pytest.approx(problem.macs / r.cost.offchip_bytes, rel=1e-3)
    assert attained == pytest.approx(problem.macs / r.cost.seconds, rel=1e-3)
    doc_peak, doc_bw = ROOFS[target]
    assert peak == pytest.approx(doc_peak, rel=1e-3)
    assert bandwidth == pytest.approx(doc_bw, rel=1e-3)
    svg = svgs(page(target))["roofline"]
    assert ids(svg, "roofline-point-") == ["roofline-point-0"] and ids(svg, "roofline-roof-") == ["roofline-roof-0"]


@pytest.mark.parametrize("target", list(CASES))
def test_the_nest_has_one_tile_per_mapping_level_with_its_loops_and_memories(target: str) -> None:
    r, problem, _ = tuned(target)
    assert r.mapping is not None
    html = page(target)
    nest = svgs(html)["nest"]
    assert ids(nest, "nest-level-") == [f"nest-level-{i}" for i in range(len(r.mapping.levels))]
    words = texts(nest)
    rows = parse(html).table("nest").rows
    assert [row[0] for row in rows[1:]] == [lv.name for lv in r.mapping.levels]
    for level, row in zip(r.mapping.levels, rows[1:], strict=True):
        assert f"{level.name}:" in words
        for lp in level.loops:
            assert f"{lp.axis} x{lp.factor}" in row[1]
    # the outermost tile is the whole problem with the mapping's padding (ascend pads m=256 to 6 x 43)
    whole = "x".join(str(r.mapping.padded_size(d.terms[0].axis)) for d in problem.output.dims)
    assert rows[1][-1].startswith(f"{whole} in ")
    assert all(r.mapping.padded_size(a) >= n for a, n in problem.axes.items())


def test_the_nest_names_the_memory_each_family_keeps_operands_in() -> None:
    # hardware-facts.md §2.1: the tensor engine reads SBUF and writes PSUM
    rows = parse(page("trn2")).table("nest").rows
    inner = rows[-1]
    assert inner[0] == "nc_matmul" and inner[-1].endswith("in psum")
    # hardware-facts.md §3.2: MTE1 moves L1 -> L0A / L0B, the cube accumulates in L0C
    rows = parse(page("ascend-910b")).table("nest").rows
    l0 = next(r for r in rows if r[0] == "l0")
    assert [c.split(" in ")[1] for c in l0[2:]] == ["l0a", "l0b", "l0c"]
    # hardware-facts.md §1.1: the weight (TRF) input sits in the slice's TRF inside a row
    rows = parse(page("rngd")).table("nest").rows
    row = next(r for r in rows if r[0] == "row")
    assert row[3].endswith("in trf")  # B, the weight


def test_the_latency_bytes_and_energy_bars_carry_the_cost_report() -> None:
    r, _, _ = tuned("rngd")
    c = r.cost
    assert c is not None and c.stall_stack and c.energy_pj  # every family prices them since the energy work
    html = page("rngd")
    doc = parse(html)
    lat = doc.table("latency").rows
    assert lat[0] == ["", *c.stall_stack, "total"]
    assert [number(x) for x in lat[1][1:-1]] == pytest.approx(list(c.stall_stack.values()), rel=1e-3)
    assert number(lat[1][-1]) == pytest.approx(c.cycles, rel=1e-3)  # the stack sums to the latency
    byt = {row[0]: number(row[-1]) for row in doc.table("bytes").rows[1:]}
    assert byt == pytest.approx({lvl: b for lvl, b in c.bytes.items() if lvl in byt}, rel=1e-3)
    assert set(byt) <= set(c.bytes)
    en = {row[0]: number(row[-1]) for row in doc.table("energy").rows[1:]}
    assert sum(en.values()) == pytest.approx(c.energy_pj, rel=1e-3)
    bars = svgs(html)["latency"]
    assert len(ids(bars, "latency-bar-latency-")) == len(c.stall_stack) and ids(bars, "latency-total")
    assert "prices no energy" not in html


def test_the_convergence_trace_and_the_pareto_front_of_two_objectives() -> None:
    r, _, _ = tuned("trn2")
    steps = [v for v in r.trace if v is not None]
    assert steps, "a single-objective enumeration traces its best per chunk"
    html = page("trn2")
    assert f"first {num(steps[0])}, last {num(steps[-1])}" in html
    assert "pareto" not in parse(html).sections and "pareto" not in svgs(html)
    two = ("latency", "offchip_bytes")
    r2, _, _ = tuned("trn2", two)
    html2 = page("trn2", two)
    front = parse(html2).table("pareto").rows[1:]
    assert len(r2.pareto) >= 2 and len(front) == len(r2.pareto)
    assert sorted(number(row[1]) for row in front) == pytest.approx(
        sorted(p.values["offchip_bytes"] for p in r2.pareto)
    )
    pic = svgs(html2)["pareto"]
    assert len(ids(pic, "pareto-point-")) == len({tuple(p.values.values()) for p in r2.pareto})
    assert ids(pic, "pareto-best")


def test_the_tenstorrent_core_grid_shows_the_layouts_cores_and_their_shards() -> None:
    r, _problem, t = tuned("wormhole-n150")
    assert r.mapping is not None
    layout = str(r.mapping.knobs["layout"])
    html = page("wormhole-n150")
    grid = svgs(html)["cores"]
    hw = t.hardware
    assert len(ids(grid, "cores-core-")) == hw.grid_x * hw.grid_y  # type: ignore[attr-defined]
    rows = parse(html).table("cores").rows[1:]
    kind, _, count = layout.partition("/")
    used = eval(count.replace("x", "*")) if kind == "block" else int(count)
    assert len(rows) == used
    assert layout in texts(grid)


def test_energy_and_stall_stack_fields_are_drawn_when_a_target_fills_them() -> None:
    r, problem, t = tuned("trn2")
    assert r.cost is not None
    c = r.cost
    stall = {"compute": c.cycles * 0.25, "hbm": c.cycles * 0.5, "fill": c.cycles * 0.25}
    op_bytes = {lvl: {"A": b / 2, "B": b / 4, "Y": b / 4} for lvl, b in c.bytes.items()}
    energy = {"mac": 1000.0, **{lvl: b * 2.0 for lvl, b in c.bytes.items()}}
    op_energy = {lvl: {k: v * 2.0 for k, v in ops.items()} for lvl, ops in op_bytes.items()}
    cost = c.model_copy(update={"stall_stack": stall, "operand_bytes": op_bytes, "energy_breakdown": energy,
                                "operand_energy": op_energy, "energy_pj": sum(energy.values())})  # fmt: skip
    html = tune_report(r.model_copy(update={"cost": cost}), problem, t)
    doc = parse(html)
    lat = doc.table("latency").rows
    assert lat[0] == ["", "compute", "hbm", "fill", "total"]
    assert number(lat[1][-1]) == pytest.approx(c.cycles, rel=1e-3)  # the stack sums to the latency
    byt = {row[0]: [number(x) for x in row[1:]] for row in doc.table("bytes").rows[1:]}
    for lvl, b in c.bytes.items():
        assert byt[lvl][-1] == pytest.approx(b, rel=1e-3)  # operands of a level sum to its bytes
    en = {row[0]: number(row[-1]) for row in doc.table("energy").rows[1:]}
    assert en["mac"] == 1000.0 and en["hbm"] == pytest.approx(2.0 * c.bytes["hbm"], rel=1e-3)
    assert "prices no energy" not in html
    assert {"energy", "latency", "bytes"} <= set(svgs(html))
    assert len(ids(svgs(html)["latency"], "latency-bar-latency-")) == 3  # one segment per stall component


def test_a_workload_report_puts_every_distinct_layer_on_the_roofline() -> None:
    a = einsum("mk,kn->mn", {"m": 128, "k": 256, "n": 128}, label="proj")
    b = einsum("mk,kn->mn", {"m": 64, "k": 512, "n": 256}, label="ffn")
    problems = [a, b, a.model_copy(update={"label": "proj again"})]
    target = get_target("trn2")
    wl = tune_layers(problems, "trn2", SearchSettings(), name="tiny", workers=1)
    html = workload_report(wl, problems, target)
    no_outside_reference(html)
    doc = parse(html)
    assert {"summary", "roofline", "layers", "slowest"} <= set(doc.sections)
    assert doc.summary()["layers (distinct, searched)"].startswith("3 (2,")
    layers = doc.table("layers").rows[1:]
    assert [row[1] for row in layers] == ["proj", "ffn", "proj again"]
    assert layers[2][-1] == "same as layer 0"
    points = doc.table("roofline").rows[1:]
    assert [row[0] for row in points] == ["proj", "ffn"]
    for row, p in zip(points, problems[:2], strict=True):
        r = wl.results[next(lay.problem_hash for lay in wl.layers if lay.label == row[0])]
        assert r.cost is not None
        assert number(row[1]) == pytest.approx(p.macs / r.cost.offchip_bytes, rel=1e-3)
    assert len(ids(svgs(html)["roofline"], "roofline-point-")) == 2
    slowest = max(wl.layers, key=lambda lay: wl.results[lay.problem_hash].cost.seconds)  # type: ignore[union-attr]
    assert f"Slowest layer in detail: {slowest.label}" in doc.headings
    assert {"slowest.summary", "slowest.nest"} <= set(doc.sections)
    every = all_ids(html)
    assert len(every) == len(set(every)), "two elements share an id"
    with pytest.raises(ValueError, match="3 layers but 2 problems"):
        workload_report(wl, problems[:2], target)


def test_a_comparison_report_has_a_section_per_target_and_the_reason_of_a_missing_one() -> None:
    r, problem, t = tuned("trn2")
    html = comparison_report([("trn2", r, None), ("rngd", None, "cancelled before this target was tuned")],
                             [problem], {"trn2": t})  # fmt: skip
    doc = parse(html)
    assert {"target-trn2", "target-rngd", "t0.summary"} <= set(doc.sections)
    every = all_ids(html)
    assert len(every) == len(set(every))
    assert "cancelled before this target was tuned" in html


def test_a_result_without_a_feasible_mapping_says_what_ruled_them_out() -> None:
    # a 64 KiB core with 60 KiB reserved fits no block of this conv (as tests/app/test_cli.py NO_FIT)
    target = get_target("wormhole-n150", {"l1_kib": 64, "l1_reserved_kib": 60})
    problem = conv2d(batch=1, in_channels=64, out_channels=64, input_height=8, input_width=8, kernel=(3, 3),
                     stride=(1, 1), padding=(1, 1))  # fmt: skip
    r = tune(problem, target, SearchSettings())
    assert not r.feasible and r.counts.top_violations
    html = tune_report(r, problem, target)
    doc = parse(html)
    assert "violations" in doc.sections and "Why no mapping is feasible" in doc.headings
    rows = doc.table("violations").rows[1:]
    assert [row[0] for row in rows] == [v.code for v in r.counts.top_violations]
    assert not {"roofline", "nest", "cores"} & set(doc.sections)  # nothing to draw without a mapping
    assert doc.summary()["validation"].startswith("not validated")
