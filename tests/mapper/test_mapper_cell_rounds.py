"""Best-first over cells in rounds (`mapper.strategies.cell_rounds`): the exact front, honest counts when stopped.

The rounds price the open cells of every structure of an Ascend space together and leave out the cells
the front dominates; the front must be the exhaustive enumeration's, and a search the budget or a cancel
ends must claim only the structures it finished.
"""

from __future__ import annotations

import gc
import itertools
import re
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from costmodels.dominance import dominated_rows
from costmodels.registry import get_target
from mapper.bounds import FrontBounds
from mapper.pareto import pareto_front
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import cell_columns, cell_rounds
from mapper.strategies.bestfirst import BestFirst
from mapper.strategies.cell_columns import lifted
from mapper.strategies.cell_rounds import CellRounds
from mapper.strategies.encoding import Encoding, split_params
from mapper.strategies.objective import Evaluator
from mapper.strategies.round_fronts import fronts_by_owner, grown, strictly_dominated
from mapper.watch import Watch
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

CONV = conv2d(batch=1, in_channels=8, out_channels=12, input_height=5, input_width=5, kernel=3, padding=1)
GEMM = einsum("mk,kn->mn", {"m": 97, "k": 89, "n": 83}, dtype="bf16", weight=1)


def _brute_strict(values: np.ndarray, front: np.ndarray) -> np.ndarray:
    out = []
    for v in values:
        if not np.isfinite(v).all():
            out.append(True)
            continue
        out.append(any(bool(np.all(f <= v) and np.any(f < v)) for f in front))
    return np.asarray(out, dtype=bool)


@settings(max_examples=200, deadline=None)
@given(
    k=st.sampled_from([2, 3]),
    n=st.integers(1, 30),
    m=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_strict_dominance_is_the_brute_force_answer(k: int, n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 5, size=(n, k)).astype(np.float64)  # few values: many ties and equal rows
    values[rng.random(n) < 0.1, rng.integers(0, k)] = np.inf
    front = rng.integers(0, 5, size=(m, k)).astype(np.float64)
    assert np.array_equal(strictly_dominated(values, front), _brute_strict(values, front))


@settings(max_examples=100, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 40), st.just(2)), elements=st.sampled_from([1.0, 2.0, 3.0, np.inf])))
def test_a_round_keeps_what_may_join_the_front_and_a_point_per_structure(values: np.ndarray) -> None:
    owner = np.arange(len(values)) % 3
    front, keep = grown(None, values, owner, 0)
    finite = np.isfinite(values).all(axis=1)
    if front is not None:
        assert keep[~_brute_strict(values, front)].all()  # nothing that may join the front is dropped
        assert not _brute_strict(front, values[finite]).any()  # the grown front is the front of the round
    for s in np.unique(owner):
        mine = np.flatnonzero(owner == s)
        assert keep[mine[0]]  # the structure's first point (its violations, should none be feasible)
        fin = mine[np.isfinite(values[mine, 0])]
        assert not fin.size or keep[fin[0]]  # and its first feasible one


@settings(max_examples=200, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 60), st.just(2)), elements=st.sampled_from([1.0, 2.0, 3.0, np.inf])),
    st.integers(1, 6),
)
def test_each_structures_front_is_its_own_pareto_front(values: np.ndarray, owners: int) -> None:
    """`fronts_by_owner` (one sort for every structure) gives each structure's `pareto_front`, in its order: ascending
    first objective, the first of equal rows kept, non-finite rows left out. Few distinct values: many ties, and
    owners with no finite row."""
    owner = np.sort(np.arange(len(values)) % owners)
    on = fronts_by_owner(owner, values)
    want = []
    for s in range(owners):
        mine = np.flatnonzero(owner == s)
        if mine.size:
            want.extend(mine[pareto_front(values[mine])].tolist())
    assert on.tolist() == want


def test_a_tables_lifted_columns_are_kept_for_the_next_search_only_while_they_hold() -> None:
    """`lifted` gives the same columns for the same table, bound and cells of points (a fresh open mask each time: the
    caller changes it), and lifts again for another bound or other cells of points."""
    rng = np.random.default_rng(1)
    table = rng.random((5, 6, 2)).reshape(-1).reshape(5, 6, 2)  # (a view: kept by the array it views)
    table[0, 0, 1] = np.inf
    cell_of = rng.integers(0, 6, 40)
    whole = np.array([0.5, 0.0])
    cols, open_, by_cell, starts = lifted(table, whole, cell_of)
    assert np.array_equal(cols[0], np.maximum(table[:, :, 0], 0.5).reshape(-1)) and not open_[0] and open_[1:].all()
    assert np.array_equal(cell_of[by_cell], np.sort(cell_of)) and starts[-1] == 40
    open_[:] = False
    again = lifted(table.reshape(5, 6, 2), whole, cell_of.copy())
    assert again[0][0] is cols[0] and again[1].sum() == 29 and again[2] is by_cell
    assert lifted(table, np.array([0.7, 0.0]), cell_of)[0][0] is not cols[0]
    other = cell_of.copy()
    other[0] = (other[0] + 1) % 6
    assert lifted(table, whole, other)[2] is not by_cell
    # at most `KEPT_TABLES` kept, and a table gone is dropped at the next one
    del table, again
    gc.collect()
    newer = rng.random((2, 3, 2))
    lifted(newer, whole, rng.integers(0, 3, 8))
    assert 1 <= len(cell_columns.KEPT) <= cell_columns.KEPT_TABLES and cell_columns.KEPT[0].table() is newer
    assert all(k.table() is not None for k in cell_columns.KEPT)


