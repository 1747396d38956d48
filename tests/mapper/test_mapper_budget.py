"""How the mapper spends its time: the rate probe, auto's choice, sub-space sizing and the convergence stop.

Run against `FakeMatmulTarget` variants whose scoring speed is controlled (a sleep per call and per
point): the measured rate is reported, and nothing the mapper decides may follow it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import optuna
import pytest

from costmodels.protocol import BatchScore, Param, SearchSpace
from mapper.planning import DEFAULT_INNER, inner_size, resolve_strategy
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import split_params
from tests.mapper.bound_calls import count_structure_bounds
from tests.mapper.fake_target import FakeMatmulTarget, matmul
from workload.problem import Problem

P = matmul(1024, 512, 2048)  # 896 points
BIG = matmul(4096, 4096, 4096)  # 2 x 8 x 8 x 8 = 1024 points


class TimedTarget(FakeMatmulTarget):
    """Scores at a set speed: `overhead` seconds per call plus `per_point` seconds per point."""

    def __init__(self, overhead: float = 0.0, per_point: float = 0.0, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.overhead, self.per_point, self.points = overhead, per_point, 0

    def score_batch(self, problem: Problem, columns: dict[str, np.ndarray]) -> BatchScore:
        n = len(next(iter(columns.values())))
        self.points += n
        time.sleep(self.overhead + n * self.per_point)
        return super().score_batch(problem, columns)


def test_inner_size_comes_from_the_settings_or_the_space_never_the_clock() -> None:
    assert inner_size(SearchSettings()) == DEFAULT_INNER
    assert inner_size(SearchSettings(inner_points=100)) == 100  # an explicit size wins
    slow, fast = TimedTarget(per_point=1e-4), TimedTarget()
    s = SearchSettings(probe_points=64, enumerate_limit=512)
    assert resolve_strategy(s, slow.space(BIG), BIG, slow).inner_points == DEFAULT_INNER
    assert resolve_strategy(s, fast.space(BIG), BIG, fast).inner_points == DEFAULT_INNER


def test_seeded_search_repeats_exactly_when_one_run_is_slowed() -> None:
    """Issue #12: the same request and seed give the same answer on a fast and a slow machine."""
    for inner in (None, 16):  # sized by the mapper, or by the request
        for strategy in ("auto", "tpe"):  # auto: best-first above the limit
            s = SearchSettings(
                strategy=strategy, enumerate_limit=100, probe_points=64, inner_points=inner, max_trials=25,
                patience=0, seed=5,
            )  # fmt: skip
            fast = tune(BIG, TimedTarget(), s, validate=False)
            # slowed: 2 ms a call, 0.2 ms a point (a 13 ms probe: a load stall of the fast run rarely reaches it)
            slow = tune(BIG, TimedTarget(overhead=2e-3, per_point=2e-4), s, validate=False)
            assert fast.strategy == slow.strategy == ("bestfirst" if strategy == "auto" else "tpe")
            assert fast.stop_reason == slow.stop_reason
            if strategy == "auto":
                assert fast.scorer_rate is not None and slow.scorer_rate is not None  # measured, for information
                assert slow.scorer_rate < fast.scorer_rate  # the slowed run measured slower (how much: the load)
            assert fast.point == slow.point and fast.values == slow.values and fast.trace == slow.trace
            assert fast.counts == slow.counts and fast.inner_points == slow.inner_points


def test_auto_enumerates_when_the_measured_cost_fits_and_reuses_the_probe() -> None:
    t = TimedTarget(per_point=1e-6)  # 1024 points: 1 ms to enumerate
    r = tune(BIG, t, SearchSettings(probe_points=256, chunk=512), validate=False)
    assert r.strategy == "exhaustive" and r.proven_optimal and r.stop_reason == "enumerated"
    space = t.space(BIG).size
    assert r.counts.points_scored == space and t.points == space + 2  # the probe's chunk is not scored again;
    # only its two single-point timing calls are extra


