"""Cell bounds of several objectives (`costmodels.rngd.front_bound`, `mapper.bounds.FrontBounds.out`).

Admissible: every feasible point of a structure is no better, on both objectives, than one of its
cells' vectors. Exact: best-first with the cells gives the enumeration's front (the unpruned space).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from costmodels.protocol import BatchScore
from costmodels.registry import get_target
from costmodels.rngd.scoring import S_PARAMS
from mapper.bounds import FrontBounds, dominated_rows
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import Encoding, split_params
from mapper.strategies.objective import Evaluator
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

OBJECTIVES = ("latency", "offchip_bytes")
PROBLEMS = {
    "gemm": einsum("mk,kn->mn", {"m": 24, "k": 40, "n": 17}, weight=1),
    "conv": conv2d(batch=1, in_channels=4, out_channels=6, input_height=5, input_width=5, kernel=3, padding=1),
}


@pytest.mark.parametrize(
    "objectives", [OBJECTIVES, ("latency", "energy"), ("energy", "offchip_bytes"), ("latency", "footprint")]
)
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_every_feasible_point_is_no_better_than_a_cell_of_its_structure(name: str, objectives: tuple) -> None:
    p: Problem = PROBLEMS[name]
    t = get_target("rngd")
    space = t.space(p)
    structural, inner = split_params(space, 65536)
    ev = Evaluator(t, p, space, objectives, Encoding.of(structural), tuple(q.name for q in inner))
    names = [q.name for q in structural]
    checked = 0
    for key in itertools.product(*(q.choices for q in structural)):
        fixed = dict(zip(names, key, strict=True))
        codes = ev.structure_codes(fixed)
        score = t.score_codes(p, codes)
        feas = np.asarray(score.feasible, dtype=bool)
        points = np.stack([np.asarray(score.objectives[o], dtype=float)[feas] for o in objectives], axis=1)
        cells = t.structure_front_cells(p, fixed, objectives)  # type: ignore[attr-defined]
        assert cells is not None and cells.shape[1] == 2
        # each point has a cell no worse on both objectives (the cells as the "front" of the test) ...
        assert dominated_rows(points, cells).all(), fixed
        # ... and it is the point's own cell (`structure_cell_of_points`), which live-cell scoring relies on
        at = t.structure_cell_of_points(p, fixed, codes)  # type: ignore[attr-defined]
        assert at.shape == feas.shape and (at >= 0).all() and (at < len(cells)).all()
        assert (points >= cells[at[feas]] * (1 - 1e-12)).all(), fixed
        checked += len(points)
    assert checked > 1000


def test_cells_answer_none_for_objectives_they_do_not_bound() -> None:
    p = PROBLEMS["gemm"]
    t = get_target("rngd")
    assert t.structure_front_cells(p, {}, ("latency", "cycles")) is None  # type: ignore[attr-defined]
    assert t.structure_front_cells(p, {}, ("offchip_bytes", "latency")).shape[1] == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("objectives", [OBJECTIVES, ("latency", "energy"), ("latency", "footprint")])
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_bestfirst_with_cells_gives_the_enumerated_front_and_prunes_structures(name: str, objectives: tuple) -> None:
    p = PROBLEMS[name]
    s = SearchSettings(strategy="bestfirst", objectives=objectives, inner_points=65536, max_seconds=300)
    r = tune(p, get_target("rngd"), s, validate=False)
    full = tune(p, get_target("rngd"), s.model_copy(update={"strategy": "exhaustive"}), validate=False)
    assert r.proven_optimal and full.proven_optimal
    assert [q.values for q in r.pareto] == [q.values for q in full.pareto]  # exact, no duplicate value
    assert r.certificate is not None and r.certificate.pruned_by_bound > 0
    assert r.certificate.scored + r.certificate.pruned_by_bound == r.certificate.structures_total
    # of the structures scored, the points of cells the front dominated were not scored
    assert r.counts.points_scored < r.certificate.scored * r.certificate.inner_points
    assert "left out" in r.certificate.bound_source


def test_cells_prune_what_the_single_vector_cannot() -> None:
    """The exact front bounds out more structures by their cells than by their single bound vectors."""
    p = PROBLEMS["gemm"]
    t = get_target("rngd")
    space = t.space(p)
    structural, _ = split_params(space, 65536)
    names = [q.name for q in structural]
    exact = tune(p, t, SearchSettings(strategy="exhaustive", objectives=OBJECTIVES), validate=False).pareto
    front = np.array([[q.values["latency"], q.values["offchip_bytes"]] for q in exact])
    with_cells, single = FrontBounds(t, p, OBJECTIVES), FrontBounds(t, p, OBJECTIVES, cells=False)
    best = tune(p, t, SearchSettings(strategy="exhaustive"), validate=False).point
    assert best is not None
    for fb in (with_cells, single):
        fb.learn_clock(best)
    keys = [dict(zip(names, k, strict=True)) for k in itertools.product(*(q.choices for q in structural))]
    out_cells = sum(with_cells.out(f, front) for f in keys)
    out_single = sum(single.out(f, front) for f in keys)
    assert out_cells > out_single


def test_a_visited_structure_whose_cells_are_all_dominated_counts_as_pruned_not_infeasible() -> None:
    p = PROBLEMS["gemm"]
    t = get_target("rngd")
    space = t.space(p)
    structural, inner = split_params(space, 65536)
    fb = FrontBounds(t, p, OBJECTIVES)
    ev = Evaluator(t, p, space, OBJECTIVES, Encoding.of(structural), tuple(q.name for q in inner), front_bounds=fb)
    fixed = {q.name: q.choices[0] for q in structural}
    ev.front_values = np.array([[1e-12, 1.0]])  # dominates every feasible point
    outcome = ev.visit(fixed)
    assert outcome.bound is not None and outcome.point is None
    assert (ev.pruned, ev.infeasible, ev.scored) == (1, 0, 0)
    ev.front_values = np.array([[1e9, 1e18]])  # dominates no feasible cell: their every point scored
    fixed2 = {q.name: q.choices[-1] for q in structural}
    codes = ev.structure_codes(fixed2)
    cells = t.structure_front_cells(p, fixed2, OBJECTIVES)  # type: ignore[attr-defined]
    at = t.structure_cell_of_points(p, fixed2, codes)  # type: ignore[attr-defined]
    in_feasible_cells = int(np.isfinite(cells[at, 0]).sum())
    assert ev.visit(fixed2).bound is None and 0 < ev.scored == in_feasible_cells < len(at)


def test_a_structure_whose_open_cells_hold_no_feasible_point_is_pruned_without_checking_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its other cells are dominated, so none of its points can join the front: pruned by its bound, not counted
    infeasible (its dominated points were never priced) and no point checked one by one for violations. With no
    point left out, the same scores make it infeasible, its violations checked."""
    p = PROBLEMS["gemm"]
    t = get_target("rngd")
    space = t.space(p)
    structural, inner = split_params(space, 65536)
    fixed = {q.name: q.choices[0] for q in structural}
    cells = t.structure_front_cells(p, fixed, OBJECTIVES)  # type: ignore[attr-defined]
    finite = cells[np.isfinite(cells).all(axis=1)]
    front = finite[[int(np.argmin(finite[:, 0]))]]  # dominates some cells, leaves the lower-bytes ones open
    checked: list[int] = []
    real_check = t.check
    monkeypatch.setattr(t, "score_codes", lambda prob, codes: BatchScore.infeasible(len(codes["rows"]), t.objectives))
    monkeypatch.setattr(t, "check", lambda prob, m: checked.append(1) or real_check(prob, m))

    def evaluator() -> Evaluator:
        fb = FrontBounds(t, p, OBJECTIVES)
        inner_names = tuple(q.name for q in inner)
        return Evaluator(t, p, space, OBJECTIVES, Encoding.of(structural), inner_names, front_bounds=fb)

    ev = evaluator()
    ev.front_values = front
    outcome = ev.visit(fixed)
    assert ev.cells_left_out > 0 and ev.scored > 0  # some cells open, their points priced
    assert outcome.bound is not None and outcome.point is None and not outcome.violations
    assert (ev.pruned, ev.infeasible, checked) == (1, 0, [])
    ev = evaluator()  # no front: every point priced, none feasible
    outcome = ev.visit(fixed)
    assert (ev.pruned, ev.infeasible, ev.cells_left_out) == (0, 1, 0) and outcome.bound is None and checked