@pytest.mark.parametrize(
    ("problem", "objectives"),
    [
        (CONV, ("latency", "energy")),
        (GEMM, ("latency", "footprint")),
        (GEMM, ("offchip_bytes", "latency")),
    ],
)
def test_rounds_give_the_enumerated_front(problem: object, objectives: tuple[str, ...]) -> None:
    t = get_target("ascend-a5")
    s = SearchSettings(strategy="bestfirst", objectives=objectives, max_seconds=300)
    r = tune(problem, t, s, validate=False)  # type: ignore[arg-type]
    full = tune(problem, t, s.model_copy(update={"strategy": "exhaustive"}), validate=False)  # type: ignore[arg-type]
    assert r.proven_optimal and full.proven_optimal
    assert [q.values for q in r.pareto] == [q.values for q in full.pareto]
    assert any("rounds" in n for n in r.notes)
    # with footprint, Ascend floors each point (`PointFloored`): points of open cells are left out on those too
    assert any("on their own floors" in n for n in r.notes) == ("footprint" in objectives)
    cert = r.certificate
    assert cert is not None and cert.unexplored == 0 and cert.scored + cert.pruned_by_bound == cert.structures_total


def test_three_objectives_visit_structures_one_by_one() -> None:
    """Rounds take two objectives only (three would take `pareto_front`'s pass over distinct values per round): the
    search visits structures as before, and its front is the enumeration's."""
    t = get_target("ascend-910b")
    s = SearchSettings(strategy="bestfirst", objectives=("latency", "energy", "footprint"), max_seconds=300)
    r = tune(CONV, t, s, validate=False)
    full = tune(CONV, t, s.model_copy(update={"strategy": "exhaustive"}), validate=False)
    assert r.proven_optimal and [q.values for q in r.pareto] == [q.values for q in full.pareto]
    assert not any("rounds" in n for n in r.notes) and len(r.pareto) > 1


@pytest.mark.parametrize("objectives", [("latency", "energy"), ("footprint", "offchip_bytes")])
def test_every_cell_left_unpriced_is_dominated_by_the_final_front(objectives: tuple[str, ...]) -> None:
    """The invariant the proof rests on, cell by cell: a cell the rounds did not price has no feasible point or a
    row the final front dominates."""
    t = get_target("ascend-910b")
    space = t.space(GEMM)
    structural, inner = split_params(space, 2048)
    fb = FrontBounds(t, GEMM, objectives)
    ev = Evaluator(t, GEMM, space, objectives, Encoding.of(structural), tuple(q.name for q in inner), front_bounds=fb)
    rounds = CellRounds.of(t, GEMM, ev, structural, fb)
    assert rounds is not None
    scored, pruned, reason, _ = rounds.run(lambda: None)
    assert reason == "space-exhausted" and len(scored) + len(pruned) == rounds.total_cells // rounds.cells_per
    front = np.array([v for _, v in ev.merged_front()])
    rows = rounds.rows(np.arange(rounds.total_cells))
    left = ~rounds.priced & np.isfinite(rows).all(axis=1)
    assert 0 < left.sum() < left.size and dominated_rows(rows[left], front).all()


def test_rounds_cut_by_the_budget_claim_only_the_structures_they_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    """One round, then the clock: structures with a cell still open are unexplored and their points priced are
    left out of the result, so the answer is not called proven."""
    monkeypatch.setattr(cell_rounds, "FIRST_ROUND_POINTS", 16)
    t = get_target("ascend-a5")
    space = t.space(GEMM)
    clock = itertools.count()
    watch = Watch(progress=lambda done, total, best: None, cancel=lambda: next(clock) >= 3)
    r = BestFirst().run(
        GEMM, t, space, SearchSettings(objectives=("latency", "footprint")), deadline=float("inf"), watch=watch
    )
    cert = r.certificate
    assert cert is not None and r.stop_reason == "cancelled" and not r.proven_optimal
    assert cert.unexplored > 0 and cert.scored + cert.pruned_by_bound + cert.unexplored == cert.structures_total
    assert cert.gap_bound is None and r.front  # a front from the structures it finished, not a claim of optimality
    assert re.search(r"priced in 1 rounds", " ".join(r.notes))  # (the visit, one round, then the cancel)


