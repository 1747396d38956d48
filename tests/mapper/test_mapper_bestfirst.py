"""Best-first branch and bound over structures (issue #12): exact, never scores a structure it could skip, honest
certificate when the budget ends, deterministic across scorer speeds, cancellable between structures."""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np
import pytest

from costmodels.registry import get_target
from mapper.bounds import RTOL, StructureBounds
from mapper.pareto import pareto_front
from mapper.settings import SearchSettings
from mapper.strategies import BestFirst, Enumeration, split_params, strategy_for
from mapper.strategies.bestfirst import bulk_params
from mapper.strategies.objective import Evaluator
from mapper.watch import Watch
from tests.mapper.fake_target import FakeMatmulTarget, matmul
from tests.mapper.test_mapper_bounds import BoundedFake
from tests.mapper.test_mapper_budget import TimedTarget
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

TINY_GEMM = einsum("mk,kn->mn", {"m": 24, "k": 40, "n": 17}, weight=1)
TINY_CONV = conv2d(batch=1, in_channels=8, out_channels=12, input_height=5, input_width=5, kernel=3, padding=1)
GEMM = einsum("mk,kn->mn", {"m": 64, "k": 128, "n": 96}, weight=1)
SMALL_GEMM = einsum("mk,kn->mn", {"m": 12, "k": 20, "n": 9}, weight=1)  # trn2, every tile count: 24.6 M points
P = matmul(1024, 512, 2048)
FAR = 1e18  # a deadline that never comes


def run(strategy: Any, problem: Problem, target: Any, settings: SearchSettings, **kw: Any) -> Any:
    return strategy.run(problem, target, target.space(problem), settings, deadline=kw.pop("deadline", FAR), **kw)


# (preset, problem, points per structure): one family each, the structures small enough to be many
CASES = [
    ("rngd", TINY_GEMM, 4096),  # 3.9 M points: 942 structures
    ("ascend-910b", TINY_CONV, 2048),
    ("trn2", SMALL_GEMM, 256),  # its own structures (stationary input x three tiles): 1,024
    ("wormhole-n150", TINY_GEMM, 4),
]


@pytest.mark.parametrize(("preset", "problem", "inner"), CASES, ids=[c[0] for c in CASES])
def test_best_first_proves_the_enumerated_optimum_on_every_family(preset: str, problem: Problem, inner: int) -> None:
    target = get_target(preset)
    s = SearchSettings(strategy="bestfirst", inner_points=inner)
    exact = run(Enumeration(), problem, target, s)
    bf = run(BestFirst(inner), problem, target, s)
    assert exact.proven_optimal and exact.values is not None and bf.values is not None
    assert bf.proven_optimal and bf.stop_reason in ("lower-bound", "space-exhausted")
    assert bf.values[0] == pytest.approx(exact.values[0], rel=1e-12)
    cost = target.cost(problem, target.mapping(problem, bf.point))  # its point is priced at what it reports
    assert cost.seconds == pytest.approx(bf.values[0], rel=1e-9)
    cert = bf.certificate
    structural, _ = split_params(target.space(problem), inner)
    preferred = bulk_params(problem, target, target.space(problem))  # a family's own structures (Trainium's tiles)
    if preferred is not None:
        structural = tuple(p for p in target.space(problem).params if p.name in preferred)
    assert cert.structures_total == int(np.prod([len(p.choices) for p in structural])) > 1
    assert cert.scored + cert.pruned_by_bound == cert.structures_total and cert.gap_bound == 0.0


def _visits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], float | None]]:
    """Record every structure best-first scores, with the best found before it."""
    seen: list[tuple[dict[str, Any], float | None]] = []
    original = Evaluator.visit

    def visit(self: Evaluator, fixed: dict[str, Any]) -> Any:
        seen.append((dict(fixed), None if self.best_values is None else self.best_values[0]))
        return original(self, fixed)

    monkeypatch.setattr(Evaluator, "visit", visit)
    return seen


@pytest.mark.parametrize(
    ("target", "problem", "inner"), [(BoundedFake(), P, 8), (get_target("rngd"), TINY_GEMM, 4096)], ids=["fake", "rngd"]
)
def test_no_structure_is_scored_once_its_bound_reaches_the_best(
    monkeypatch: pytest.MonkeyPatch, target: Any, problem: Problem, inner: int
) -> None:
    seen = _visits(monkeypatch)
    r = run(BestFirst(inner), problem, target, SearchSettings(inner_points=inner, warm_start=False))
    assert r.proven_optimal and r.certificate.pruned_by_bound > 0  # the bound did skip structures
    bounds = StructureBounds(target, problem, "latency")
    bounds.learn_clock(r.point)
    visited = [bounds(f) for f, _ in seen]
    assert visited == sorted(visited)  # ascending bound order
    for b, (_, best) in zip(visited, seen, strict=True):
        assert best is None or b * (1 + RTOL) < best
    # every structure left unscored has a bound the best reaches: nothing better is left
    structural, _ = split_params(target.space(problem), inner)
    names = [p.name for p in structural]
    scored = {tuple(f[n] for n in names) for f, _ in seen}
    for key in itertools.product(*(p.choices for p in structural)):
        if key not in scored:
            assert bounds(dict(zip(names, key, strict=True))) * (1 + RTOL) >= r.values[0]