@pytest.mark.parametrize("objectives", [OBJECTIVES, ("latency", "energy"), ("latency", "footprint")])
def test_cells_screened_against_a_front_keep_the_cells_dominance_and_bound_their_points(objectives: tuple) -> None:
    """`structure_front_cells_screened`: a stage-1 row whose row vector the front dominates holds that vector in
    its cells, which is never above the cells' own (so it still bounds their points); every dominance test
    against that front, or a front grown from it, has the cells' outcome; the other rows are the cells' own;
    `structure_front_dominated` says True only of structures whose every cell the front dominates."""
    t = get_target("rngd")
    rng = np.random.default_rng(1)
    screened_rows = 0
    for p in PROBLEMS.values():
        space = t.space(p)
        choices = {q.name: q.choices for q in space.params}
        for _ in range(40):
            fixed = {k: v[rng.integers(len(v))] for k, v in choices.items() if rng.random() < 0.5}
            cells = t.structure_front_cells(p, fixed, objectives)  # type: ignore[attr-defined]
            finite = cells[np.isfinite(cells).all(axis=1)]
            if not len(finite):
                continue
            front = finite[rng.choice(len(finite), size=min(4, len(finite)), replace=False)] * rng.uniform(0.9, 1.4, 2)
            got, own = t.structure_front_cells_screened(p, fixed, objectives, front)  # type: ignore[attr-defined]
            assert got.shape == cells.shape and (got <= cells).all(), fixed
            # the rows said to be the cells' own are; each of the others the front dominates
            assert np.array_equal(got[own], cells[own]) and dominated_rows(got[~own], front).all(), fixed
            dominated = dominated_rows(cells, front)
            assert np.array_equal(dominated_rows(got, front), dominated), fixed
            assert np.array_equal(got[~dominated], cells[~dominated]), fixed
            grown = np.concatenate([front, front * 0.97])  # a later front: dominates every point of this one
            assert np.array_equal(dominated_rows(got, grown), dominated_rows(cells, grown)), fixed
            screened_rows += int((got < cells).any(axis=1).sum())
            whole = t.structure_front_dominated(p, fixed, objectives, front)  # type: ignore[attr-defined]
            assert not whole or dominated.all(), fixed  # True only when every cell is dominated
            assert t.structure_front_dominated(p, fixed, objectives, np.zeros((1, 2)))  # type: ignore[attr-defined]
            # a front at the least of the structure's row vectors: told dominated whole, and so is every cell
            fc = t._front_cells(p)  # type: ignore[attr-defined]
            fs, fp, fl, dbuf = fc._keys(fixed)
            rows = fc._row_vectors_of(fp, fl, dbuf, objectives)[fc._where(S_PARAMS, fs)]
            corner = rows[np.isfinite(rows).all(axis=1)].min(axis=0, keepdims=True)
            if np.isfinite(corner).all():
                assert t.structure_front_dominated(p, fixed, objectives, corner)  # type: ignore[attr-defined]
                assert dominated_rows(cells, corner).all(), fixed
            empty = t.structure_front_cells_screened(p, fixed, objectives, None)  # type: ignore[attr-defined]
            assert np.array_equal(empty.cells, cells) and empty.own.all()
    assert screened_rows > 100  # the row vectors were used (and are below the cells they stand for)


