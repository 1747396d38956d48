"""Pareto fronts of several objectives (issue #12): exact, one entry per distinct value, merged from sub-spaces."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodels.registry import get_target
from mapper.pareto import pareto_front, pareto_mask
from mapper.search import tune
from mapper.settings import SearchSettings
from tests.mapper.fake_target import FakeMatmulTarget, matmul
from workload.conv2d import conv2d

P = matmul(1024, 512, 2048)


def distinct_front(values: np.ndarray) -> set[tuple[float, ...]]:
    """By definition: the distinct finite rows no row dominates (every pair of rows compared at once:
    `dominates[w, v]` is row w <= row v everywhere and < somewhere)."""
    le = np.all(values[:, None, :] <= values[None, :, :], axis=2)
    lt = np.any(values[:, None, :] < values[None, :, :], axis=2)
    kept = np.all(np.isfinite(values), axis=1) & ~np.any(le & lt, axis=0)
    return {tuple(v.tolist()) for v in values[kept]}


@pytest.mark.parametrize("k", [2, 3])
def test_pareto_front_is_exact_without_duplicates_and_keeps_the_first_representative(k: int) -> None:
    rng = np.random.default_rng(k)
    v = rng.integers(0, 5, size=(300, k)).astype(float)
    v[rng.integers(0, 300, 10), 0] = np.inf  # infeasible rows are never on the front
    idx = pareto_front(v)
    got = [tuple(v[i].tolist()) for i in idx]
    assert len(got) == len(set(got)) and set(got) == distinct_front(v)
    for i in idx:  # the representative of a value is its first row
        assert i == min(j for j in range(len(v)) if np.array_equal(v[j], v[i]))
    order = rng.permutation(len(v))  # with an order, the first in that order represents the value
    for i in pareto_front(v, order):
        rank = {int(r): n for n, r in enumerate(order)}
        assert rank[int(i)] == min(rank[j] for j in range(len(v)) if np.array_equal(v[j], v[i]))
    assert pareto_mask(v).sum() >= len(idx)  # the mask keeps duplicates


@settings(max_examples=60, deadline=None)
@given(k=st.sampled_from([3, 4]), n=st.integers(1, 700), levels=st.integers(2, 40), seed=st.integers(0, 2**32 - 1))
def test_fronts_of_three_objectives_and_more_are_exact_across_blocks(k: int, n: int, levels: int, seed: int) -> None:
    """`_front_sorted` compares `FRONT_BLOCK` rows at a time: fronts longer than a block, dominators in an earlier
    block or in the same one, and ties are all the definition's."""
    rng = np.random.default_rng(seed)
    v = rng.integers(0, levels, size=(n, k)).astype(float)
    v[:, -1] = levels - v[:, 0]  # many rows on the front: the first and the last objective trade off
    got = [tuple(v[i].tolist()) for i in pareto_front(v)]
    assert len(got) == len(set(got)) and set(got) == distinct_front(v)


def test_two_objective_front_skips_nan_and_infinite_rows_and_is_empty_without_a_finite_one() -> None:
    rng = np.random.default_rng(7)
    v = rng.integers(0, 6, size=(500, 2)).astype(float)
    v[rng.integers(0, 500, 20), 1] = np.nan
    v[rng.integers(0, 500, 20), 0] = -np.inf  # not finite: never on the front, even though it is "smallest"
    v[rng.integers(0, 500, 20), 1] = np.inf
    idx = pareto_front(v)
    finite = v[np.isfinite(v).all(axis=1)]  # rows with a non-finite entry are out of the comparison altogether
    assert {tuple(v[i].tolist()) for i in idx} == distinct_front(finite) and all(np.isfinite(v[idx]).ravel())
    assert pareto_front(np.full((4, 2), np.inf)).size == 0
    assert list(pareto_front(np.array([[1.0, 2.0], [1.0, 2.0], [2.0, 1.0]]))) == [0, 2]


def test_enumerated_front_on_wormhole_has_one_entry_per_distinct_value() -> None:
    """The issue's case: 288 entries with one distinct value on wormhole; now one entry per value."""
    target = get_target("wormhole-n150")
    conv = conv2d(batch=1, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1)
    objs = ("latency", "offchip_bytes")
    r = tune(conv, target, SearchSettings(objectives=objs), validate=False)
    space = target.space(conv)
    score = target.score_batch(conv, space.columns())
    feas = np.asarray(score.feasible, dtype=bool)
    allv = np.stack([np.where(feas, np.asarray(score.objectives[o]), np.inf) for o in objs], axis=1)
    got = [tuple(p.values[o] for o in objs) for p in r.pareto]
    assert r.strategy == "exhaustive" and r.proven_optimal and len(got) == len(set(got))
    assert set(got) == {tuple(x) for x in allv[pareto_front(allv)].tolist()}
    first = np.flatnonzero(np.all(allv == np.array(got[0]), axis=1))[0]  # the earliest point represents a value
    assert r.pareto[0].point == {k: v[first].item() for k, v in space.columns().items()}


def test_a_study_merges_its_sub_space_fronts_into_the_exact_front() -> None:
    t = FakeMatmulTarget()
    objs = ("latency", "footprint")
    exact = tune(P, t, SearchSettings(strategy="exhaustive", objectives=objs), validate=False)
    s = SearchSettings(strategy="random", objectives=objs, inner_points=64, max_trials=500, patience=0, seed=2)
    r = tune(P, t, s, validate=False)
    assert r.stop_reason == "space-exhausted" and r.proven_optimal
    assert r.counts.points_scored > r.counts.trials  # each trial scored a whole sub-space, not a point
    assert [(p.point, p.values) for p in r.pareto] == [(p.point, p.values) for p in exact.pareto]


def test_a_partial_study_front_is_the_front_of_what_it_scored() -> None:
    t = FakeMatmulTarget()
    objs = ("latency", "offchip_bytes", "footprint")
    s = SearchSettings(strategy="nsga2", objectives=objs, inner_points=16, max_trials=6, patience=0, seed=0)
    r = tune(P, t, s, validate=False)
    vals = np.array([[p.values[o] for o in objs] for p in r.pareto])
    assert not r.proven_optimal and len(r.pareto) >= 2 and pareto_mask(vals).all()
    assert len({tuple(v) for v in vals.tolist()}) == len(vals)
    for p in r.pareto:  # priced right
        cost = t.cost(P, t.mapping(P, p.point))
        assert [cost.objective(o) for o in objs] == pytest.approx([p.values[o] for o in objs], rel=1e-12)


def test_same_seed_same_front() -> None:
    s = SearchSettings(strategy="tpe", objectives=("latency", "footprint"), inner_points=16, max_trials=12, seed=4)
    a, b = (tune(P, FakeMatmulTarget(), s, validate=False) for _ in range(2))
    assert a.pareto == b.pareto and list(itertools.islice(a.trace, 12)) == list(itertools.islice(b.trace, 12))