class SlowRngd:
    """An RNGD target whose scorer sleeps per call (a busy or slow machine); everything else delegated."""

    def __init__(self, delay: float) -> None:
        self._t: Any = get_target("rngd")
        self.delay = delay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._t, name)

    def structure_bound(self, problem: Problem, fixed: dict[str, Any]) -> float:
        return float(self._t.structure_bound(problem, fixed))

    def score_codes(self, problem: Problem, codes: dict[str, np.ndarray]) -> Any:
        time.sleep(self.delay)
        return self._t.score_codes(problem, codes)


@pytest.mark.parametrize("warm", [False, True], ids=["ordered", "warm-starts"])
def test_the_certificate_bounds_the_gap_when_the_budget_ends_first(warm: bool) -> None:
    inner = 4096
    s = SearchSettings(inner_points=inner, warm_start=warm)
    full = run(BestFirst(inner), TINY_GEMM, get_target("rngd"), s)
    assert full.certificate.scored >= 4  # enough structures to stop in the middle
    t = SlowRngd(0.2)
    structural, _ = split_params(get_target("rngd").space(TINY_GEMM), inner)
    names = [p.name for p in structural]
    keys = list(itertools.product(*(p.choices for p in structural)))
    for k in keys:  # the per-problem tables and lane minima are built before the clock starts
        t.structure_bound(TINY_GEMM, dict(zip(names, k, strict=True)))
    r = run(BestFirst(inner), TINY_GEMM, t, s, deadline=time.perf_counter() + 0.5)
    cert = r.certificate
    assert r.stop_reason == "seconds" and not r.proven_optimal and not cert.complete
    assert 1 <= cert.scored < full.certificate.scored and cert.pruned_by_bound == 0
    assert cert.scored + cert.unexplored == cert.structures_total
    # the remaining bound is below every structure not scored (ordered: the lowest of them), the gap follows
    bounds = StructureBounds(get_target("rngd"), TINY_GEMM, "latency")
    bounds.learn_clock(full.point)
    all_bounds = sorted(bounds(dict(zip(names, k, strict=True))) for k in keys)
    if not warm:
        assert cert.best_remaining_bound == pytest.approx(all_bounds[cert.scored], rel=1e-12)
    else:  # stopped among the warm starts: the roofline, admissible for every structure
        assert cert.best_remaining_bound == pytest.approx(bounds.whole(), rel=1e-12)
    assert cert.best_remaining_bound <= all_bounds[cert.scored] * (1 + 1e-12)
    assert cert.gap_bound == pytest.approx(r.values[0] / cert.best_remaining_bound - 1, rel=1e-9)
    assert r.values[0] <= full.values[0] * (1 + cert.gap_bound) * (1 + 1e-12)  # the claim holds
    assert any("within" in n for n in r.notes)


class SlowBounds(BoundedFake):
    """The fake with a structure bound that takes a millisecond per structure."""

    def structure_bound(self, problem: Problem, fixed: dict[str, Any]) -> float:
        time.sleep(1e-3)
        return super().structure_bound(problem, fixed)


def test_the_bounding_pass_stops_at_the_budget_with_the_generic_bound() -> None:
    t = SlowBounds()
    s = SearchSettings(inner_points=1, warm_start=False)  # 896 structures: about 1 s to bound them all
    r = run(BestFirst(1), P, t, s, deadline=time.perf_counter() + 0.1)
    cert = r.certificate
    assert r.stop_reason == "seconds" and cert.structures_total == 896 and cert.scored == 1 and r.point is not None
    bounds = StructureBounds(t, P, "latency")
    bounds.learn_clock(r.point)
    assert cert.best_remaining_bound == pytest.approx(bounds.whole(), rel=1e-12)  # the roofline, admissible for all
    assert cert.gap_bound == pytest.approx(r.values[0] / bounds.whole() - 1, rel=1e-9)
    assert any("the rest have the generic bound" in n for n in r.notes)


def test_a_warm_start_at_the_roofline_proves_without_bounding_every_structure() -> None:
    """Ascend: the rule-of-thumb start reaches the roofline; no structure is bounded one by one."""
    problem = einsum("mk,kn->mn", {"m": 4099, "k": 131, "n": 8191}, dtype="bf16", weight=1)
    target = get_target("ascend-910b")
    r = run(BestFirst(), problem, target, SearchSettings())
    ordered = run(BestFirst(), problem, target, SearchSettings(warm_start=False))
    assert r.proven_optimal and r.stop_reason == "lower-bound" and any("warm starts only" in n for n in r.notes)
    assert ordered.proven_optimal and r.values == ordered.values
    assert r.certificate.scored + r.certificate.pruned_by_bound == r.certificate.structures_total > 1