def test_answers_kept_between_calls_equal_the_answers_worked_out_afresh() -> None:
    """What the cells keep between calls (the last row dominance test, the points' cells of a shared pattern of
    columns, each structure's open cells) gives what a fresh computation gives: for the same front object, for
    another front, for a front grown from the last one, and for columns that change."""
    from costmodels.rngd.front_bound import FrontCells

    t = get_target("rngd")
    rng = np.random.default_rng(7)
    objectives = ("latency", "footprint")
    p = PROBLEMS["gemm"]
    space = t.space(p)
    structural, inner = split_params(space, 65536)
    ev = Evaluator(t, p, space, objectives, Encoding.of(structural), tuple(q.name for q in inner))
    names = [q.name for q in structural]
    fc = t._front_cells(p)  # type: ignore[attr-defined]
    fb = FrontBounds(t, p, objectives)
    reused = opened = lifted = 0
    for key in itertools.product(*(q.choices for q in structural)):
        fixed = dict(zip(names, key, strict=True))
        cells = t.structure_front_cells(p, fixed, objectives)  # type: ignore[attr-defined]
        finite = cells[np.isfinite(cells).all(axis=1)]
        if len(finite) < 2:
            continue
        front = finite[rng.choice(len(finite), size=2, replace=False)] * rng.uniform(0.95, 1.2, 2)
        other = front * 1.5  # another front object, other values: the kept row test must not answer for it
        fc.dominated(fixed, objectives, front)
        kept, fresh = fc.screened(fixed, objectives, front), FrontCells(fc.term).screened(fixed, objectives, front)
        assert all(np.array_equal(a, b) for a, b in zip(kept, fresh, strict=True))
        fc.dominated(fixed, objectives, front)
        kept, fresh = fc.screened(fixed, objectives, other), FrontCells(fc.term).screened(fixed, objectives, other)
        assert all(np.array_equal(a, b) for a, b in zip(kept, fresh, strict=True))
        # the open cells: kept for the same front, narrowed for a grown one, as found afresh
        codes = ev.structure_codes(fixed)
        grown = np.concatenate([front, front * rng.uniform(0.9, 1.0, (len(front), 2))])
        fb.out(fixed, front)
        first = fb.live_points(fixed, front, codes)
        later = fb.live_points(fixed, grown, codes)
        for got, fr in ((first, front), (later, grown)):
            want = FrontBounds(t, p, objectives).live_points(fixed, fr, codes)
            assert (got is None and want is None) or np.array_equal(np.asarray(got), np.asarray(want)), fixed
        # a front that did not grow from the kept one: no point it leaves open is left out (the kept cells, screened
        # against a stronger front, may leave more open than fresh ones)
        weaker = fb.live_points(fixed, front * 2, codes)
        want = FrontBounds(t, p, objectives).live_points(fixed, front * 2, codes)
        if weaker is not None:
            assert want is not None and not (want & ~weaker).any(), fixed
        # a higher vector than the one the open cells were kept at: they are tested again at it
        fresh, kept = FrontBounds(t, p, objectives), FrontBounds(t, p, objectives)
        corner = np.array([[finite[:, 0].min(), np.median(finite[:, 1])]])  # no slower than any cell
        high = np.array([0.0, finite[:, 1].max() * 2])  # lifts every cell above the corner (itself not dominated)
        kept.out(fixed, corner, np.zeros(2))
        assert kept.out(fixed, corner, high) == fresh.out(fixed, corner, high), fixed
        lifted += fresh.out(fixed, corner, high) and not FrontBounds(t, p, objectives).out(fixed, corner, np.zeros(2))
        reused += first is not None
        opened += later is not None and first is not None and int(later.sum()) < int(first.sum())
        # the points' cells: the same for the shared read-only pattern, and for writable columns that change
        at = fc.cell_of_points(fixed, codes)
        assert at is fc.cell_of_points(fixed, codes)
        mine = {k: np.array(v) for k, v in codes.items()}
        free = [nm for nm in names + [q.name for q in inner] if nm not in fixed and nm in mine]
        assert np.array_equal(fc.cell_of_points(fixed, mine), at)
        mine[free[0]][:] = mine[free[0]][::-1]
        assert np.array_equal(fc.cell_of_points(fixed, mine), FrontCells(fc.term).cell_of_points(fixed, mine))
    assert reused > 10 and opened > 0 and lifted > 0  # each kept path ran