def test_auto_searches_when_the_space_exceeds_the_enumeration_limit() -> None:
    t = TimedTarget(per_point=1e-4)  # slow enough that each trial's sub-space stays small
    s = SearchSettings(probe_points=64, enumerate_limit=512, inner_points=8, max_trials=5, patience=0)  # 1024 points
    plan = resolve_strategy(s, t.space(BIG), BIG, t)
    assert plan.strategy == "bestfirst" and plan.probe is not None  # one objective: best-first branch and bound
    r = tune(BIG, t, s, validate=False)
    assert r.strategy == "bestfirst" and r.proven_optimal and r.inner_points == 8
    assert r.certificate is not None and r.certificate.structures_total == 1024 // 8
    two = s.model_copy(update={"objectives": ("latency", "footprint")})
    assert resolve_strategy(two, t.space(BIG), BIG, t).strategy == "bestfirst"  # several objectives too
    r = tune(BIG, t, two, validate=False)
    full = tune(BIG, t, two.model_copy(update={"strategy": "exhaustive"}), validate=False)
    assert r.strategy == "bestfirst" and r.proven_optimal and r.inner_points == 8  # no trial budget: the exact front
    assert [p.values for p in r.pareto] == [p.values for p in full.pareto]


def test_auto_choice_does_not_depend_on_the_machine_speed() -> None:
    """A slow scorer (a busy machine) takes the same path as a fast one, even past the time budget."""
    settings = SearchSettings(probe_points=64, max_seconds=0.2)  # 1024 points at 1 ms each: 1 s to enumerate
    fast = resolve_strategy(settings, TimedTarget(per_point=1e-6).space(BIG), BIG, TimedTarget(per_point=1e-6))
    slow = resolve_strategy(settings, TimedTarget(per_point=1e-3).space(BIG), BIG, TimedTarget(per_point=1e-3))
    assert fast.strategy == slow.strategy == "exhaustive"
    assert slow.probe is not None and 0.3 < slow.probe.enumerate_seconds() < 3  # reported, not obeyed


def test_convergence_stop_has_its_own_reason_and_is_not_a_proof() -> None:
    s = SearchSettings(strategy="random", inner_points=0, max_trials=500, patience=15, seed=3)
    r = tune(BIG, FakeMatmulTarget(), s, validate=False)
    assert r.stop_reason == "converged" and not r.proven_optimal and r.counts.trials < 500
    improving, tail = r.trace[-16], r.trace[-15:]
    assert set(tail) == {improving} and r.trace[-17] != improving  # the last improvement, then 15 trials without
    assert any("no improvement" in n for n in r.notes)
    off = tune(BIG, FakeMatmulTarget(), s.model_copy(update={"patience": 0, "max_trials": 60}), validate=False)
    assert off.stop_reason == "trials" and off.counts.trials == 60


def test_convergence_over_a_time_window() -> None:
    t = TimedTarget(overhead=0.01)
    s = SearchSettings(strategy="random", inner_points=0, max_trials=10_000, patience=0, patience_seconds=0.15)
    r = tune(BIG, t, s, validate=False)
    assert r.stop_reason == "converged" and r.seconds < 5 and not r.proven_optimal


def test_exhausting_the_structure_is_a_proof_before_patience() -> None:
    s = SearchSettings(strategy="tpe", inner_points=1000, max_trials=200, patience=50)
    r = tune(P, FakeMatmulTarget(), s, validate=False)
    assert r.stop_reason == "space-exhausted" and r.proven_optimal and r.counts.trials <= 2 + r.counts.duplicates


def test_trace_points_count_the_work_behind_each_trial() -> None:
    r = tune(P, FakeMatmulTarget(), SearchSettings(strategy="tpe", inner_points=64, max_trials=10), validate=False)
    assert len(r.trace_points) == len(r.trace) == r.counts.trials
    steps = np.diff([0, *r.trace_points])
    assert set(steps) <= {0, r.inner_points} or set(steps) <= {0, *range(1, 65)}
    assert r.trace_points[-1] <= r.counts.points_scored


def test_optuna_stays_quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.INFO)
    tune(P, FakeMatmulTarget(), SearchSettings(strategy="tpe", inner_points=0, max_trials=5), validate=False)
    assert optuna.logging.get_verbosity() == optuna.logging.WARNING


def test_split_takes_categoricals_only_once_every_ordinal_fits() -> None:
    space = SearchSpace(
        params=(
            Param(name="layout", choices=("a", "b", "c")),
            Param(name="t", choices=(128, 64, 32)),  # decreasing sizes are ordinal too
            Param(name="u", choices=(1, 2, 4, 8)),
            Param(name="o", choices=("x", "y")),
        )
    )
    names = lambda params: {p.name for p in params}  # noqa: E731
    assert names(split_params(space, 8)[1]) == {"u"}  # t does not fit: categoricals stay structural
    assert names(split_params(space, 12)[1]) == {"t", "u"}
    structural, inner = split_params(space, 1000)
    assert names(inner) == {"t", "u", "layout"} and names(structural) == {"o"}  # one stays structural


