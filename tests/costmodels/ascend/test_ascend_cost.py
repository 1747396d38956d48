"""The Ascend cost model: the cube cycle formula, TROWPROD costs, double buffering, the roofline,
and score_batch agreeing with check/cost on every point of small spaces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from costmodels.ascend.target import AscendTarget
from costmodels.ascend.vector import row_reduce_cycles
from costmodels.ir import coverage_errors
from costmodels.protocol import Choice
from costmodels.registry import get_target
from mapper.enumerate import ChunkPlan
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = ("ascend-910b", "ascend-a5")


def target(preset: str, **overrides: object) -> AscendTarget:
    t = get_target(preset, dict(overrides))
    assert isinstance(t, AscendTarget)
    return t


def one_tile_point(m: int, k: int, n: int) -> dict[str, Choice]:
    return {
        "base_m": m,
        "base_k": k,
        "base_n": n,
        "l1_m": 1,
        "l1_k": 1,
        "l1_n": 1,
        "double_buffer": False,
        "core_grid": "1x1x1",
    }


# (m, k, n, dtype, cycles by hand from 6 + r*ceil(m/16)*ceil(k/k0)*ceil(n/16), k0 = 32 B / sizeof, r = 2 for fp32)
CUBE_TABLE = [
    (16, 16, 16, "f16", 7),
    (17, 16, 16, "f16", 8),  # m padded to 32
    (16, 17, 16, "f16", 8),  # k padded to 32
    (16, 16, 33, "bf16", 9),  # n padded to 48
    (100, 100, 100, "f16", 6 + 7 * 7 * 7),
    (128, 64, 256, "f16", 6 + 8 * 4 * 16),
    (16, 32, 16, "i8", 7),  # int8 fractal 16x32x16
    (16, 64, 16, "i8", 8),
    (16, 8, 16, "f32", 8),  # fp32 fractal 16x8x16, r = 2
    (32, 32, 32, "f32", 6 + 2 * 2 * 4 * 2),
]


@pytest.mark.parametrize(("m", "k", "n", "dtype", "cycles"), CUBE_TABLE)
def test_cube_cycle_formula(m: int, k: int, n: int, dtype: str, cycles: int) -> None:
    # hardware-facts.md §3.1 Cube cycle model (PTO cce_costmodel_cube.hpp), §3.2 steps 1 and 3
    t = target("ascend-910b")
    p = einsum("mk,kn->mn", {"m": m, "n": n, "k": k}, dtype=dtype, weight=1)
    mp = t.mapping(p, one_tile_point(m, k, n))
    assert t.check(p, mp) == []
    assert t.cost(p, mp).breakdown["cube"] == pytest.approx(cycles)


def test_cube_time_scales_with_tmatmul_count() -> None:
    t = target("ascend-910b")
    p = einsum("mk,kn->mn", {"m": 64, "n": 64, "k": 256}, dtype="f16", weight=1)
    one = t.cost(p, t.mapping(p, one_tile_point(64, 256, 64))).breakdown["cube"]
    four = t.cost(p, t.mapping(p, one_tile_point(64, 64, 64))).breakdown["cube"]
    assert four - one == pytest.approx(3 * 6)  # same fractals, three more 6-cycle heads


def rowprod(preset: str, op: str, rows: int = 4096, cols: int = 256, dtype: str = "f32") -> float:
    t = target(preset)
    p = einsum("ij->i", {"i": rows, "j": cols}, dtype=dtype, out_dtype=dtype, reduce_op=op)
    point: dict[str, Choice] = {"row_block": 32, "col_block": cols, "double_buffer": True}
    mp = t.mapping(p, point)
    assert t.check(p, mp) == []
    return t.cost(p, mp).breakdown["vector"]


def test_trowprod_a2a3_is_much_slower_than_a5_and_than_rowsum() -> None:
    # pto-trowprod.txt, Implementation Notes: no vcmul on A2A3; hardware-facts.md §3.2 step 7:
    # "roughly an order of magnitude slower per element than TROWSUM"
    a2_prod = rowprod("ascend-910b", "mul")
    assert a2_prod > 10 * rowprod("ascend-910b", "add")
    assert a2_prod > 10 * rowprod("ascend-a5", "mul")
    assert rowprod("ascend-910b", "max") == pytest.approx(rowprod("ascend-910b", "add"))


def test_trowsum_matches_pto_fitted_formula() -> None:
    # hardware-facts.md §3.1 Vector fitted ops: TROWSUM fp16 @128 cols = 0.0547*R*C + 47 (formula_params.csv)
    hw = target("ascend-910b").hardware
    for rows in (16, 64, 256):
        got = float(row_reduce_cycles(hw, "add", "f16", np.array([rows]), np.array([128]))[0])
        assert got == pytest.approx(0.0547 * rows * 128 + 47, rel=0.03)


def test_trowprod_a2a3_costs_43_cycles_per_32b_block() -> None:
    # hardware-facts.md §3.2 step 7: one vmul per 32 B block under pipe_barrier, about 43 cycles
    hw = target("ascend-910b").hardware
    rows = np.array([10])
    c16 = float(row_reduce_cycles(hw, "mul", "f16", rows, np.array([16]))[0])
    c32 = float(row_reduce_cycles(hw, "mul", "f16", rows, np.array([32]))[0])
    assert c32 - c16 == pytest.approx(10 * 43)


def test_trowprod_a5_register_tree_steps() -> None:
    # hardware-facts.md §3.1 TROWPROD: A5 vmul + vintlv tree, 7 steps b16 / 6 steps b32, one 256 B register per row
    hw = target("ascend-a5").hardware
    one = np.array([1])
    f16 = float(row_reduce_cycles(hw, "mul", "f16", one, np.array([128]))[0]) - hw.vector_fixed_cycles
    f32 = float(row_reduce_cycles(hw, "mul", "f32", one, np.array([64]))[0]) - hw.vector_fixed_cycles
    assert f16 == 2 * 1 + 2 * 7 and f32 == 2 * 1 + 2 * 6


def test_double_buffering_helps() -> None:
    t = target("ascend-910b")
    p = einsum("mk,kn->mn", {"m": 1024, "n": 1024, "k": 2048}, dtype="f16", weight=1)
    point = {**one_tile_point(128, 64, 128), "l1_k": 2, "core_grid": "1x4x6"}
    slow = t.cost(p, t.mapping(p, point))
    fast = t.cost(p, t.mapping(p, {**point, "double_buffer": True}))
    assert fast.cycles < 0.75 * slow.cycles
    assert fast.cycles >= max(fast.breakdown["cube"], fast.breakdown["mte2"], fast.breakdown["mte1"])


def test_l2_residency_speeds_up_rereads() -> None:
    # hardware-facts.md §3.2 step 4/6: MTE2 at 110 B/cycle when L2-resident, 32 from HBM
    p = einsum("mk,kn->mn", {"m": 2048, "n": 2048, "k": 2048}, dtype="f16", weight=1)
    point = {**one_tile_point(128, 64, 128), "core_grid": "1x4x6"}
    hit = target("ascend-910b")
    miss = target("ascend-910b", l2_bytes=0)
    a, b = hit.cost(p, hit.mapping(p, point)), miss.cost(p, miss.mapping(p, point))
    assert b.breakdown["mte2"] == pytest.approx(a.breakdown["mte2"] * 110 / 32)
    assert b.offchip_bytes > a.offchip_bytes == p.min_bytes


def test_more_cores_are_faster() -> None:
    t = target("ascend-910b")
    p = einsum("mk,kn->mn", {"m": 1024, "n": 1024, "k": 1024}, dtype="f16", weight=1)
    base = one_tile_point(128, 64, 128)
    one = t.cost(p, t.mapping(p, base)).cycles
    many = t.cost(p, t.mapping(p, {**base, "core_grid": "1x4x6"})).cycles
    assert many < one / 10


def small_problems() -> list[Problem]:
    return [
        einsum("vmk,vkn->vmn", {"v": 2, "m": 20, "n": 24, "k": 24}, dtype="f16", weight=1),
        einsum("mk,nk->mn", {"m": 40, "n": 8, "k": 40}, dtype="i8", weight=1),
        conv2d(
            batch=1,
            in_channels=3,
            out_channels=8,
            input_height=6,
            input_width=6,
            kernel=3,
            stride=2,
            padding=1,
            dtype="f16",
        ),
        einsum("ij->i", {"i": 40, "j": 12}, dtype="f32", reduce_op="mul"),
        einsum("ijk->ik", {"i": 20, "j": 6, "k": 3}, dtype="f16", reduce_op="add"),
    ]


#: the three cube problems (spaces of 0.5-3.6 M points) each on one preset, the presets in turn (each preset
#: meets cube and conv points); the two row reductions (under 50 points, TROWPROD differs per preset) on both
SMALL_CASES = [(i, PRESETS[i % len(PRESETS)]) for i in range(3)] + [(i, pr) for i in (3, 4) for pr in PRESETS]


@pytest.mark.parametrize(("index", "preset"), SMALL_CASES)
def test_every_point_of_small_spaces_covers_and_agrees(preset: str, index: int) -> None:
    t = target(preset)
    p = small_problems()[index]
    space = t.space(p)
    cols = space.columns()
    score = t.score_batch(p, cols)
    lb = t.lower_bound(p).cycles
    # every point up to 800, else 800 spread over the space (issue #12 made small spaces larger)
    for i in sorted({int(x) for x in np.linspace(0, space.size - 1, min(space.size, 800))}):
        point = {k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in cols.items()}
        mp = t.mapping(p, point)
        assert coverage_errors(p, mp) == []
        ok = t.check(p, mp) == []
        assert ok == bool(score.feasible[i])
        if ok:
            c = t.cost(p, mp)
            assert c.seconds == pytest.approx(score.objectives["latency"][i], rel=1e-9)
            assert c.offchip_bytes == pytest.approx(score.objectives["offchip_bytes"][i], rel=1e-9)
            assert c.footprint_bytes == pytest.approx(score.objectives["footprint"][i], rel=1e-9)
            assert c.cycles >= lb * (1 - 1e-12) and math.isfinite(c.cycles)
        else:
            assert np.isinf(score.objectives["latency"][i])


@pytest.mark.parametrize("preset", PRESETS)
def test_roofline_never_beaten_on_large_spaces(preset: str) -> None:
    t = target(preset)
    probs = [
        einsum("mk,kn->mn", {"m": 1024, "n": 768, "k": 512}, dtype="bf16", weight=1),
        conv2d(
            batch=2, in_channels=64, out_channels=64, input_height=28, input_width=28, kernel=3, padding=1, dtype="f16"
        ),
        einsum("ij->i", {"i": 10000, "j": 500}, dtype="f32", reduce_op="mul"),
    ]
    for p in probs:  # every point, by code in chunks (as the mapper enumerates)
        plan = ChunkPlan(t.space(p), 1 << 20)
        best = np.inf
        for b0, b1 in plan.bounds():
            score = t.score_codes(p, plan.codes(b0, b1))
            best = min(best, float(np.min(np.where(score.feasible, score.objectives["latency"], np.inf))))
        assert np.isfinite(best)
        assert best * t.hardware.clock_hz >= t.lower_bound(p).cycles * (1 - 1e-12)


def test_render_shows_pto_tile_types() -> None:
    t = target("ascend-910b")
    p = einsum("mk,kn->mn", {"m": 256, "n": 256, "k": 128}, dtype="f16", weight=1)
    text = t.render(p, t.mapping(p, {**one_tile_point(128, 64, 256), "core_grid": "1x2x1"}))
    assert "TileLeft<half,128,64>" in text and "TileRight<half,64,256>" in text and "TileAcc<float,128,256>" in text
    q = einsum("ij->i", {"i": 64, "j": 32}, dtype="f32", reduce_op="mul")
    text = t.render(q, t.mapping(q, {"row_block": 16, "col_block": 32, "double_buffer": True}))
    assert "TROWPROD(" in text and "Tile<Vec,float,16,32>" in text and "scalar tail" in text