@pytest.mark.parametrize("objectives", [OBJECTIVES, ("latency", "energy"), ("latency", "footprint")])
def test_a_structure_over_several_rows_choices_is_screened_as_tightly_as_each_choice_alone(objectives: tuple) -> None:
    """Lane groups (`FrontCells._lane_groups`): a structure whose sub-space spans the ``rows`` choices (and the
    ``trf_split`` ones) is screened group by group, so its screened cells are those of the structures with each
    ``rows`` choice fixed, side by side in its cells' order, and it is told dominated exactly when each of those
    is: the row vectors of one group are not loosened by the lanes of another."""
    t = get_target("rngd")
    rng = np.random.default_rng(3)
    told = 0
    for p in PROBLEMS.values():
        choices = {q.name: q.choices for q in t.space(p).params}
        for _ in range(30):
            fixed = {k: v[rng.integers(len(v))] for k, v in choices.items() if k not in ("rows", "trf_split")}
            fixed = {k: v for k, v in fixed.items() if k != "slice_grid" or rng.random() < 0.5}
            cells = t.structure_front_cells(p, fixed, objectives)  # type: ignore[attr-defined]
            finite = cells[np.isfinite(cells).all(axis=1)]
            if not len(finite):
                continue
            front = finite[rng.choice(len(finite), size=min(3, len(finite)), replace=False)] * rng.uniform(0.95, 1.3, 2)
            each = [{**fixed, "rows": r} for r in choices["rows"]]
            got = t.structure_front_cells_screened(p, fixed, objectives, front).cells  # type: ignore[attr-defined]
            parts = [t.structure_front_cells_screened(p, f, objectives, front).cells for f in each]  # type: ignore[attr-defined]
            n = len(parts[0]) // len(choices["trf_split"])  # stage-1 rows: cells are (rows of stage 1, rows, trf_split)
            side = np.stack([q.reshape(n, -1, len(objectives)) for q in parts], axis=1).reshape(-1, len(objectives))
            assert np.array_equal(got, side), fixed
            whole = t.structure_front_dominated(p, fixed, objectives, front)  # type: ignore[attr-defined]
            alone = [t.structure_front_dominated(p, f, objectives, front) for f in each]  # type: ignore[attr-defined]
            assert whole == all(alone), fixed
            # a front of the groups' row vectors: told dominated whole, though it need not dominate the least row
            # vector over every lane of the structure (the one row vector per stage-1 row of before)
            fc = t._front_cells(p)  # type: ignore[attr-defined]
            fs, fp, fl, dbuf = fc._keys(fixed)
            groups = [fc._row_vectors_of(fp, g, dbuf, objectives)[fc._where(S_PARAMS, fs)] for g in fc._lane_groups(fl)]
            vectors = np.concatenate(groups)
            vectors = vectors[np.isfinite(vectors).all(axis=1)]
            if len(vectors):
                assert t.structure_front_dominated(p, fixed, objectives, vectors)  # type: ignore[attr-defined]
                assert dominated_rows(cells, vectors).all(), fixed
                least = fc._row_vectors_of(fp, fl, dbuf, objectives)[fc._where(S_PARAMS, fs)]
                told += int(not dominated_rows(least, vectors).all())
    # structures the one row vector over every lane could not have told dominated (with off-chip bytes or
    # footprint, on these small problems, one group holds every lane term's least)
    if "energy" in objectives:
        assert told > 0
