"""The fast RNGD batch scorer (term tables gathered per point) gives exactly what check/cost give.

`score_batch` tabulates the stage terms over the space's choices and gathers them; `check` and
`cost` evaluate one point with the generic formulas (`rngd_cost.evaluate`). Both end in the same
`combine`, so on every point of a space (whole, or a random subset of a large one) the
feasibility and objectives must be equal to the bit, including convolutions with stride and
dilation (shift-reuse windows), a weight on the first input and several axes per role.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from costmodels.protocol import Param, SearchSpace
from costmodels.registry import get_target
from costmodels.rngd import RngdTarget
from costmodels.rngd_batch import build_tables
from costmodels.rngd_cost import evaluate
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

MAX_POINTS = 120_000
_T = get_target("rngd")
assert isinstance(_T, RngdTarget)
T: RngdTarget = _T

PROBLEMS = {
    "gemm": einsum("mk,nk->mn", {"m": 3, "k": 5, "n": 2}, weight=1),
    "gemm-w0": einsum("mk,kn->mn", {"m": 50, "k": 70, "n": 30}, weight=0),
    "bmm-i8": einsum("vmk,vnk->vmn", {"v": 4, "m": 40, "k": 300, "n": 24}, dtype="i8", weight=1),
    "multi-axis": einsum("abk,nck->abnc", {"a": 3, "b": 5, "k": 7, "n": 6, "c": 2}, weight=1),
    "conv-s1": conv2d(batch=1, in_channels=8, out_channels=16, input_height=10, input_width=20, kernel=3, padding=1),
    "conv-s2": conv2d(batch=2, in_channels=3, out_channels=2, input_height=6, input_width=9, kernel=4, stride=2),
    "conv-s2-d2": conv2d(
        batch=1, in_channels=2, out_channels=3, input_height=7, input_width=9, kernel=3, stride=2, dilation=2, padding=1
    ),
    "conv-s3-d3-g2": conv2d(
        batch=2,
        in_channels=8,
        out_channels=16,
        input_height=19,
        input_width=31,
        kernel=5,
        stride=3,
        dilation=3,
        groups=2,
    ),
    "conv-1x1-s2": conv2d(batch=2, in_channels=8, out_channels=16, input_height=9, input_width=11, kernel=1, stride=2),
}


def _generic(problem: Problem, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    res = evaluate(problem, T.hw, cols)
    ok = res["feasible"]
    return {
        "feasible": ok,
        "latency": np.where(ok, res["cycles"] / T.hw.clock_hz, np.inf),
        "offchip_bytes": np.where(ok, res["offchip"], np.inf),
        "footprint": np.where(ok, res["footprint"], np.inf),
    }


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_batch_scorer_equals_the_point_formulas_on_the_space(name: str) -> None:
    problem = PROBLEMS[name]
    space = T.space(problem)
    assert build_tables(problem, T.hw, space) is not None  # the fast path is the one under test
    cols = space.columns()
    if space.size > MAX_POINTS:  # keep the test fast: a random subset, in random order
        keep = np.random.default_rng(1).choice(space.size, MAX_POINTS, replace=False)
        cols = {k: v[keep] for k, v in cols.items()}
    score = T.score_batch(problem, cols)
    ref = _generic(problem, cols)
    assert score.feasible.any() and not score.feasible.all()
    np.testing.assert_array_equal(score.feasible, ref["feasible"])
    for key in ("latency", "offchip_bytes", "footprint"):
        np.testing.assert_array_equal(score.objectives[key], ref[key], err_msg=key)
    # and check()/cost() of single points agree with the batch (feasible and infeasible, best point)
    lat = score.objectives["latency"]
    rng = np.random.default_rng(3)
    picks = [*rng.choice(np.flatnonzero(score.feasible), 6), *rng.choice(np.flatnonzero(~score.feasible), 3)]
    for i in [*picks, int(np.argmin(lat))]:
        point = {k: v[i].item() for k, v in cols.items()}
        mapping = T.mapping(problem, point)
        assert (T.check(problem, mapping) == []) == bool(score.feasible[i]), point
        if score.feasible[i]:
            assert T.cost(problem, mapping).seconds == lat[i]


def test_columns_of_other_types_and_order_score_the_same() -> None:
    problem = PROBLEMS["conv-s2-d2"]
    cols = T.space(problem).columns()
    perm = np.random.default_rng(0).permutation(len(cols["rows"]))[:5000]
    sub = {k: v[perm] for k, v in cols.items()}
    base = T.score_batch(problem, sub)
    as_objects = {k: v.astype(object) for k, v in sub.items()}  # generic path
    wide = {
        k: (v.astype("<U2") if v.dtype.kind == "U" else v.astype(np.int32) if v.dtype.kind == "i" else v)
        for k, v in sub.items()
    }
    for other in (as_objects, wide):
        s = T.score_batch(problem, other)
        np.testing.assert_array_equal(s.feasible, base.feasible)
        np.testing.assert_array_equal(s.objectives["latency"], base.objectives["latency"])


def test_points_outside_the_space_fall_back_to_the_point_formulas() -> None:
    """rows=3 is no choice: the lookup cannot code it, and the generic formulas flag the rows constraint."""
    problem = PROBLEMS["gemm-w0"]
    cols = {k: v[:64].copy() for k, v in T.space(problem).columns().items()}
    cols["rows"][5] = 3
    cols["slices"][7] = 4096  # more slices than a cluster has
    score = T.score_batch(problem, cols)
    np.testing.assert_array_equal(score.feasible, _generic(problem, cols)["feasible"])
    for i, code in ((5, "rows"), (7, "shards")):
        point = {k: v[i].item() for k, v in cols.items()}
        assert not score.feasible[i]
        assert code in {v.code for v in T.check(problem, T.mapping(problem, point))}


def test_tables_are_reused_for_the_same_problem() -> None:
    problem = PROBLEMS["bmm-i8"]
    first = T._tables(problem)
    assert first is not None and T._tables(problem) is first


def test_columns_enumerate_the_product_in_order() -> None:
    """`SearchSpace.columns()`: every point once, last parameter fastest, types kept (mixed -> object)."""
    space = SearchSpace(
        params=(
            Param(name="a", choices=(1, 2, 3)),
            Param(name="b", choices=("x", "yy")),
            Param(name="c", choices=(True, False)),
            Param(name="d", choices=(4, "m", True)),
        )
    )
    cols = space.columns()
    expected = list(itertools.product(*(p.choices for p in space.params)))
    got = list(zip(*(cols[p.name].tolist() for p in space.params), strict=True))
    assert got == expected
    assert [cols[k].dtype.kind for k in "abcd"] == ["i", "U", "b", "O"]
