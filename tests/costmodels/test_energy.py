"""The energy objective (issue #15): cited figures, the model, breakdowns, overrides and searches.

Sources of the figures (each preset's ``energy:`` section cites them beside each number):
- M. Horowitz, "Computing's energy problem (and what we can do about it)", ISSCC 2014: the energy
  table at 45 nm, 0.9 V (8b int mult 0.2 pJ, 32b int add 0.1, 16b FP mult 1.1, 32b FP add 0.9,
  32b FP mult 3.7; SRAM 64-bit access 10 pJ at 8 KB, 20 pJ at 32 KB, 100 pJ at 1 MB);
- kylolab.com "Ultra-Bandwidth Solutions" memory comparison: GDDR6 7.5 pJ/bit, HBM2E 6.0 pJ/bit;
- [ASSUMPTION] node scaling x0.25 (5-7 nm class) and x0.4 (12 nm class), stated in each preset;
- hardware-facts.md §1.1 (RNGD): TSMC 5 nm; TDP 180 W; peak 256 TFLOPS bf16 ... 1024 TOPS int4.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodels.energy import OVERRIDE_SOURCE, EnergyPricer, EnergyTable, mac_dtype, pricer
from costmodels.presets import preset_names
from costmodels.protocol import CostReport, Target
from costmodels.registry import get_target, target_names
from mapper import SearchSettings, tune
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.problem import Problem

# ---- the cited base figures (Horowitz ISSCC 2014, 45 nm; kylolab pJ/bit) ---------------------------
MAC_45NM = {  # pJ per MAC: multiply + accumulate add (the accumulator's width)
    "i4": 0.2 / 4 + 0.1,  # [ASSUMPTION] 4b mult = 8b mult / 4 (bits^2), + 32b int add
    "i8": 0.2 + 0.1,  # 8b int mult + 32b int add (i32 accumulator)
    "f8e4m3": 0.2 + 0.9,  # [ASSUMPTION] fp8 mult ~ 8b int mult, + 32b FP add (f32 accumulator)
    "f8e5m2": 0.2 + 0.9,
    "bf16": 1.1 + 0.9,  # 16b FP mult + 32b FP add
    "f16": 1.1 + 0.9,
    "f32": 3.7 + 0.9,  # 32b FP mult + 32b FP add
}
SRAM_45NM = {"8KB": 10 / 8, "32KB": 20 / 8, "1MB": 100 / 8}  # pJ per byte of a 64-bit access
DRAM_PJ_PER_BYTE = {"HBM2E": 6.0 * 8, "GDDR6": 7.5 * 8}
#: node scale of each preset ([ASSUMPTION] in each preset's references) and its SRAM size class per level
SCALE = {
    "rngd": 0.25,
    "trn1": 0.25,
    "trn2": 0.25,
    "ascend-910b": 0.25,
    "ascend-a5": 0.25,
    "wormhole-n150": 0.4,
    "blackhole-p150": 0.25,
}
SRAM_CLASS = {
    "rngd": {"dm": "1MB", "trf": "8KB"},  # DM 512 KiB per slice, TRF 8 KB per lane (hardware-facts.md §1.1)
    "trn1": {"sbuf": "1MB", "psum": "32KB"},
    "trn2": {"sbuf": "1MB", "psum": "32KB"},
    "ascend-910b": {"gm": "1MB", "l1": "1MB", "l0a": "32KB", "l0b": "32KB", "l0c": "32KB", "ub": "1MB"},
    "ascend-a5": {"gm": "1MB", "l1": "1MB", "l0a": "32KB", "l0b": "32KB", "l0c": "1MB", "ub": "1MB"},
    "wormhole-n150": {"l1": "1MB"},
    "blackhole-p150": {"l1": "1MB"},
}
DRAM_KIND = {
    "rngd": ("hbm", "HBM2E"),
    "trn1": ("hbm", "HBM2E"),
    "trn2": ("hbm", "HBM2E"),
    "ascend-910b": ("hbm", "HBM2E"),
    "ascend-a5": ("hbm", "HBM2E"),
    "wormhole-n150": ("dram", "GDDR6"),
    "blackhole-p150": ("dram", "GDDR6"),
}


def _table(name: str) -> EnergyTable:
    table = get_target(name).hardware.energy  # type: ignore[attr-defined]
    assert isinstance(table, EnergyTable)
    return table


def test_every_preset_has_an_energy_table() -> None:
    assert set(target_names()) == set(SCALE) and set(preset_names()) >= set(SCALE)


@pytest.mark.parametrize("name", list(SCALE))
def test_mac_figures_are_the_cited_horowitz_sums_scaled_by_the_node(name: str) -> None:
    table = _table(name)
    assert table.mac_pj, name
    for dtype, figure in table.mac_pj.items():
        assert figure.pj == pytest.approx(MAC_45NM[dtype] * SCALE[name], rel=1e-12), (name, dtype)
        assert figure.source.startswith("Horowitz2014:") and f"{MAC_45NM[dtype]:g} pJ at 45 nm" in figure.source
        assert ("scale-5-7nm" if SCALE[name] == 0.25 else "scale-12nm") in figure.source
    refs = table.references
    assert "ISSCC 2014" in refs["Horowitz2014"] and "[ASSUMPTION]" in refs["node"] + refs.get("scale-5-7nm", "x")


@pytest.mark.parametrize("name", list(SCALE))
def test_byte_figures_are_the_cited_sram_class_or_dram_figure(name: str) -> None:
    table = _table(name)
    level, kind = DRAM_KIND[name]
    assert table.byte_pj[level].pj == DRAM_PJ_PER_BYTE[kind]
    assert table.byte_pj[level].source.startswith(f"kylolab: {kind}") and "kylolab" in table.references
    for lv, cls in SRAM_CLASS[name].items():
        fig = table.byte_pj[lv]
        assert fig.pj == pytest.approx(SRAM_45NM[cls] * SCALE[name], rel=1e-12), (name, lv)
        assert fig.source.startswith("Horowitz2014:") and "sram-class" in fig.source
    assert "[ASSUMPTION]" in table.references["sram-class"]
    for lv in set(table.byte_pj) - set(SRAM_CLASS[name]) - {level}:  # Tenstorrent's NoC and halo
        assert table.byte_pj[lv].source.startswith("[ASSUMPTION]")
        assert table.byte_pj[lv].pj == pytest.approx(2 * table.byte_pj["l1"].pj)


def test_rngd_mac_array_at_peak_stays_under_its_tdp() -> None:
    """hardware-facts.md §1.1: TDP 180 W (150 W in the early preview). The MAC figures, at the chip's peak
    MAC rate, must not exceed the whole board's power: a check the figures are of the right order."""
    t = get_target("rngd")
    hw = t.hardware  # type: ignore[attr-defined]
    for dtype, figure in hw.energy.mac_pj.items():
        watts = figure.pj * 1e-12 * hw.peak_macs_per_cycle(dtype) * hw.clock_hz
        assert 0 < watts < 150, (dtype, watts)


