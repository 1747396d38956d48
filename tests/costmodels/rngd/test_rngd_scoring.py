"""The fast RNGD scorer (term tables gathered per point by choice codes) gives exactly what check/cost give.

`score_codes` tabulates the stage terms over the space's choices and gathers them by the points'
codes; `score_batch` codes value columns and does the same; `check` and `cost` evaluate one point
with the generic formulas (`rngd_cost.evaluate`). All end in the same `combine`, so on every point
of a space (whole, or a random subset of a large one) the feasibility and objectives must be equal
to the bit, including convolutions with stride and dilation (shift-reuse windows), a weight on the
first input and several axes per role, in any order and chunk of points.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from costmodels.choice_codes import SpaceCoder
from costmodels.family import OBJECTIVES
from costmodels.protocol import BatchScore, Param, SearchSpace
from costmodels.registry import get_target
from costmodels.rngd.cost import evaluate
from costmodels.rngd.scoring import build_tables
from costmodels.rngd.space import roles_of
from costmodels.rngd.target import RngdTarget
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


def _rows(space: SearchSpace, rows: np.ndarray) -> dict[str, np.ndarray]:
    """``{k: v[rows] for k, v in space.columns().items()}`` (same values, same dtypes), without the whole columns."""
    digits = np.unravel_index(rows, tuple(len(p.choices) for p in space.params))
    return {
        p.name: np.asarray(p.choices, dtype=object if len({type(c) for c in p.choices}) > 1 else None)[d]
        for p, d in zip(space.params, digits, strict=True)
    }


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_batch_scorer_equals_the_point_formulas_on_the_space(name: str) -> None:
    problem = PROBLEMS[name]
    space = T.space(problem)
    assert build_tables(problem, T.hw, space) is not None  # the fast path is the one under test
    if space.size > MAX_POINTS:  # keep the test fast: a random subset, in random order
        keep = np.random.default_rng(1).choice(space.size, MAX_POINTS, replace=False)
        cols = _rows(space, keep)
    else:
        cols = space.columns()
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


def _codes_of(problem: Problem, n: int, seed: int) -> dict[str, np.ndarray]:
    """Code columns of `n` distinct random points of the space, in random order."""
    space = T.space(problem)
    flat = np.random.default_rng(seed).choice(space.size, min(n, space.size), replace=False)
    digits = np.unravel_index(flat, tuple(len(p.choices) for p in space.params))
    return {p.name: d.astype(np.intp) for p, d in zip(space.params, digits, strict=True)}


def _assert_same(a: BatchScore, b: BatchScore | dict[str, np.ndarray]) -> None:
    ref = b if isinstance(b, dict) else {"feasible": b.feasible, **b.objectives}
    assert np.array_equal(a.feasible, ref["feasible"])
    for key in OBJECTIVES:
        assert np.array_equal(a.objectives[key], ref[key]), key


def _part(score: BatchScore, sel: slice | np.ndarray) -> dict[str, np.ndarray]:
    return {"feasible": score.feasible[sel], **{k: v[sel] for k, v in score.objectives.items()}}


@pytest.mark.parametrize("name", ["gemm-w0", "multi-axis", "conv-s2-d2"])
def test_score_codes_equals_score_batch_in_any_order_and_chunk(name: str) -> None:
    problem = PROBLEMS[name]
    coder = SpaceCoder(T.space(problem))
    codes = _codes_of(problem, 20_000, seed=4)
    whole = T.score_codes(problem, codes)
    assert whole.feasible.any() and not whole.feasible.all()
    _assert_same(whole, T.score_batch(problem, coder.decode(codes)))
    _assert_same(whole, _generic(problem, coder.decode(codes)))
    for lo, hi in ((5, 6), (0, 0), (100, 40_000)):  # one point, none, a tail shorter than a pass
        part = T.score_codes(problem, {k: v[lo:hi] for k, v in codes.items()})
        _assert_same(part, _part(whole, slice(lo, hi)))
    empty = T.score_batch(problem, {k: v[:0] for k, v in coder.decode(codes).items()})
    assert empty.feasible.shape == (0,) and empty.objectives["latency"].shape == (0,)


def test_without_tables_score_codes_decodes_for_the_point_formulas() -> None:
    """Loop products past 2**53 could round in the tables: build_tables declines, and both paths are generic."""
    problem = einsum("mk,nk->mn", {"m": 1 << 24, "k": 1 << 20, "n": 8}, weight=1)
    assert build_tables(problem, T.hw, T.space(problem)) is None
    codes = _codes_of(problem, 3000, seed=5)
    values = SpaceCoder(T.space(problem)).decode(codes)
    score = T.score_codes(problem, codes)
    assert score.feasible.any() and not score.feasible.all()
    _assert_same(score, _generic(problem, values))
    _assert_same(score, T.score_batch(problem, values))
    assert T.score_codes(problem, {k: v[:0] for k, v in codes.items()}).feasible.shape == (0,)


def test_unsupported_problem_scores_infeasible_by_codes_and_values() -> None:
    problem = einsum("mk,nk->mn", {"m": 8, "k": 8, "n": 8}, dtype="f32", weight=1)
    by_codes = T.score_codes(problem, {"packet_k": np.zeros(3, dtype=np.intp)})
    by_values = T.score_batch(problem, {"packet_k": np.asarray([32, 16, 8])})
    for s in (by_codes, by_values):
        assert s.feasible.shape == (3,) and not s.feasible.any() and np.isinf(s.objectives["latency"]).all()
    with pytest.raises(ValueError, match="bf16"):
        T.space(problem)


def test_columns_of_other_types_and_order_score_the_same() -> None:
    """Object, other int widths, wider and narrower strings: the values are coded, and score as the codes do."""
    problem = PROBLEMS["conv-s2-d2"]
    codes = _codes_of(problem, 5000, seed=0)
    sub = SpaceCoder(T.space(problem)).decode(codes)
    base = T.score_codes(problem, codes)
    as_objects = {k: v.astype(object) for k, v in sub.items()}
    wide = {
        k: (v.astype("<U5") if v.dtype.kind == "U" else v.astype(np.int32) if v.dtype.kind == "i" else v)
        for k, v in sub.items()
    }
    # the narrowest unsigned type of each int column (uint8, or uint32 for slice grid codes such as 60,031)
    small_ints = {k: (v.astype(np.min_scalar_type(v.max())) if v.dtype.kind == "i" else v) for k, v in sub.items()}
    for other in (as_objects, wide, small_ints):
        _assert_same(T.score_batch(problem, other), base)
    one_letter = np.char.str_len(sub["packet_free"]) == 1  # the roles as the narrowest columns they fit
    narrow = {k: v[one_letter] for k, v in sub.items()}
    narrow["packet_free"] = narrow["packet_free"].astype("<U1")
    narrow["slice_role"] = narrow["slice_role"].astype("<U2")
    assert narrow["packet_free"].dtype.itemsize == 4 and one_letter.sum() > 100
    _assert_same(T.score_batch(problem, narrow), T.score_codes(problem, {k: v[one_letter] for k, v in codes.items()}))


def test_points_outside_the_space_fall_back_to_the_point_formulas() -> None:
    """rows=3, 4096 slices, slice_role 'x' are no choices: the point formulas score them (and flag rows, shards)."""
    problem = PROBLEMS["gemm-w0"]
    cols = {k: v[:64].copy() for k, v in T.space(problem).columns().items()}
    cols["rows"][5] = 3
    cols["slice_grid"][7] = 4096  # more slices than a cluster has
    cols["slice_role"] = cols["slice_role"].astype(object)
    cols["slice_role"][9] = "x"
    score = T.score_batch(problem, cols)
    _assert_same(score, _generic(problem, cols))
    for i, code in ((5, "rows"), (7, "shards")):
        point = {k: v[i].item() if isinstance(v[i], np.generic) else v[i] for k, v in cols.items()}
        assert not score.feasible[i]
        assert code in {v.code for v in T.check(problem, T.mapping(problem, point))}
    inside = np.ones(64, dtype=bool)
    inside[[5, 7, 9]] = False
    coder = SpaceCoder(T.space(problem))
    codes, known = coder.encode({k: v[inside] for k, v in cols.items()})
    assert known.all()
    _assert_same(T.score_codes(problem, codes), _part(score, inside))


def test_preparation_is_reused_for_the_same_and_an_equal_problem() -> None:
    target = get_target("rngd")
    assert isinstance(target, RngdTarget)
    problem = PROBLEMS["bmm-i8"]
    first = target.prepared(problem)
    assert first.tables is not None and target.space(problem) is first.space
    assert target.prepared(problem) is first
    assert target.prepared(problem.model_copy(deep=True)) is first
    assert roles_of(problem) is roles_of(problem.model_copy(deep=True))


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
