"""A cancel reaches into a target's per-problem preparation (`costmodels.cancel`): no 1-5 s wait for it.
The search's deadline ends the optional part of it (the warm starts' extra structures)."""

from __future__ import annotations

import itertools
import time

import pytest

from costmodels.cancel import Cancelled, cancellable, checkpoint, past_deadline
from costmodels.registry import get_target
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import BestFirst
from mapper.watch import Watch
from tests.mapper.bound_calls import count_structure_bounds
from workload.einsum import einsum

P = einsum("mk,kn->mn", {"m": 512, "k": 768, "n": 384}, weight=1)


def test_checkpoint_does_nothing_outside_a_cancellable_block_and_raises_inside() -> None:
    checkpoint()  # no block: every other caller of a family's preparation is unaffected
    with cancellable(lambda: False):
        checkpoint()
    with pytest.raises(Cancelled), cancellable(lambda: True):
        checkpoint()
    checkpoint()  # the block's stop is gone once it exits


def test_rngd_preparation_cancelled_keeps_nothing_and_builds_again() -> None:
    t = get_target("rngd")
    with pytest.raises(Cancelled), cancellable(lambda: True):
        t.space(P)
    assert len(t._memo) == 0  # type: ignore[attr-defined]  # a half-built preparation is not kept
    assert t.space(P).size > 0 and len(t._memo) == 1  # type: ignore[attr-defined]


def test_rngd_warm_starts_stop_between_structure_bounds() -> None:
    t = get_target("rngd")
    full = t.warm_starts(P)  # (prepares the problem)
    calls = itertools.count()
    with pytest.raises(Cancelled), cancellable(lambda: next(calls) >= 5):
        t.warm_starts(P)
    assert next(calls) == 6 and len(full) > 1  # stopped at the 6th checkpoint, inside the loop over structures
    assert t.warm_starts(P) == full  # nothing half-kept: the next call gives the same warm starts


def test_tune_cancelled_before_the_preparation_scores_nothing() -> None:
    t = get_target("rngd")
    r = tune(P, t, SearchSettings(), validate=False, progress=Watch(cancel=lambda: True))
    assert r.stop_reason == "cancelled" and r.mapping is None and not r.proven_optimal
    assert r.counts.points_scored == 0 and any("preparation" in n for n in r.notes)
    assert len(t._memo) == 0  # type: ignore[attr-defined]  # stopped before the tables were built


def test_bestfirst_cancelled_during_warm_starts_bounds_no_structure() -> None:
    t = get_target("rngd")
    space = t.space(P)
    calls = itertools.count()  # the search's own checks pass; the warm starts' loop meets the cancel
    r = BestFirst().run(P, t, space, SearchSettings(), deadline=1e12, watch=Watch(cancel=lambda: next(calls) >= 3))
    assert r.stop_reason == "cancelled" and r.point is None and r.counts.points_scored == 0
    assert r.certificate is not None and not r.certificate.complete


def test_past_deadline_only_inside_a_block_with_a_deadline_that_has_passed() -> None:
    assert not past_deadline()  # no block
    with cancellable(None):
        assert not past_deadline()  # a block without a deadline
    with cancellable(None, time.perf_counter() + 3600):
        assert not past_deadline()
    with cancellable(None, time.perf_counter() - 1):
        assert past_deadline()
        checkpoint()  # a deadline is no cancel
    assert not past_deadline()  # gone once the block exits


def test_rngd_warm_starts_past_the_deadline_bound_no_structure(monkeypatch: pytest.MonkeyPatch) -> None:
    t = get_target("rngd")
    calls = count_structure_bounds(t, monkeypatch)
    full = t.warm_starts(P)
    assert calls[0] > 10  # without a deadline: every structure of the warm starts' grid bounded
    calls[0] = 0
    with cancellable(None, time.perf_counter() - 1):
        late = t.warm_starts(P)
    assert calls[0] == 0 and 1 <= len(late) < len(full)
    assert late == full[: len(late)]  # the pure placements, first as always


def test_a_search_past_its_deadline_scores_one_structure_without_bounding_any(monkeypatch: pytest.MonkeyPatch) -> None:
    t = get_target("rngd")
    t.space(P)  # (prepared outside the budget)
    calls = count_structure_bounds(t, monkeypatch)
    r = BestFirst().run(P, t, t.space(P), SearchSettings(), deadline=time.perf_counter() - 1)
    assert r.stop_reason == "seconds" and r.point is not None and r.counts.points_scored > 0
    assert calls[0] == 0  # neither the warm starts' extras nor the filter of the next warm start asked a bound