def test_a_budget_spent_before_the_first_trial_still_scores_one_structure() -> None:
    """Slow warm starts must not leave a study with no answer; enqueued warm starts never run are not trials."""

    class SlowWarm(FakeMatmulTarget):
        def warm_starts(self, problem: Problem) -> list[dict[str, object]]:
            time.sleep(0.05)
            return [*super().warm_starts(problem), *super().warm_starts(problem)[:1]]

    s = SearchSettings(strategy="random", inner_points=8, max_seconds=0.01, max_trials=100, patience=0)
    r = tune(P, SlowWarm(), s, validate=False)
    assert r.stop_reason == "seconds" and r.mapping is not None and r.counts.trials == len(r.trace) == 1


def test_structures_are_larger_where_their_cells_decide_what_best_first_scores() -> None:
    """`CELLS_INNER` where best-first is bounded by cells on a target that places points in them and lets the
    mapper split its space (rngd and Ascend, several objectives or one other than latency), unless it ends on the
    structures' vectors (latency beside off-chip bytes); `DEFAULT_INNER` otherwise: latency alone, a target without
    cells (Tenstorrent), a target whose structures are its own (Trainium), an Optuna study; an explicit size still
    wins."""
    from costmodels.registry import get_target
    from mapper.planning import CELLS_INNER, cells_decide

    rngd, trn1, ascend, tt = (get_target(n) for n in ("rngd", "trn1", "ascend-910b", "wormhole-n150"))
    two, energy, latency = (SearchSettings(objectives=o) for o in (("latency", "footprint"), ("energy",), ("latency",)))
    assert cells_decide(two, rngd) and cells_decide(energy, rngd) and not cells_decide(latency, rngd)
    offchip = SearchSettings(objectives=("latency", "offchip_bytes"))  # ends on the structures' vectors
    assert not cells_decide(offchip, rngd) and inner_size(offchip, rngd) == DEFAULT_INNER
    assert cells_decide(SearchSettings(objectives=("offchip_bytes",)), rngd)  # (no latency bound to stop on)
    assert inner_size(two, rngd) == inner_size(energy, rngd) == inner_size(two, ascend) == CELLS_INNER > DEFAULT_INNER
    assert inner_size(latency, rngd) == inner_size(two, trn1) == inner_size(two, tt) == DEFAULT_INNER
    assert inner_size(latency, ascend) == DEFAULT_INNER
    assert inner_size(two) == DEFAULT_INNER  # (no target: an Optuna study's sub-spaces)
    assert inner_size(SearchSettings(objectives=("latency", "footprint"), inner_points=100), rngd) == 100
    big = matmul(4096, 4096, 4096)
    for strategy, inner in (("bestfirst", CELLS_INNER), ("tpe", DEFAULT_INNER), ("exhaustive", 0)):
        s = SearchSettings(objectives=("latency", "footprint"), strategy=strategy)
        assert resolve_strategy(s, rngd.space(big), big, rngd).inner_points == inner, strategy


def test_an_optuna_search_past_its_budget_bounds_no_structure_for_its_certificate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The certificate's sweep (every structure not scored, bounded one by one) stops at the search's deadline:
    a tpe search of a trn2 GEMM with a 0.05 s budget bounded 65,536 structures after it stopped (about 3 s)."""
    import mapper.strategies.study as study_mod
    from costmodels.registry import get_target

    target = get_target("trn2")
    problem = matmul(4096, 4096, 4096)
    calls, in_cert = count_structure_bounds(target, monkeypatch), [0]
    own_certify = study_mod.certify

    def certify(*args: Any, **kw: Any) -> Any:
        before = calls[0]
        cert = own_certify(*args, **kw)
        in_cert[0] += calls[0] - before
        return cert

    monkeypatch.setattr(study_mod, "certify", certify)
    target.space(problem)  # (prepared outside the budget)
    r = tune(problem, target, SearchSettings(strategy="tpe", max_seconds=0.05), validate=False)
    assert r.stop_reason == "seconds" and r.certificate is not None
    assert in_cert[0] == 0  # past the deadline: the structures left keep the generic bound
    cert = r.certificate
    assert not cert.complete and cert.unexplored == cert.structures_total - cert.scored - cert.pruned_by_bound