# ---- the figures are what the model uses ----------------------------------------------------------

GEMM = einsum("mk,kn->mn", {"m": 256, "k": 192, "n": 320}, dtype="bf16", weight=1)
CONV = conv2d(batch=1, in_channels=32, out_channels=64, input_height=16, input_width=16, kernel=3, padding=1)
INT8 = einsum("mk,kn->mn", {"m": 64, "k": 128, "n": 64}, dtype="i8", weight=1)
ROWSUM = einsum("ij->i", {"i": 64, "j": 256}, dtype="f16")
PROBLEMS = {"gemm": GEMM, "conv": CONV, "int8": INT8, "rowsum": ROWSUM}


def _feasible_reports(target: Target, problem: Problem, n: int, seed: int) -> list[CostReport]:
    space = target.space(problem)
    rng = np.random.default_rng(seed)
    out: list[CostReport] = []
    for _ in range(n * 20):
        point = {p.name: p.choices[int(rng.integers(len(p.choices)))] for p in space.params}
        mapping = target.mapping(problem, point)
        if not target.check(problem, mapping):
            out.append(target.cost(problem, mapping))
            if len(out) == n:
                break
    return out


@pytest.fixture(scope="module", params=sorted(SCALE))
def target(request: pytest.FixtureRequest) -> Target:
    return get_target(request.param)