def test_same_answer_whatever_the_scorer_speed() -> None:
    s = SearchSettings(inner_points=8)
    fast = run(BestFirst(8), P, BoundedFake(), s)
    slow_t = TimedTarget(overhead=2e-3, per_point=2e-5)
    slow_t.structure_bound = BoundedFake().structure_bound  # type: ignore[attr-defined]
    slow = run(BestFirst(8), P, slow_t, s)
    assert fast.point == slow.point and fast.values == slow.values and fast.trace == slow.trace
    assert fast.counts == slow.counts and fast.certificate == slow.certificate
    assert fast.certificate.pruned_by_bound > 0  # the order and the stop came from the bounds
    rs = SearchSettings(inner_points=4096)
    a = run(BestFirst(4096), TINY_GEMM, get_target("rngd"), rs)
    b = run(BestFirst(4096), TINY_GEMM, SlowRngd(0.002), rs)
    assert a.point == b.point and a.values == b.values and a.certificate == b.certificate


def test_cancel_stops_between_structures_and_progress_counts_structures() -> None:
    reports: list[tuple[int, int]] = []
    watch = Watch(progress=lambda done, total, best: reports.append((done, total)), cancel=lambda: len(reports) >= 3)
    r = run(BestFirst(8), P, FakeMatmulTarget(), SearchSettings(inner_points=8), watch=watch)
    assert r.stop_reason == "cancelled" and not r.proven_optimal and r.point is not None
    assert r.certificate.scored == 3 and r.certificate.unexplored == r.certificate.structures_total - 3
    assert reports == [(1, 112), (2, 112), (3, 112)] and watch.unit == "structures"


def test_several_objectives_give_the_exact_front() -> None:
    objs = ("latency", "footprint")
    s = SearchSettings(strategy="bestfirst", objectives=objs, inner_points=8)
    t = BoundedFake()
    exact = run(Enumeration(), P, t, s)
    bf = run(strategy_for("bestfirst", inner_points=8), P, t, s)
    assert bf.proven_optimal and len(bf.front) >= 2
    assert sorted(v for _, v in bf.front) == sorted(v for _, v in exact.front)
    vals = np.array([v for _, v in bf.front])
    assert len(pareto_front(vals)) == len(vals)  # no dominated or repeated entry


class FlooredFake(BoundedFake):
    """The bounded fake with floors: each structure's bound times a factor in [0.5, 1] (1 for a third of them:
    ties between floors and exact bounds), and a count of the exact bounds asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.exact = 0

    def structure_bound(self, problem: Problem, fixed: dict[str, Any]) -> float:
        self.exact += 1
        return super().structure_bound(problem, fixed)

    def structure_floors(self, problem: Problem, names: tuple[str, ...]) -> np.ndarray:
        params = [p for n in names for p in self.space(problem).params if p.name == n]
        keys = list(itertools.product(*(p.choices for p in params)))
        exact = np.array([BoundedFake.structure_bound(self, problem, dict(zip(names, k, strict=True))) for k in keys])
        rng = np.random.default_rng(len(keys))
        factor = np.where(rng.random(len(keys)) < 1 / 3, 1.0, rng.uniform(0.5, 1.0, len(keys)))
        return (exact * factor).reshape([len(p.choices) for p in params])


@pytest.mark.parametrize(
    ("target", "problem", "inner"),
    [(FlooredFake(), P, 8), (get_target("ascend-910b"), TINY_CONV, 2048), (get_target("ascend-a5"), TINY_GEMM, 256)],
    ids=["fake", "ascend-910b", "ascend-a5"],
)
@pytest.mark.parametrize("warm", [False, True], ids=["ordered", "warm-starts"])
def test_floors_keep_the_order_of_the_exact_bounds(
    monkeypatch: pytest.MonkeyPatch, target: Any, problem: Problem, inner: int, warm: bool
) -> None:
    """`Floored`: the same structures scored in the same order, the same answer and certificate as bounding
    every structure exactly first; fewer exact bounds."""
    seen = _visits(monkeypatch)
    s = SearchSettings(inner_points=inner, warm_start=warm)
    exact = run(BestFirst(inner, floors=False), problem, target, s)
    order = list(seen)
    seen.clear()
    if isinstance(target, FlooredFake):
        target.exact = 0
    floored = run(BestFirst(inner), problem, target, s)
    assert seen == order and order  # Ascend's exact bounds leave one structure to score when nothing ties
    assert floored.point == exact.point and floored.values == exact.values and floored.trace == exact.trace
    assert floored.counts == exact.counts and floored.certificate == exact.certificate
    assert floored.proven_optimal and floored.certificate.pruned_by_bound > 0
    assert any("whose floor came first" in n for n in floored.notes)
    if isinstance(target, FlooredFake):
        assert 0 < target.exact < floored.certificate.structures_total and len(order) > 1
