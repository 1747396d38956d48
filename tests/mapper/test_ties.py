"""Ties between Tenstorrent strategies are reported and broken by less data moved, then fewer cores (issue #13)."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.registry import get_target
from mapper.enumerate import ChunkPlan, GroupBest
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.ties import TIE_PARAMS, TIE_TOLERANCE, strategy_ties
from workload.conv2d import conv2d

# ResNet-50 layer1.0.conv1 at batch 16: DRAM-bound, so many grids reach the same DRAM floor
CONV = conv2d(batch=16, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=1)
T = get_target("wormhole-n150")


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    return tune(CONV, T, SearchSettings(), validate=False)


def _fastest() -> float:
    """The whole space's fastest latency, enumerated here independently of the mapper."""
    space = T.space(CONV)
    plan = ChunkPlan(space, 1 << 16)
    best = np.inf
    for b0, b1 in plan.bounds():
        s = T.score_codes(CONV, plan.codes(b0, b1))
        best = min(best, float(np.where(s.feasible, s.objectives["latency"], np.inf).min()))
    return best


def test_tie_lists_each_strategy_within_half_a_percent(result) -> None:  # type: ignore[no-untyped-def]
    fastest = _fastest()
    assert len(result.ties) > 1
    assert min(t.latency for t in result.ties) == pytest.approx(fastest, rel=1e-12)
    assert all(t.latency <= fastest * (1 + TIE_TOLERANCE) for t in result.ties)
    strategies = [(t.layout, t.memory) for t in result.ties]
    assert len(set(strategies)) == len(strategies)  # the best of each distinct strategy, once
    for t in result.ties[:5]:  # each entry is priced by the cost model itself
        c = T.cost(CONV, T.mapping(CONV, t.point))
        assert c.cycles / c.clock_hz == pytest.approx(t.latency, rel=1e-12)


def test_tie_broken_by_less_data_moved_then_fewer_cores(result) -> None:  # type: ignore[no-untyped-def]
    keys = [(t.data_moved, t.cores) for t in result.ties]
    assert keys == sorted(keys)
    win = result.ties[0]
    assert win.chosen and not any(t.chosen for t in result.ties[1:])
    assert result.point == win.point
    assert result.values["latency"] == pytest.approx(win.latency, rel=1e-12)
    assert any("less data moved, then fewer cores" in n for n in result.notes)
    # not the enumeration order: a tied strategy earlier in the space's layout list lost
    layouts = [str(c) for c in T.space(CONV).params[0].choices]
    assert min(layouts.index(t.layout) for t in result.ties) < layouts.index(win.layout)


@pytest.mark.parametrize("kernel", [1, 3])
def test_the_tie_is_exactly_the_strategies_within_tolerance(kernel: int) -> None:
    conv = conv2d(
        batch=16, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=kernel, padding=kernel // 2
    )
    space = T.space(conv)
    lay, mem = space.params[0].choices, next(p for p in space.params if p.name == "memory").choices
    best = np.full((len(lay), len(mem)), np.inf)
    plan = ChunkPlan(space, 1 << 16)
    for b0, b1 in plan.bounds():
        codes = plan.codes(b0, b1)
        s = T.score_codes(conv, codes)
        lat = np.where(s.feasible, s.objectives["latency"], np.inf)
        np.minimum.at(best, (np.asarray(codes["layout"]), np.asarray(codes["memory"])), lat)
    cut = best.min() * (1 + TIE_TOLERANCE)
    expected = {(str(lay[i]), str(mem[j])) for i, j in zip(*np.nonzero(best <= cut), strict=True)}
    r = tune(conv, T, SearchSettings(), validate=False)
    assert {(t.layout, t.memory) for t in r.ties} == expected
    assert r.point == r.ties[0].point


def test_the_ties_come_from_the_enumeration_itself_the_space_scored_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto scores every point once (its probe's few points twice) and lists the same ties as a separate pass."""
    scored = [0]
    original = T.score_codes

    def counting(problem, codes):  # type: ignore[no-untyped-def]
        scored[0] += len(next(iter(codes.values())))
        return original(problem, codes)

    monkeypatch.setattr(T, "score_codes", counting)
    r = tune(CONV, T, SearchSettings(), validate=False)
    size, probe = T.space(CONV).size, SearchSettings().probe_points
    assert r.stop_reason == "enumerated" and len(r.ties) > 1
    assert size <= scored[0] <= size + probe + 2  # + the probe's chunk again for the table, + its one-point calls
    monkeypatch.setattr(T, "score_codes", original)
    again = strategy_ties(CONV, T, T.space(CONV))  # the old way: a second enumeration of its own
    assert [t.model_dump() for t in r.ties] == [t.model_dump() for t in again]


@pytest.mark.parametrize("chunk", [1 << 10, 1 << 13])
def test_each_strategy_is_represented_by_its_earliest_fastest_point_whatever_the_chunks(chunk: int) -> None:
    space = T.space(CONV)
    whole = GroupBest(space, TIE_PARAMS)
    plan = ChunkPlan(space, space.size)  # one chunk: the reference
    codes = plan.codes(0, plan.blocks)
    score = T.score_codes(CONV, codes)
    whole.absorb(space, codes, score)
    lat = np.where(score.feasible, score.objectives["latency"], np.inf)
    for (lay, mem), (value, point) in whole.table(space).items():
        rows = np.flatnonzero(
            (np.asarray(codes["layout"]) == space.params[0].choices.index(lay))
            & (np.asarray(codes["memory"]) == next(p for p in space.params if p.name == "memory").choices.index(mem))
        )
        first = rows[np.argmin(lat[rows])]  # argmin keeps the first of equal minima
        assert value == lat[first] and point == {p.name: p.choices[int(codes[p.name][first])] for p in space.params}
    cut = GroupBest(space, TIE_PARAMS)
    small = ChunkPlan(space, chunk)
    for b0, b1 in small.bounds():
        c = small.codes(b0, b1)
        cut.absorb(space, c, T.score_codes(CONV, c))
    assert cut.table(space) == whole.table(space)


@pytest.mark.parametrize("names", [("stationary",), ("stationary", "tk"), ("tn",)])
def test_group_best_is_each_groups_earliest_minimum_whether_or_not_groups_come_in_runs(names: tuple[str, ...]) -> None:
    """Leading parameters come in runs within a chunk (the reduceat path); trailing ones do not (minimum.at)."""
    from tests.mapper.fake_target import FakeMatmulTarget, matmul

    t, p = FakeMatmulTarget(), matmul(1024, 512, 2048)
    space = t.space(p)
    groups = GroupBest(space, names)
    plan = ChunkPlan(space, 64)
    for b0, b1 in plan.bounds():
        codes = plan.codes(b0, b1)
        groups.absorb(space, codes, t.score_codes(p, codes))
    cols = space.columns()
    score = t.score_batch(p, cols)
    lat = np.where(score.feasible, score.objectives["latency"], np.inf)
    expected = {}
    for i in np.argsort(lat, kind="stable"):  # by latency, then point number: the first seen per group wins
        key = tuple(cols[n][i].item() for n in names)
        if np.isfinite(lat[i]) and key not in expected:
            expected[key] = (float(lat[i]), {k: v[i].item() for k, v in cols.items()})
    assert groups.table(space) == expected and len(expected) > 1
