"""The mapper's search: warm starts, exact enumeration, determinism, budgets, constraints, Pareto fronts.

Run against `FakeMatmulTarget` (a test double of the Target protocol) so the behaviour of the
search is tested independently of any accelerator model.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from costmodels.choice_codes import SpaceCoder
from costmodels.protocol import BatchScore
from mapper.enumerate import ChunkPlan, chunk_codes, enumerate_space, product_codes, subspace_codes
from mapper.pareto import pareto_mask
from mapper.result import TuneResult
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import split_params
from tests.mapper.fake_target import FakeMatmulTarget, matmul
from workload.errors import ProblemError
from workload.problem import Problem


class SpyTarget(FakeMatmulTarget):
    """Records every batch it scores (and can be made slow)."""

    def __init__(self, delay: float = 0.0, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.calls: list[dict[str, np.ndarray]] = []
        self.delay = delay

    def score_batch(self, problem: Problem, columns: dict[str, np.ndarray]) -> BatchScore:
        self.calls.append(columns)
        if self.delay:
            time.sleep(self.delay)
        return super().score_batch(problem, columns)


def brute_force(t: FakeMatmulTarget, p: Problem, objective: str = "latency") -> tuple[float, list[dict]]:
    """Scalar check()/cost() over every point: the optimum and the feasible points."""
    cols = t.space(p).columns()
    best, feasible = math.inf, []
    for i in range(len(cols["tm"])):
        pt = {k: v[i].item() for k, v in cols.items()}
        m = t.mapping(p, pt)
        if not t.check(p, m):
            feasible.append(pt)
            best = min(best, t.cost(p, m).objective(objective))
    return best, feasible


P = matmul(1024, 512, 2048)
Q = matmul(256, 128, 512)  # small enough to brute-force with scalar check()/cost()


def test_warm_start_is_evaluated_first() -> None:
    t = SpyTarget()
    warm = t.warm_starts(P)[0]
    tune(P, t, SearchSettings(strategy="random", inner_points=0, max_trials=5), validate=False)
    first = {k: v[0].item() for k, v in t.calls[0].items()}
    assert first == warm
    # without warm start the random sampler starts elsewhere (seed 0)
    t2 = SpyTarget()
    tune(P, t2, SearchSettings(strategy="random", inner_points=0, max_trials=5, warm_start=False), validate=False)
    assert {k: v[0].item() for k, v in t2.calls[0].items()} != warm


def test_warm_start_outside_the_space_is_skipped_with_a_note() -> None:
    r = tune(P, FakeMatmulTarget(), SearchSettings(strategy="tpe", max_trials=3), validate=False)
    assert any("warm start 1" in n for n in r.notes)  # the double's second warm start has tm=10**6


def test_exhaustive_is_proven_optimal_and_equals_brute_force() -> None:
    t = FakeMatmulTarget()
    r = tune(Q, t, SearchSettings(), validate=False)
    best, feasible = brute_force(t, Q)
    assert r.strategy == "exhaustive" and r.stop_reason == "enumerated" and r.proven_optimal
    assert r.values["latency"] == pytest.approx(best, rel=1e-12)
    assert r.counts.points_scored == t.space(Q).size and r.counts.feasible_points == len(feasible)
    assert r.cost is not None and r.cost.cycles >= r.lower_bound.cycles and r.gap is not None and r.gap >= 0


def test_chunked_enumeration_matches_one_batch() -> None:
    t = FakeMatmulTarget()
    space = t.space(P)
    whole = enumerate_space(t, P, space, ("latency",), chunk=space.size)
    chunked = enumerate_space(t, P, space, ("latency",), chunk=37)
    assert chunked.best == whole.best and chunked.best_values == whole.best_values
    steps = np.diff([0, *chunked.trace_points])
    assert chunked.trace_points[-1] == space.size and len(steps) > space.size // 37 and steps.max() <= 37
    cols, part = space.columns(), SpaceCoder(space).decode(chunk_codes(space, 40, 77))
    assert all(np.array_equal(cols[k][40:77], part[k]) for k in cols)


@pytest.mark.parametrize(("chunk", "block_limit"), [(37, None), (100, 10), (1 << 18, 64), (1, None)])
def test_chunk_plan_rebuilds_the_columns_in_order(chunk: int, block_limit: int | None) -> None:
    space = FakeMatmulTarget().space(P)
    plan = ChunkPlan(space, chunk, block_limit)
    decode = SpaceCoder(space).decode
    parts = [decode(plan.codes(b0, b1)) for b0, b1 in plan.bounds()]
    whole = space.columns()
    assert all(np.array_equal(np.concatenate([c[k] for c in parts]), whole[k]) for k in whole)
    assert all(len(c["tm"]) <= max(chunk, plan.block) for c in parts)


@pytest.mark.parametrize("shape", [(3, 1, 4, 2), (1,), (5, 7), (2, 1, 1)])
def test_product_codes_number_every_point_in_c_order(shape: tuple[int, ...]) -> None:
    cols = product_codes(shape)
    expected = np.unravel_index(np.arange(math.prod(shape)), shape)
    assert all(np.array_equal(c, e) for c, e in zip(cols, expected, strict=True))
    assert all(not c.flags.writeable for c in cols)  # shared by every space of this shape
    assert product_codes(shape) is cols


def test_chunk_codes_are_read_only_for_the_scorer() -> None:
    space = FakeMatmulTarget().space(P)
    plan = ChunkPlan(space, 64, block_limit=8)  # chunks of several blocks: repeated, tiled and constant columns
    assert plan.per_chunk > 1
    for b0, b1 in plan.bounds()[:3]:
        for col in plan.codes(b0, b1).values():
            with pytest.raises(ValueError, match="read-only"):
                col[0] = 1


def test_subspace_codes_hold_the_fixed_choices_and_vary_the_inner_ones() -> None:
    space = FakeMatmulTarget().space(P)
    sizes = {p.name: len(p.choices) for p in space.params}
    fixed = {name: size - 1 for name, size in sizes.items()}
    codes = subspace_codes(space, fixed, ("tn", "tk"))
    assert len(codes["tm"]) == sizes["tn"] * sizes["tk"]
    assert set(codes["tm"].tolist()) == {fixed["tm"]} and set(codes["stationary"].tolist()) == {fixed["stationary"]}
    pairs = set(zip(codes["tn"].tolist(), codes["tk"].tolist(), strict=True))
    assert len(pairs) == sizes["tn"] * sizes["tk"]  # every inner combination once
    inner = [p.name for p in space.params if p.name in ("tn", "tk")]  # in C order over them, the space's order
    expect = np.unravel_index(np.arange(len(codes["tm"])), tuple(sizes[n] for n in inner))
    assert all(np.array_equal(codes[n], e) for n, e in zip(inner, expect, strict=True))
    # each column its own contiguous array (a gather from a strided view copies the whole column first)
    assert all(c.flags.c_contiguous for c in codes.values())
    assert all(c.flags.c_contiguous for c in chunk_codes(space, 3, 40).values())


@pytest.mark.parametrize("strategy", ["tpe", "bestfirst"])
def test_the_result_says_how_many_points_a_trial_scored(strategy: str) -> None:
    """`inner_points` is the sub-space each trial or structure scored (the certificate's), not the cap asked for."""
    t = FakeMatmulTarget()
    space = t.space(P)
    cap = 100
    _, inner = split_params(space, cap)
    size = math.prod(len(p.choices) for p in inner)
    assert size < cap  # (else the test could not tell the two apart)
    r = tune(P, t, SearchSettings(strategy=strategy, inner_points=cap, max_trials=5), validate=False)
    assert r.inner_points == size == r.certificate.inner_points
    assert r.counts.points_scored <= r.counts.trials * size


def test_tpe_with_subspaces_exhausts_structure_and_proves_optimum() -> None:
    t = FakeMatmulTarget()
    r = tune(Q, t, SearchSettings(strategy="tpe", max_trials=50), validate=False)
    assert r.stop_reason == "space-exhausted" and r.proven_optimal
    assert r.values["latency"] == pytest.approx(brute_force(t, Q)[0], rel=1e-12)
    assert r.counts.trials < 50


def test_same_seed_same_answer() -> None:
    s = SearchSettings(strategy="tpe", inner_points=0, max_trials=40, seed=7)
    a = tune(P, FakeMatmulTarget(), s, validate=False)
    b = tune(P, FakeMatmulTarget(), s, validate=False)
    assert a.point == b.point and a.trace == b.trace and a.counts == b.counts


def test_trial_budget_stops_the_search() -> None:
    r = tune(P, FakeMatmulTarget(), SearchSettings(strategy="random", inner_points=0, max_trials=7), validate=False)
    assert r.counts.trials == 7 and r.stop_reason == "trials" and not r.proven_optimal and len(r.trace) == 7


def test_time_budget_stops_the_search() -> None:
    t = SpyTarget(delay=0.02)
    s = SearchSettings(strategy="random", inner_points=0, max_trials=10_000, max_seconds=0.2)
    r = tune(P, t, s, validate=False)
    assert r.stop_reason == "seconds" and r.counts.trials < 100 and r.seconds < 1.0


def test_time_budget_stops_enumeration_unproven() -> None:
    t = SpyTarget(delay=0.05)
    s = SearchSettings(strategy="exhaustive", max_seconds=0.01, chunk=100)
    r = tune(P, t, s, validate=False)
    assert r.stop_reason == "seconds" and not r.proven_optimal and 0 < r.counts.points_scored <= 100


def test_infeasible_trials_carry_their_reasons() -> None:
    r = tune(P, FakeMatmulTarget(), SearchSettings(strategy="random", inner_points=0, max_trials=80), validate=False)
    c = r.counts
    assert c.infeasible > 0 and c.complete + c.infeasible + c.duplicates == c.trials
    codes = {v.code for v in r.counts.top_violations}
    assert codes and codes <= {"sram-capacity", "tk-limit"}
    assert all(v.message and v.count > 0 for v in r.counts.top_violations)


def test_no_feasible_point_explains_why() -> None:
    t = FakeMatmulTarget(sram_bytes=16)  # no tile fits
    for strategy in ("auto", "tpe"):
        r = tune(P, t, SearchSettings(strategy=strategy, max_trials=5), validate=False)
        assert r.mapping is None and not r.proven_optimal
        assert "sram-capacity" in {v.code for v in r.counts.top_violations}


def test_pareto_front_is_non_dominated_and_priced_right() -> None:
    t = FakeMatmulTarget()
    objs = ("latency", "footprint")
    r = tune(P, t, SearchSettings(strategy="nsga2", objectives=objs, max_trials=80), validate=False)
    vals = np.array([[p.values[o] for o in objs] for p in r.pareto])
    assert len(r.pareto) >= 2 and pareto_mask(vals).all()
    for p in r.pareto:
        cost = t.cost(P, t.mapping(P, p.point))
        assert [cost.objective(o) for o in objs] == pytest.approx([p.values[o] for o in objs], rel=1e-12)


def test_exhaustive_pareto_front_equals_brute_force_front() -> None:
    t = FakeMatmulTarget()
    objs = ("latency", "footprint")
    r = tune(Q, t, SearchSettings(objectives=objs), validate=False)
    _, feasible = brute_force(t, Q)
    allv = np.array([[t.cost(Q, t.mapping(Q, pt)).objective(o) for o in objs] for pt in feasible])
    expected = {tuple(v) for v in allv[pareto_mask(allv)]}
    assert {tuple(p.values[o] for o in objs) for p in r.pareto} == expected and r.proven_optimal


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cmaes_comes_within_5_percent_of_the_enumerated_optimum(seed: int) -> None:
    """30 one-point trials (3% of the 896-point space) reach a feasible mapping within 5% of the optimum."""
    t = FakeMatmulTarget()
    best = tune(P, t, SearchSettings(strategy="exhaustive"), validate=False)
    assert best.proven_optimal and best.cost is not None
    r = tune(P, t, SearchSettings(strategy="cmaes", inner_points=0, max_trials=30, seed=seed), validate=False)
    assert r.strategy == "cmaes" and r.mapping is not None and r.cost is not None
    assert r.counts.trials <= 30 and t.check(P, r.mapping) == []
    assert best.cost.seconds <= r.cost.seconds <= 1.05 * best.cost.seconds


def test_unpriced_objective_and_unsupported_problem_are_rejected() -> None:
    class Narrow(FakeMatmulTarget):
        objectives = ("latency",)

    with pytest.raises(ProblemError, match="no footprint model"):
        tune(P, Narrow(), SearchSettings(objectives=("footprint",)))
    from workload.einsum import einsum

    with pytest.raises(ProblemError, match="cannot run this problem"):
        tune(einsum("ij->i", {"i": 8, "j": 8}, dtype="f32"), FakeMatmulTarget())
    from costmodels.registry import get_target

    with pytest.raises(ProblemError) as refused:  # every reason at once: fixing the first alone meets the next
        tune(einsum("mk,kn->mn", {"m": 4, "k": 4, "n": 4}, dtype="i4", reduce_op="min"), get_target("trn1"))
    said = str(refused.value)
    assert "use reduce op add" in said and "input A is i4" in said and "input B is i4" in said, said


def test_split_keeps_categoricals_structural_and_bounds_the_subspace() -> None:
    space = FakeMatmulTarget().space(P)
    structural, inner = split_params(space, 100)
    assert "stationary" in {p.name for p in structural}
    assert math.prod(len(p.choices) for p in inner) <= 100 and inner


def test_result_round_trips_through_json() -> None:
    r = tune(P, FakeMatmulTarget(), SearchSettings(strategy="tpe", max_trials=5), validate=False)
    assert TuneResult.model_validate_json(r.model_dump_json()) == r


def test_pareto_mask_matches_definition() -> None:
    rng = np.random.default_rng(0)
    v = rng.integers(0, 6, size=(60, 2)).astype(float)
    mask = pareto_mask(v)
    for i in range(len(v)):
        dominated = any(np.all(v[j] <= v[i]) and np.any(v[j] < v[i]) for j in range(len(v)))
        assert mask[i] == (not dominated)


def test_every_strategy_name_is_a_strategy_class() -> None:
    """`auto` plans; every other name is the enumeration, best-first or an Optuna sampler of the table."""
    from mapper.settings import STRATEGIES
    from mapper.strategies import SAMPLERS, BestFirst, Enumeration, OptunaStudy, Strategy, strategy_for

    assert set(STRATEGIES) == {"auto", Enumeration.name, BestFirst.name, *SAMPLERS}
    classes = {"exhaustive": Enumeration, "bestfirst": BestFirst}
    for name in STRATEGIES[1:]:
        s = strategy_for(name)
        assert isinstance(s, Strategy) and s.name == name
        assert isinstance(s, classes.get(name, OptunaStudy))
    with pytest.raises(ValueError, match="no Optuna sampler"):
        strategy_for("annealing")


def test_only_objectives_some_target_prices_are_offered() -> None:
    """Issue #12: the objectives offered are those the targets price; issue #15: every target prices
    ``energy`` now, so it is offered (it was refused while no target priced it)."""
    from pydantic import ValidationError

    from costmodels.registry import get_target, target_names
    from mapper.settings import OBJECTIVES

    priced = {o for name in target_names() for o in get_target(name).objectives}
    assert set(OBJECTIVES) == priced and "energy" in OBJECTIVES and "latency" in OBJECTIVES
    assert all("energy" in get_target(name).objectives for name in target_names())
    assert SearchSettings(objectives=("latency", "energy")).objectives == ("latency", "energy")
    with pytest.raises(ValidationError, match="unknown objective 'speed'"):
        SearchSettings(objectives=("speed",))


def test_ruled_out_counts_real_violating_points_not_the_first_point_times_the_space() -> None:
    """Issue #12: an all-infeasible space counts the points that violate each code, and says it is a sample."""

    class HalfTk(FakeMatmulTarget):  # capacity rules out everything; the K limit only the large tk half
        pass

    t = HalfTk(sram_bytes=16, max_tk=64)
    space = t.space(P)
    r = tune(P, t, SearchSettings(strategy="exhaustive"), validate=False)
    by_code = {v.code: v for v in r.counts.top_violations}
    assert r.mapping is None and set(by_code) == {"sram-capacity", "tk-limit"}
    sram, tk = by_code["sram-capacity"], by_code["tk-limit"]
    assert sram.unit == tk.unit == "points" and sram.examined == tk.examined == 64 < space.size
    assert sram.count == 64 and 0 < tk.count < 64  # not 896 each: real points of the sample
    assert "a sample: 64 points spread evenly over the 896" in sram.message
    tk_share = sum(c > 64 for c in space.params[3].choices) / len(space.params[3].choices)
    assert abs(tk.count / 64 - tk_share) < 0.2  # the sample is spread evenly: about the true share
    small = tune(matmul(16, 16, 16), HalfTk(sram_bytes=16), SearchSettings(strategy="exhaustive"), validate=False)
    (only,) = small.counts.top_violations
    assert only.examined == only.count == t.space(matmul(16, 16, 16)).size and "all 16 points checked" in only.message


def test_trial_counts_say_they_count_trials() -> None:
    r = tune(
        P, FakeMatmulTarget(sram_bytes=16), SearchSettings(strategy="tpe", inner_points=8, max_trials=5), validate=False
    )
    v = {v.code: v for v in r.counts.top_violations}["sram-capacity"]
    c = r.counts  # a trial that proposed a structure already scored is not scored again, nor counted as infeasible
    assert v.unit == "trials" and v.count == c.infeasible == c.trials - c.duplicates and c.trials == 5
    assert "trials whose whole sub-space" in v.message
    assert all(0 < w.count <= 5 and w.examined == 4 for w in r.counts.top_violations)