def test_progress_counts_cells() -> None:
    reports: list[tuple[int, int]] = []
    watch = Watch(progress=lambda done, total, best: reports.append((done, total)))
    t = get_target("ascend-a5")
    r = BestFirst().run(
        GEMM, t, t.space(GEMM), SearchSettings(objectives=("latency", "energy")), deadline=float("inf"), watch=watch
    )
    assert r.proven_optimal and watch.unit == "cells" and reports
    assert [d for d, _ in reports] == sorted(d for d, _ in reports) and reports[-1][0] == reports[-1][1]


def test_points_left_out_on_their_own_floors_are_dominated() -> None:
    """A visit's points (`FrontBounds.live_points`): with the target's floors of each point beside its cell's, the
    points left out are each dominated by the front (or infeasible) when priced, and more are left out than by the
    cells alone."""
    t = get_target("ascend-a5")
    objectives = ("latency", "footprint")
    s = SearchSettings(strategy="exhaustive", objectives=objectives, max_seconds=300)
    front = np.array([[q.values[o] for o in objectives] for q in tune(GEMM, t, s, validate=False).pareto])
    floored_out = 0
    for codes, live, by_cells in _visit_masks(t, GEMM, objectives, front):
        assert not (live & ~by_cells).any()  # the floors only add to what the cells leave out
        out = by_cells & ~live
        if out.any():
            score = t.score_codes(GEMM, {k: np.asarray(v)[out] for k, v in codes.items()})
            values = np.stack([np.asarray(score.objectives[o], dtype=np.float64) for o in objectives], axis=1)
            assert dominated_rows(values, front).all()  # (infeasible rows: inf, counted as dominated)
            floored_out += int(out.sum())
    assert floored_out > 0


def test_exact_point_floors_leave_out_exactly_the_dominated_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """With floors that are each point's own values (here: priced), a visit keeps exactly the points of open cells
    that the front does not dominate: the test uses each floor on its own objective, and the larger of it and
    the cell's row."""
    t = get_target("ascend-910b")
    objectives = ("footprint", "latency")  # (latency second: the floors' columns follow `objectives`)

    monkeypatch.setattr(t, "point_floors", _priced_floors(t), raising=False)
    monkeypatch.setattr(t, "point_floor_names", lambda *_: None, raising=False)  # (the priced floors read every code)
    s = SearchSettings(strategy="exhaustive", objectives=objectives, max_seconds=300)
    front = np.array([[q.values[o] for o in objectives] for q in tune(CONV, t, s, validate=False).pareto])
    front = front[::2]  # a front on its way: the points it lacks stay live (a point no worse than a front point is out)
    assert len(front) >= 2
    kept = 0
    for codes, live, by_cells in _visit_masks(t, CONV, objectives, front):
        score = t.score_codes(CONV, codes)
        values = np.stack([np.asarray(score.objectives[o], dtype=np.float64) for o in objectives], axis=1)
        assert np.array_equal(live, by_cells & ~dominated_rows(values, front))
        kept += int(live.sum())
    assert kept > 0


