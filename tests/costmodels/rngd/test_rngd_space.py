"""The RNGD space: every point's loop nest covers the problem exactly once, and `score_batch`
agrees with `check` / `cost` (the contract of costmodels/protocol.py)."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.ir import coverage_errors
from costmodels.protocol import Choice
from costmodels.registry import get_target
from costmodels.rngd.factors import factors
from costmodels.rngd.target import RngdTarget
from tests.costmodels.rngd.points import BASE
from tests.enumerable import columns_at
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

_T = get_target("rngd")
assert isinstance(_T, RngdTarget)
T: RngdTarget = _T

SMALL = {
    "gemm": einsum("mk,nk->mn", {"m": 3, "k": 5, "n": 2}, weight=1),
    "bmm": einsum("vmk,vnk->vmn", {"v": 2, "m": 3, "k": 3, "n": 3}, weight=1),
    "conv-s2-d2": conv2d(
        batch=1, in_channels=2, out_channels=3, input_height=7, input_width=9, kernel=3, stride=2, dilation=2, padding=1
    ),
    "conv-s2": conv2d(batch=2, in_channels=3, out_channels=2, input_height=6, input_width=9, kernel=4, stride=2),
}


def _point(cols: dict[str, np.ndarray], i: int) -> dict[str, int | str | bool]:
    return {k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in cols.items()}


def _representatives(problem: Problem) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Points that together show every distinct loop set of every axis.

    Coverage of an axis (and whether its padding is zero-filled) depends only on the loops of that
    axis, whose factors and strides the point's per-axis factors fix; so checking one point per
    distinct per-axis factor tuple, for every axis, checks every point of the space.
    """
    cols = T.space(problem).columns()
    f = factors(problem, T.hw, cols)
    reps: set[int] = set()
    for axis in problem.axes:
        key = np.zeros(len(f["rows"]), dtype=np.int64)
        for lvl in ("cl", "sl", "t", "h", "row", "pkt", "z"):
            col = f[f"{lvl}:{axis}"]
            key = key * (int(col.max()) + 1) + col  # small problems: no overflow
        _, idx = np.unique(key, return_index=True)
        reps.update(int(i) for i in idx)
    return cols, np.array(sorted(reps))


@pytest.mark.parametrize("name", list(SMALL))
def test_every_point_covers_the_problem_exactly_once(name: str) -> None:
    problem = SMALL[name]
    cols, idx = _representatives(problem)
    assert len(idx) > 5
    for i in idx:
        m = T.mapping(problem, _point(cols, int(i)))
        assert coverage_errors(problem, m) == [], _point(cols, int(i))


AGREE = {
    **SMALL,
    "bmm-bf16": einsum("vmk,vnk->vmn", {"v": 8, "m": 40, "k": 100, "n": 24}, weight=1),
    "gemm-i8": einsum("mk,kn->mn", {"m": 96, "k": 300, "n": 40}, dtype="i8", weight=1),
    "gemm-i4": einsum("mk,kn->mn", {"m": 64, "k": 256, "n": 16}, dtype="i4", weight=1),
    "conv-s1": conv2d(batch=1, in_channels=16, out_channels=32, input_height=20, input_width=40, kernel=3, padding=1),
    "conv-d2": conv2d(batch=1, in_channels=8, out_channels=16, input_height=19, input_width=31, kernel=3, dilation=2),
}


@pytest.mark.parametrize("name", list(AGREE))
def test_score_batch_agrees_with_check_and_cost(name: str) -> None:
    problem = AGREE[name]
    space = T.space(problem)
    rng = np.random.default_rng(7)
    sub = np.sort(rng.choice(space.size, min(space.size, 30000), replace=False))
    cols = columns_at(space, sub)
    score = T.score_batch(problem, cols)
    lat = score.objectives["latency"]
    feas = np.flatnonzero(score.feasible)
    infeas = np.flatnonzero(~score.feasible)
    assert feas.size and infeas.size
    picks = np.concatenate([rng.choice(feas, 25), rng.choice(infeas, 10), [int(np.argmin(lat))]])
    lb = T.lower_bound(problem).cycles
    for i in picks:
        pt = _point(cols, int(i))
        m = T.mapping(problem, pt)
        violations = T.check(problem, m)
        assert (violations == []) == bool(score.feasible[i]), (pt, violations)
        if violations:
            assert np.isinf(lat[i]) and np.isinf(score.objectives["footprint"][i])
            assert all(v.message for v in violations)
            continue
        c = T.cost(problem, m)
        assert c.seconds == pytest.approx(lat[i], rel=1e-9)
        assert c.offchip_bytes == pytest.approx(score.objectives["offchip_bytes"][i], rel=1e-9)
        assert c.footprint_bytes == pytest.approx(score.objectives["footprint"][i], rel=1e-9)
        assert c.cycles >= lb and 0 < c.utilization <= 1
        assert c.bound in c.breakdown and c.bytes["hbm"] >= problem.min_bytes


def test_cost_report_explains_the_time() -> None:
    p = AGREE["bmm-bf16"]
    best = T.warm_starts(p)[0]
    c = T.cost(p, T.mapping(p, best))
    assert set(c.bytes) == {"hbm", "dm", "trf"}
    assert c.breakdown[c.bound] == max(
        c.breakdown[k] for k in ("compute", "stream", "vector", "fill", "dma", "reduction")
    )
    assert c.gap >= 0 and any("ASSUMPTION" in n for n in c.notes)


def test_k_split_over_slices_adds_the_inter_slice_reduction_tail() -> None:
    """hardware-facts.md §1.2 step 5: about r cycles for an r-slice group, plus draining the partial outputs."""
    p = einsum("mk,nk->mn", {"m": 8, "k": 8192, "n": 8}, weight=1)
    pt: dict[str, Choice] = {**BASE, "inner": "k", "slice_grid": 16, "slice_role": "k"}
    c = T.cost(p, T.mapping(p, pt))
    assert c.breakdown["reduction"] == 16 + c.breakdown["vector"]
    assert T.cost(p, T.mapping(p, {**pt, "slice_role": "m"})).breakdown["reduction"] == 0
