"""The order of the Ascend block loops (issue #12): A-resident or B-resident, whichever moves fewer GM bytes.

The rule and its proof are in the docstring of `costmodels/ascend/cost.py` (Block loop order); the
GM bytes below are worked out by hand from the chunk sizes: an A chunk is ``l1_m*base_m x
l1_k*base_k`` elements, a B chunk ``l1_k*base_k x l1_n*base_n`` (no fractal padding in GM).
"""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.ascend import cost as cc
from costmodels.ascend.target import AscendTarget
from costmodels.ir import coverage_errors
from costmodels.param_tables import gather_fields
from costmodels.protocol import Choice
from costmodels.registry import get_target
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = ("ascend-910b", "ascend-a5")


def _target(preset: str) -> AscendTarget:
    t = get_target(preset)
    assert isinstance(t, AscendTarget)
    return t


def _point(bm: int, bk: int, bn: int, grid: str = "1x1x1") -> dict[str, Choice]:
    return {"base_m": bm, "base_k": bk, "base_n": bn, "l1_m": 1, "l1_k": 1, "l1_n": 1,
            "double_buffer": False, "core_grid": grid}  # fmt: skip


def _block_axes(t: AscendTarget, p: Problem, point: dict[str, Choice]) -> list[str]:
    level = next(lv for lv in t.mapping(p, point).levels if lv.name == "blocks")
    return [loop.axis for loop in level.loops]


@pytest.mark.parametrize("preset", PRESETS)
def test_b_stays_in_l1_across_m_blocks_when_that_moves_fewer_bytes(preset: str) -> None:
    # M = 64 in 2 blocks of 32, N = 2048 in 32 blocks of 64, K = 64 in one chunk; f16 (2 B)
    t = _target(preset)
    p = einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 2048}, dtype="f16", weight=1)
    point = _point(32, 64, 64)
    a_chunk, b_chunk = 32 * 64 * 2, 64 * 64 * 2
    blocks_m, blocks_n = 2, 32
    a_resident = blocks_m * a_chunk + blocks_m * blocks_n * b_chunk  # B reloaded for every block
    b_resident = blocks_m * blocks_n * a_chunk + blocks_n * b_chunk  # A reloaded for every block
    assert b_resident < a_resident
    mapping = t.mapping(p, point)
    assert t.check(p, mapping) == []
    report = t.cost(p, mapping)
    assert report.bytes["gm"] == b_resident
    a, b = (x.name for x in p.inputs)  # the energy split follows the order: A every block, B once per N block
    assert report.operand_bytes["gm"] == {a: blocks_m * blocks_n * a_chunk, b: blocks_n * b_chunk, p.output.name: 0}
    assert any(n.startswith("block loops B-resident") for n in report.notes)
    assert _block_axes(t, p, point) == ["n", "m"]  # N outermost: B stays while M runs
    assert coverage_errors(p, mapping) == []


@pytest.mark.parametrize("preset", PRESETS)
def test_a_stays_in_l1_across_n_blocks_when_that_moves_fewer_bytes(preset: str) -> None:
    # the transpose of the problem above: 32 M blocks, 2 N blocks
    t = _target(preset)
    p = einsum("mk,kn->mn", {"m": 2048, "k": 64, "n": 64}, dtype="f16", weight=1)
    point = _point(64, 64, 32)
    a_chunk, b_chunk = 64 * 64 * 2, 64 * 32 * 2
    a_resident = 32 * a_chunk + 32 * 2 * b_chunk
    b_resident = 32 * 2 * a_chunk + 2 * b_chunk
    assert a_resident < b_resident
    report = t.cost(p, t.mapping(p, point))
    assert report.bytes["gm"] == a_resident
    a, b = (x.name for x in p.inputs)
    assert report.operand_bytes["gm"] == {a: 32 * a_chunk, b: 32 * 2 * b_chunk, p.output.name: 0}
    assert not any(n.startswith("block loops B-resident") for n in report.notes)
    assert _block_axes(t, p, point) == ["m", "n"]


@pytest.mark.parametrize("preset", PRESETS)
def test_several_k_chunks_reload_both_operands_in_either_order(preset: str) -> None:
    # K = 256 in 4 chunks of 64: every block reloads both chunks, so the order changes nothing (ties: A first)
    t = _target(preset)
    p = einsum("mk,kn->mn", {"m": 64, "k": 256, "n": 2048}, dtype="f16", weight=1)
    point = _point(32, 64, 64)
    steps = 2 * 32 * 4
    assert t.cost(p, t.mapping(p, point)).bytes["gm"] == steps * (32 * 64 * 2 + 64 * 64 * 2)
    assert _block_axes(t, p, point) == ["m", "n"]


def test_batch_blocks_reload_b_when_b_has_batch_axes() -> None:
    # a batched matmul: B changes with the batch, so B-resident reloads it per (batch block, N block)
    t = _target("ascend-910b")
    p = einsum("bmk,bkn->bmn", {"b": 2, "m": 64, "k": 64, "n": 2048}, dtype="f16", weight=1)
    point = _point(32, 64, 64)
    a_chunk, b_chunk = 32 * 64 * 2, 64 * 64 * 2
    blocks_m, blocks_n = 2 * 2, 32  # the batch blocks ride along with M
    b_resident = blocks_m * blocks_n * a_chunk + 2 * blocks_n * b_chunk
    a_resident = blocks_m * a_chunk + blocks_m * blocks_n * b_chunk
    assert t.cost(p, t.mapping(p, point)).bytes["gm"] == min(a_resident, b_resident) == b_resident


def _a_resident_only(f: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The fields with B's resident loads made infinite: the model as it was with one loop order."""
    return {**f, "bnb": np.full(np.shape(f["bnb"]), np.inf)}


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize(
    "sizes", [{"m": 64, "k": 64, "n": 2048}, {"m": 200, "k": 48, "n": 520}, {"m": 33, "k": 100, "n": 700}]
)
def test_the_better_order_is_never_worse_than_a_resident_alone(preset: str, sizes: dict[str, int]) -> None:
    """Over 400,000 points spread over the space (every legal core grid makes it millions): latency and off-chip
    bytes no higher, footprint and feasibility unchanged."""
    t = _target(preset)
    p = einsum("mk,kn->mn", sizes, dtype="f16", weight=1)
    prep = t.prepared(p)
    shape = prep.shape
    idx = np.arange(0, prep.size, max(1, prep.size // 400_000))
    codes = list(np.unravel_index(idx, shape))
    f = gather_fields(prep.tables, codes, shape)
    both = cc.cube_scores(prep.consts, f)
    one = cc.cube_scores(prep.consts, _a_resident_only(f))
    assert np.array_equal(both["ok"], one["ok"])
    ok = both["ok"]
    assert np.all(both["latency"][ok] <= one["latency"][ok])
    assert np.all(both["offchip_bytes"][ok] <= one["offchip_bytes"][ok])
    assert np.array_equal(both["footprint"], one["footprint"])
    if sizes["n"] == 2048:  # many N blocks over few M blocks: B-resident wins somewhere, and the optimum improves
        assert np.any(both["latency"][ok] < one["latency"][ok])
    assert both["latency"].min() <= one["latency"].min()
    # the whole-space table (the tabulated path of score_codes) prices the same numbers
    table = t.score_codes(p, {n: c for n, c in zip(prep.names, codes, strict=True)})
    assert np.array_equal(table.objectives["latency"], both["latency"])