@pytest.mark.parametrize("pname", list(PROBLEMS))
def test_breakdowns_sum_to_their_totals_and_use_the_table(target: Target, pname: str) -> None:
    """energy_breakdown sums to energy_pj, each level's operand bytes to bytes[level], the stall stack
    to cycles; every level is priced at its figure and the MACs at the problem's dtype's."""
    problem = PROBLEMS[pname]
    if target.supports(problem):
        pytest.skip(f"{target.name} does not run {pname}")
    table: EnergyTable = target.hardware.energy  # type: ignore[attr-defined]
    reports = _feasible_reports(target, problem, 40, seed=len(pname))
    assert reports, f"no feasible point of {pname} on {target.name}"
    names = {op.name for op in problem.operands}
    for r in reports:
        assert r.energy_pj is not None and r.energy_pj > 0
        assert sum(r.energy_breakdown.values()) == pytest.approx(r.energy_pj, rel=1e-12)
        assert r.energy_breakdown["mac"] == pytest.approx(table.mac(mac_dtype(problem)) * problem.macs, rel=1e-12)
        levels = set(r.energy_breakdown) - {"mac"}
        assert levels <= set(r.bytes) and levels == set(r.operand_bytes) == set(r.operand_energy)
        for lv in levels:
            assert r.energy_breakdown[lv] == pytest.approx(table.byte_pj[lv].pj * r.bytes[lv], rel=1e-12)
            ops = r.operand_bytes[lv]
            assert set(ops) <= names and sum(ops.values()) == pytest.approx(r.bytes[lv], rel=1e-9, abs=1e-6)
            assert all(v >= -1e-6 * max(1.0, r.bytes[lv]) for v in ops.values()), (lv, ops)
            for op, b in ops.items():
                assert r.operand_energy[lv][op] == pytest.approx(table.byte_pj[lv].pj * b, rel=1e-12)
        assert sum(r.stall_stack.values()) == pytest.approx(r.cycles, rel=1e-9)
        assert all(v >= -1e-9 * r.cycles for v in r.stall_stack.values()), r.stall_stack
        assert "compute" in r.stall_stack
        assert r.objective("energy") == r.energy_pj


@pytest.mark.parametrize("name", sorted(SCALE))
def test_noc_levels_of_tenstorrent_are_its_operands_not_extra_levels(name: str) -> None:
    if not name.endswith(("n150", "p150")):
        pytest.skip("Tenstorrent only")
    (r,) = _feasible_reports(get_target(name), GEMM, 1, seed=3)
    assert (
        r.operand_bytes["noc"]["B"] == r.bytes["noc_weights"]
        and r.operand_bytes["noc"]["A"] == r.bytes["noc_activations"]
    )
    assert "noc_weights" not in r.energy_breakdown


# ---- the model --------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1e12, allow_nan=False), min_size=3, max_size=3),
    st.lists(st.floats(0, 1e12, allow_nan=False), min_size=3, max_size=3),
    st.floats(0, 1e12, allow_nan=False),
)
def test_energy_is_monotone_in_bytes(a: list[float], extra: list[float], mac: float) -> None:
    p = EnergyPricer(mac=mac, per_byte=(("hbm", 48.0), ("dm", 3.125), ("trf", 0.3125)))
    lo = dict(zip(("hbm", "dm", "trf"), a, strict=True))
    hi = {k: v + e for (k, v), e in zip(lo.items(), extra, strict=True)}
    assert p.total(hi) >= p.total(lo)
    if any(e > 0 for e in extra):
        assert p.total(hi) > p.total(lo) or math.isclose(p.total(hi), p.total(lo), rel_tol=1e-15)