def test_rounds_with_exact_point_floors_give_the_enumerated_front(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rounds' use of the floors (`CellRounds._point_floored`) with floors that are the points' own values on
    both objectives: points are left out, and the front is still the enumeration's."""
    t = get_target("ascend-a5")
    monkeypatch.setattr(t, "point_floors", _priced_floors(t), raising=False)
    monkeypatch.setattr(t, "point_floor_names", lambda *_: None, raising=False)  # (the priced floors read every code)
    for objectives in (("energy", "latency"), ("latency", "footprint")):
        s = SearchSettings(strategy="bestfirst", objectives=objectives, max_seconds=300)
        r = tune(CONV, t, s, validate=False)
        full = tune(CONV, t, s.model_copy(update={"strategy": "exhaustive"}), validate=False)
        assert r.proven_optimal and [q.values for q in r.pareto] == [q.values for q in full.pareto]
        assert any("on their own floors" in n for n in r.notes)


def test_floors_of_inner_parameters_are_found_once_for_every_structure() -> None:
    """Ascend's footprint floors read every parameter but the core grid (`point_floor_names`): with the core grid the
    structure, the rounds floor one sub-space and read each round's points from it (`CellRounds.inner_floors`), the
    same floors as the target gives each structure's own points; with floors that read a structural parameter they
    floor each round's points with their codes."""
    t = get_target("ascend-910b")
    objectives = ("latency", "footprint")
    space = t.space(CONV)
    structural = tuple(q for q in space.params if q.name == "core_grid")
    inner = tuple(q.name for q in space.params if q.name != "core_grid")
    fb = FrontBounds(t, CONV, objectives)
    ev = Evaluator(t, CONV, space, objectives, Encoding.of(structural), inner, front_bounds=fb)
    rounds = CellRounds.of(t, CONV, ev, structural, fb)
    assert rounds is not None
    once = rounds.inner_floors()
    assert once is not None and set(once) == {"footprint"}
    for s in (0, len(structural[0].choices) - 1):
        own = t.point_floors(CONV, ev.structure_codes(rounds.fixed(s)), objectives)
        assert own is not None and np.array_equal(once["footprint"], own["footprint"])
    names = t.point_floor_names(CONV, objectives)
    assert names is not None and "core_grid" not in names
    assert t.point_floor_names(CONV, ("latency", "energy")) is None
    structural = tuple(q for q in space.params if q.name in ("base_m", "core_grid"))
    inner = tuple(q.name for q in space.params if q.name not in ("base_m", "core_grid"))
    ev = Evaluator(t, CONV, space, objectives, Encoding.of(structural), inner, front_bounds=fb)
    rounds = CellRounds.of(t, CONV, ev, structural, fb)
    assert rounds is not None and rounds.inner_floors() is None


def _visit_masks(
    t: object, problem: Problem, objectives: tuple[str, ...], front: np.ndarray
) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]]:
    """Each structure's code columns, the points a visit keeps with the target's point floors, and with its cells
    alone (`FrontBounds.live_points`)."""
    space = t.space(problem)  # type: ignore[attr-defined]
    structural, inner = split_params(space, 2048)
    ev = Evaluator(t, problem, space, objectives, Encoding.of(structural), tuple(q.name for q in inner))  # type: ignore[arg-type]
    with_floors, cells_only = FrontBounds(t, problem, objectives), FrontBounds(t, problem, objectives)  # type: ignore[arg-type]
    cells_only._floored = None
    for key in itertools.product(*(q.choices for q in structural)):
        fixed = dict(zip((q.name for q in structural), key, strict=True))
        codes = ev.structure_codes(fixed)
        n = len(codes[inner[0].name])
        live = with_floors.live_points(fixed, front, codes)
        by_cells = cells_only.live_points(fixed, front, codes)
        yield (
            codes,
            np.ones(n, dtype=bool) if live is None else live,
            np.ones(n, dtype=bool) if by_cells is None else by_cells,
        )


def _priced_floors(t: object) -> object:
    """Point floors that are the points' own values, priced (a stand-in for `point_floors` in the tests)."""

    def exact(problem: Problem, codes: dict[str, np.ndarray], objs: tuple[str, ...]) -> dict[str, np.ndarray]:
        score = t.score_codes(problem, codes)  # type: ignore[attr-defined]
        return {o: np.asarray(score.objectives[o], dtype=np.float64) for o in objs}

    return exact


def test_the_cells_floors_order_the_first_visit_without_the_structure_floors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the rounds apply, best-first picks its first visit by each structure's least latency over its cells
    (`CellRounds.latency_floors`, floors of the structures' exact latency bounds) and never asks for the target's
    structure floors; the front is still the enumeration's. Three objectives (no rounds) have none."""
    t = get_target("ascend-910b")
    objectives = ("latency", "energy")
    space = t.space(CONV)
    structural = tuple(q for q in space.params if q.name == "core_grid")
    floors = CellRounds.latency_floors(t, CONV, structural, objectives)
    assert floors is not None and floors.shape == (len(structural[0].choices),)
    for i in range(0, floors.size, max(1, floors.size // 12)):
        exact = t.structure_bound(CONV, {"core_grid": structural[0].choices[i]})
        assert floors[i] <= exact * (1 + 1e-9)
    assert CellRounds.latency_floors(t, CONV, structural, (*objectives, "footprint")) is None
    assert CellRounds.latency_floors(t, CONV, structural, ("energy", "footprint")) is None

    def no_floors(*_: object) -> None:
        raise AssertionError("the structure floors were asked for")

    monkeypatch.setattr(t, "structure_floors", no_floors)
    s = SearchSettings(strategy="bestfirst", objectives=objectives, max_seconds=300)
    r = tune(CONV, t, s, validate=False)
    monkeypatch.undo()
    full = tune(CONV, t, s.model_copy(update={"strategy": "exhaustive"}), validate=False)
    assert r.proven_optimal and [q.values for q in r.pareto] == [q.values for q in full.pareto]
    assert any("rounds" in n for n in r.notes)
