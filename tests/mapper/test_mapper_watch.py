"""A running search reports progress and stops when its caller cancels it, keeping the best so far."""

from __future__ import annotations

from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.watch import Watch
from tests.mapper.fake_target import FakeMatmulTarget, matmul

P = matmul(1024, 512, 2048)


def test_study_cancelled_after_a_few_trials_keeps_its_best() -> None:
    seen: list[tuple[int, int, float | None]] = []
    w = Watch(progress=lambda d, t, b: seen.append((d, t, b)), cancel=lambda: len(seen) >= 3)
    s = SearchSettings(strategy="tpe", max_trials=100, patience=0, inner_points=0)
    r = tune(P, FakeMatmulTarget(), s, progress=w, validate=False)
    assert r.stop_reason == "cancelled" and not r.proven_optimal
    assert r.counts.trials == 3 and [d for d, _, _ in seen] == [1, 2, 3]
    assert r.mapping is not None and r.best_value() == min(b for _, _, b in seen if b is not None)


def test_enumeration_cancelled_between_chunks_is_not_a_proof() -> None:
    seen: list[int] = []
    w = Watch(progress=lambda d, t, b: seen.append(d), cancel=lambda: len(seen) >= 1)
    s = SearchSettings(strategy="exhaustive", chunk=4)
    r = tune(P, FakeMatmulTarget(), s, progress=w, validate=False)
    full = tune(P, FakeMatmulTarget(), s, validate=False)
    assert full.stop_reason == "enumerated" and full.counts.points_scored > r.counts.points_scored
    assert r.stop_reason == "cancelled" and not r.proven_optimal and r.counts.points_scored == seen[-1]


def test_progress_of_an_enumeration_counts_points_up_to_the_space() -> None:
    seen: list[tuple[int, int]] = []
    r = tune(
        P,
        FakeMatmulTarget(),
        SearchSettings(strategy="exhaustive", chunk=8),
        progress=lambda d, t, b: seen.append((d, t)),
    )
    assert seen[-1][0] == seen[-1][1] == r.counts.points_scored
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
