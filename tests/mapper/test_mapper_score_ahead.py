"""Pricing the coming structures together (`Evaluator.score_ahead`): the same outcomes as one by one.

A visit reads the scores priced ahead for the points it scores then, which are the same or fewer
than when they were priced (the front grows in between and leaves fewer cells open).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from costmodels.protocol import BatchScore
from mapper.bounds import FrontBounds
from mapper.strategies import Encoding, objective
from mapper.strategies.objective import Ahead, Evaluator
from tests.costmodels.trainium.tile_structures import every_tile_target
from workload.einsum import einsum

OBJECTIVES = ("latency", "offchip_bytes")
P = einsum("mk,kn->mn", {"m": 6, "k": 5, "n": 7}, dtype="bf16", weight=1)


def _evaluator() -> tuple[Evaluator, list[dict[str, object]], list[int]]:
    t = every_tile_target("trn1")
    space = t.space(P)
    names = tuple(t.structural_params(P))
    structural = tuple(q for q in space.params if q.name in names)
    inner = tuple(q.name for q in space.params if q.name not in names)
    calls: list[int] = []
    real = t.score_codes

    def counted(problem: object, codes: dict[str, np.ndarray]) -> object:
        calls.append(len(next(iter(codes.values()))))
        return real(problem, codes)  # type: ignore[arg-type]

    t.score_codes = counted  # type: ignore[method-assign]
    ev = Evaluator(
        t, P, space, OBJECTIVES, Encoding.of(structural), inner, front_bounds=FrontBounds(t, P, OBJECTIVES)
    )  # fmt: skip
    keys = list(itertools.product(*(q.choices for q in structural)))  # 288 structures of 3,072 points
    return ev, [dict(zip(names, k, strict=True)) for k in keys], calls


def test_visits_after_score_ahead_give_the_same_outcomes_with_one_scoring_call() -> None:
    plain, structures, plain_calls = _evaluator()
    for fixed in structures:
        plain.visit(fixed)
    ahead, _, calls = _evaluator()
    for fixed in structures[:3]:  # a front first, so that later visits leave cells out
        ahead.visit(fixed)
    took = ahead.score_ahead(structures[3:], max_points=1 << 21)
    assert took == len(structures) - 3
    priced_ahead = len(calls)
    for fixed in structures[3:]:
        ahead.visit(fixed)
    assert len(calls) == priced_ahead  # every later visit read its scores
    assert priced_ahead <= 4 < len(plain_calls)  # at most 3 visits' calls and one for the others
    assert ahead.memo.keys() == plain.memo.keys()
    for key, outcome in plain.memo.items():
        other = ahead.memo[key]
        assert (other.point, other.values, other.front, other.bound) == (
            outcome.point, outcome.values, outcome.front, outcome.bound
        )  # fmt: skip
    assert ahead.merged_front() == plain.merged_front() and len(plain.merged_front()) > 1
    assert (ahead.scored, ahead.cells_left_out, ahead.pruned) == (plain.scored, plain.cells_left_out, plain.pruned)
    assert plain.cells_left_out > 0  # the front did leave points out after the scores were priced


def test_score_ahead_stops_at_its_points_and_skips_what_it_has() -> None:
    ev, structures, calls = _evaluator()
    per = ev.inner_size
    assert ev.score_ahead(structures, max_points=2 * per) == 2  # the first two gather 2 x per points
    assert len(calls) == 1 and calls[0] == 2 * per
    assert ev.score_ahead(structures[:2]) == 2 and len(calls) == 1  # priced already: nothing to do


def test_a_visit_reads_the_rows_of_the_points_it_scores() -> None:
    ev, _, _ = _evaluator()
    key = ("weight", 2, 512, 4)
    score = BatchScore(
        feasible=np.array([True, True, False, True]),
        objectives={"latency": np.array([10.0, 30, 50, 70]), "offchip_bytes": np.array([1.0, 3, 5, 7])},
    )
    ev._ahead[key] = Ahead(-1, np.array([1, 3, 5, 7]), {}, 0, score)  # priced: points 1, 3, 5, 7 of the structure
    got = ev._read_ahead(key, np.array([3, 7]))  # the grown front left 1 and 5 out
    assert got is not None and got.feasible.tolist() == [True, True]
    assert got.objectives["latency"].tolist() == [30.0, 70.0] and got.objectives["offchip_bytes"].tolist() == [3, 7]
    assert key not in ev._ahead  # read once
    ev._ahead[key] = Ahead(-1, np.array([1, 3]), {}, 0, score)
    assert ev._read_ahead(key, np.array([2])) is None  # a point not priced: scored afresh
    ev._ahead[key] = Ahead(-1, np.array([1, 3]), {}, 0, score)
    assert ev._read_ahead(key, None) is None  # (every point: more than were priced)
    ev._ahead[key] = Ahead(-1, None, {}, 0, score)  # every point priced
    got = ev._read_ahead(key, np.array([0, 2]))
    assert got is not None and got.objectives["latency"].tolist() == [10.0, 50.0]
    ev._ahead[key] = Ahead(-1, None, {}, 0, score)
    assert ev._read_ahead(key, None) is score


def test_the_kept_live_point_masks_stay_within_their_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(objective, "KEPT_MASK_BYTES", 1)  # the newest mask only
    ev, structures, _ = _evaluator()
    for fixed in structures:
        ev.visit(fixed)
    assert ev.cells_left_out > 0 and len(ev._masks) == 1
    idx, cols, size = next(iter(ev._masks.values()))
    assert ev._mask_bytes == size == idx.nbytes + sum(c.nbytes for c in cols.values())
    assert all(not c.flags.writeable for c in cols.values())  # shared by every structure with that mask