@pytest.mark.parametrize("name", sorted(SCALE))
def test_energy_is_monotone_in_macs(name: str) -> None:
    """Twice the K of a GEMM: twice the MACs, twice the MAC energy; more of every byte can only add."""
    small = einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, dtype="bf16", weight=1)
    big = einsum("mk,kn->mn", {"m": 64, "k": 128, "n": 64}, dtype="bf16", weight=1)
    table = _table(name)
    levels = tuple(table.byte_pj)
    ps, pb = pricer(table, small, levels), pricer(table, big, levels)
    assert pb.mac == pytest.approx(2 * ps.mac) and ps.mac > 0
    same = dict.fromkeys(levels, 1000.0)
    assert pb.total(same) > ps.total(same)


def test_a_mixed_precision_problem_pays_its_wider_inputs_mac() -> None:
    p = einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 8}, dtype={"A": "f8e4m3", "B": "bf16"}, weight=1)
    assert mac_dtype(p) == "bf16"
    assert mac_dtype(einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 8}, dtype="i8", weight=1)) == "i8"


def test_a_dtype_without_a_figure_costs_the_dearest_mac() -> None:
    table = _table("rngd")  # no f32 entry: RNGD does not run f32
    assert "f32" not in table.mac_pj and table.mac("f32") == max(f.pj for f in table.mac_pj.values())


# ---- overrides ----------------------------------------------------------------------------------------


def test_a_dotted_override_changes_one_figure_and_records_the_request_as_its_source() -> None:
    t = get_target("trn2", {"energy.byte_pj.hbm": 10})
    fig = t.hardware.energy.byte_pj["hbm"]  # type: ignore[attr-defined]
    assert fig.pj == 10.0 and fig.source == OVERRIDE_SOURCE
    assert get_target("trn2").hardware.energy.byte_pj["hbm"].pj == 48.0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"energy.byte_pj.hbm": -1}, "energy.byte_pj.hbm"),
        ({"energy.byte_pj.l3": 1.0}, "must price exactly the memory levels"),
        ({"energy.no_section.x": 1.0}, "no section 'energy.no_section'"),
        ({"energy.byte_pj.hbm": "lots"}, "energy.byte_pj.hbm"),
    ],
)
def test_a_bad_energy_override_is_a_problem_error_naming_it(overrides: dict[str, object], needle: str) -> None:
    with pytest.raises(ProblemError) as e:
        get_target("trn2", overrides)
    assert needle in str(e.value) or needle in (e.value.token or "")


def test_an_override_of_an_energy_figure_changes_the_energy_optimum() -> None:
    """Ascend 910B, a 256x192x320 GEMM: with L0A bytes made dear (and HBM free) the energy-optimal
    mapping moves to one that loads fewer left tiles into L0A."""
    base = tune(GEMM, get_target("ascend-910b"), SearchSettings(objectives=("energy",)), validate=False)
    over = {"energy.byte_pj.hbm": 0, "energy.byte_pj.l0a": 1000}
    dear = tune(GEMM, get_target("ascend-910b", over), SearchSettings(objectives=("energy",)), validate=False)
    assert base.proven_optimal and dear.proven_optimal
    assert base.mapping is not None and dear.mapping is not None and base.cost is not None and dear.cost is not None
    assert base.mapping.knobs != dear.mapping.knobs
    assert dear.cost.bytes["l0a"] < base.cost.bytes["l0a"]


def test_a_latency_and_energy_search_returns_a_pareto_front() -> None:
    t = get_target("trn2")
    r = tune(GEMM, t, SearchSettings(objectives=("latency", "energy"), max_seconds=3), validate=False)
    front = [(p.values["latency"], p.values["energy"]) for p in r.pareto]
    assert len(front) >= 2
    for i, a in enumerate(front):  # no point of the front dominates another
        for j, b in enumerate(front):
            assert i == j or not (b[0] <= a[0] and b[1] <= a[1] and b != a), (a, b)
    fastest = min(r.pareto, key=lambda p: p.values["latency"])
    frugal = min(r.pareto, key=lambda p: p.values["energy"])
    assert fastest.values["energy"] > frugal.values["energy"]  # the trade-off is real on this problem
    for p in (fastest, frugal):  # each front value is what cost() prices for its point
        report = t.cost(GEMM, t.mapping(GEMM, p.point))
        assert report.energy_pj == pytest.approx(p.values["energy"], rel=1e-9)
        assert report.seconds == pytest.approx(p.values["latency"], rel=1e-9)
