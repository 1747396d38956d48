"""Branch and bound and its certificate (issue #12): admissible structure bounds, pruning, the proof.

Admissibility is tested where it matters, on every preset: no structure's true optimum (its whole
sub-space scored) is below its bound. The GEMM and the convolution alternate over the presets (`cover`),
so each preset meets one problem per admissibility test and the other in the other test. The pruning
machinery is tested on the fake target with a structure bound hook (`BoundedFake`), since the generic
bound prunes only once the roofline is met.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from costmodels.protocol import Choice
from costmodels.registry import get_target, target_names
from costmodels.structure_bound import StructureBounded
from mapper.bounds import FrontBounds, StructureBounds, objective_floor
from mapper.certificate import certify
from mapper.enumerate import ChunkPlan, subspace_codes
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import split_params
from tests.enumerable import enumerable_target, random_subgrid
from tests.mapper.fake_target import FakeMatmulTarget, matmul
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

P = matmul(1024, 512, 2048)  # 896 points
GEMM = einsum("mk,kn->mn", {"m": 64, "k": 128, "n": 96}, weight=1)
CONV = conv2d(batch=1, in_channels=16, out_channels=32, input_height=8, input_width=8, kernel=3, padding=1)
PROBLEMS = (("gemm", GEMM), ("conv", CONV))
PRESETS = target_names()


def cover(shift: int) -> list[object]:
    """Every preset with one problem, the problems in turn (`shift` 1: the other problem of each preset)."""
    out = []
    for i, preset in enumerate(PRESETS):
        name, problem = PROBLEMS[(i + shift) % len(PROBLEMS)]
        out.append(pytest.param(preset, problem, id=f"{name}-{preset}"))
    return out


def structure_optimum(target: object, problem: Problem, fixed: dict[str, Choice], inner: tuple[str, ...]) -> float:
    """The true optimum (latency) of one structure: its whole sub-space scored."""
    space = target.space(problem)  # type: ignore[attr-defined]
    codes = subspace_codes(
        space, {p.name: p.choices.index(fixed[p.name]) for p in space.params if p.name in fixed}, inner
    )
    score = target.score_codes(problem, codes)  # type: ignore[attr-defined]
    lat = np.where(np.asarray(score.feasible, dtype=bool), np.asarray(score.objectives["latency"]), np.inf)
    return float(lat.min())


class BoundedFake(FakeMatmulTarget):
    """The fake target with a structure bound: its compute term with the fixed tiles applied.

    cycles >= compute = ceil(M/tm) ceil(N/tn) ceil(K/tk) (ceil(tm/pe) ceil(tn/pe) tk + overhead); with
    some tiles unfixed the bound takes the minimum over their choices (admissible by construction).
    """

    def structure_bound(self, problem: Problem, fixed: dict[str, Choice]) -> float:
        hw, a = self.hardware, problem.axes
        sp = {p.name: p.choices for p in self.space(problem).params}
        best = np.inf
        for tm, tn, tk in itertools.product(*([fixed[k]] if k in fixed else sp[k] for k in ("tm", "tn", "tk"))):
            tm, tn, tk = int(tm), int(tn), int(tk)
            per_tile = -(-tm // hw.pe) * -(-tn // hw.pe) * tk + hw.tile_overhead
            best = min(best, -(-a["m"] // tm) * -(-a["n"] // tn) * -(-a["k"] // tk) * per_tile)
        return float(best) / hw.clock_hz


@pytest.mark.parametrize(("preset", "problem"), cover(0))
def test_no_structure_beats_its_bound_on_any_preset(preset: str, problem: Problem) -> None:
    target = enumerable_target(preset)  # the exhaustive tune below scores the whole space
    if target.supports(problem):
        pytest.skip(f"{preset} does not run this problem")
    space = target.space(problem)
    structural, inner = split_params(space, 64)
    names = tuple(p.name for p in inner)
    bounds = StructureBounds(target, problem, "latency")
    r = tune(problem, target, SearchSettings(strategy="exhaustive"), validate=False)
    assert r.point is not None
    bounds.learn_clock(r.point)
    checked = 0
    for key in itertools.islice(itertools.product(*(p.choices for p in structural)), 400):
        fixed = dict(zip((p.name for p in structural), key, strict=True))
        best = structure_optimum(target, problem, fixed, names)
        assert bounds(fixed) <= best * (1 + 1e-12), fixed
        checked += np.isfinite(best)
    assert checked > 0 and bounds.whole() > 0


def test_the_fake_hook_is_admissible_on_every_structure() -> None:
    t = BoundedFake()
    assert isinstance(t, StructureBounded) and not isinstance(FakeMatmulTarget(), StructureBounded)
    space = t.space(P)
    for n_inner in (1, 8, 64):
        structural, inner = split_params(space, n_inner)
        for key in itertools.product(*(p.choices for p in structural)):
            fixed = dict(zip((p.name for p in structural), key, strict=True))
            assert t.structure_bound(P, fixed) <= structure_optimum(t, P, fixed, tuple(p.name for p in inner))


def test_branch_and_bound_prunes_structures_and_proves_the_optimum() -> None:
    t = BoundedFake()
    optimum = tune(P, FakeMatmulTarget(), SearchSettings(strategy="exhaustive"), validate=False)
    s = SearchSettings(strategy="tpe", inner_points=64, max_trials=2000, patience=0, seed=1)
    r = tune(P, t, s, validate=False)
    cert = r.certificate
    assert cert is not None and cert.bound_source == "target.structure_bound"
    assert r.stop_reason == "space-exhausted" and r.proven_optimal and cert.complete and cert.gap_bound == 0
    assert cert.pruned_by_bound > 0 and cert.scored + cert.pruned_by_bound == cert.structures_total
    assert r.counts.pruned_by_bound > 0 and r.counts.points_scored < t.space(P).size  # pruning saved scoring
    c = r.counts
    assert c.complete + c.infeasible + c.pruned_by_bound + c.duplicates == c.trials
    assert r.values == optimum.values
    assert any("proven optimal over the target's search space (896 points)" in n for n in r.notes)


def test_without_a_hook_nothing_is_pruned_before_the_roofline() -> None:
    s = SearchSettings(strategy="tpe", inner_points=64, max_trials=2000, patience=0, seed=1)
    r = tune(P, FakeMatmulTarget(), s, validate=False)
    cert = r.certificate
    assert cert is not None and cert.bound_source.startswith("target.lower_bound")
    assert r.proven_optimal and cert.pruned_by_bound == 0 and cert.scored == cert.structures_total


@pytest.mark.parametrize("target", [BoundedFake(), FakeMatmulTarget()], ids=["hook", "generic"])
def test_a_budget_that_ends_first_says_how_close_the_answer_is(target: FakeMatmulTarget) -> None:
    optimum = tune(P, target, SearchSettings(strategy="exhaustive"), validate=False).values["latency"]
    r = tune(P, target, SearchSettings(strategy="random", inner_points=1, max_trials=15, patience=0), validate=False)
    cert = r.certificate
    assert cert is not None and not cert.complete and not r.proven_optimal and cert.unexplored > 0
    assert cert.best_remaining_bound is not None and cert.best_remaining_bound <= optimum
    assert cert.gap_bound is not None and r.values["latency"] / optimum - 1 <= cert.gap_bound
    assert cert.best == r.values["latency"] and cert.structures_total == t_size(target)
    assert any(f"within {cert.gap_bound:.2%} of the optimum" in n for n in r.notes)


def t_size(target: FakeMatmulTarget) -> int:
    return target.space(P).size


def test_an_enumeration_is_one_structure_and_names_its_space() -> None:
    r = tune(P, FakeMatmulTarget(), SearchSettings(), validate=False)
    cert = r.certificate
    assert r.proven_optimal and cert is not None and cert.complete
    assert (cert.structures_total, cert.scored, cert.inner_points, cert.space_points) == (1, 1, 896, 896)
    assert cert.space.startswith("the target's search space for this problem: 896 points")
    cut = tune(P, FakeMatmulTarget(), SearchSettings(strategy="exhaustive", max_seconds=1e-9, chunk=64), validate=False)
    assert cut.certificate is not None and cut.certificate.unexplored == 1 and not cut.proven_optimal


def test_several_objectives_are_not_pruned_without_a_floor_on_each() -> None:
    """footprint has no floor but 0, so no front point can dominate a structure's bound vector."""
    s = SearchSettings(strategy="tpe", objectives=("latency", "footprint"), inner_points=8, max_trials=300, patience=0)
    r = tune(P, BoundedFake(), s, validate=False)
    assert r.certificate is not None and r.certificate.pruned_by_bound == 0 and r.counts.pruned_by_bound == 0
    assert r.proven_optimal and r.certificate.scored == r.certificate.structures_total


@pytest.mark.parametrize(("preset", "problem"), cover(1))
def test_no_point_moves_fewer_offchip_bytes_than_the_problem_needs(preset: str, problem: Problem) -> None:
    """`objective_floor` (offchip_bytes >= Problem.min_bytes) is admissible: every feasible point of the whole space
    (Trainium's ladder space: its every-tile default is sampled in the test below); each preset on the problem it
    does not meet in the structure-bound test above."""
    target = enumerable_target(preset)
    if target.supports(problem):
        pytest.skip(f"{preset} does not run this problem")
    space = target.space(problem)
    plan = ChunkPlan(space, 1 << 16)
    least = np.inf
    for b0, b1 in plan.bounds():
        score = target.score_codes(problem, plan.codes(b0, b1))
        off = np.where(np.asarray(score.feasible, dtype=bool), np.asarray(score.objectives["offchip_bytes"]), np.inf)
        least = min(least, float(off.min()))
    assert np.isfinite(least) and least >= objective_floor(problem, "offchip_bytes") * (1 - 1e-12)
    assert objective_floor(problem, "footprint") == 0.0


@pytest.mark.parametrize("preset", ["trn1", "trn2"])
def test_no_sampled_point_of_every_tile_count_moves_fewer_offchip_bytes(preset: str) -> None:
    """The floor on Trainium's default space (every tile count, 1e8+ points here): random sub-grids of it."""
    target = get_target(preset)
    assert target.hardware.tile_space == "every"
    rng = np.random.default_rng(11)
    for problem in (GEMM, CONV):
        space = target.space(problem)
        assert space.size > 10_000_000
        least = np.inf
        for _ in range(4):  # one priced sub-grid each
            codes = random_subgrid(space, rng, 200_000)
            score = target.score_codes(problem, codes)
            feasible = np.asarray(score.feasible, dtype=bool)
            least = min(least, float(np.where(feasible, np.asarray(score.objectives["offchip_bytes"]), np.inf).min()))
        assert np.isfinite(least) and least >= objective_floor(problem, "offchip_bytes") * (1 - 1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_two_objectives_prune_dominated_structures_and_keep_the_exact_front(seed: int) -> None:
    objectives = ("latency", "offchip_bytes")
    exact = tune(P, BoundedFake(), SearchSettings(strategy="exhaustive", objectives=objectives), validate=False)
    s = SearchSettings(strategy="tpe", objectives=objectives, inner_points=8, max_trials=2000, patience=0, seed=seed)
    r = tune(P, BoundedFake(), s, validate=False)
    cert = r.certificate
    assert cert is not None and r.proven_optimal and cert.complete and cert.pruned_by_bound > 0
    assert cert.scored + cert.pruned_by_bound == cert.structures_total and r.counts.pruned_by_bound > 0
    assert r.counts.points_scored < BoundedFake().space(P).size  # pruning saved scoring
    assert sorted(tuple(p.values.values()) for p in r.pareto) == sorted(tuple(p.values.values()) for p in exact.pareto)
    assert cert.bound_source.startswith("latency: target.structure_bound")


def test_a_front_that_dominates_the_whole_spaces_bound_stops_the_search() -> None:
    """The front's corner at the roofline and the compulsory bytes bounds every structure out at once."""
    t, objectives = FakeMatmulTarget(), ("latency", "offchip_bytes")
    fb = FrontBounds(t, P, objectives)
    fb.learn_clock(t.warm_starts(P)[0])
    whole = fb.whole()
    assert list(whole) == [fb.latency.whole(), P.min_bytes]  # type: ignore[union-attr]
    assert FrontBounds.dominated(whole, whole[None, :]) and not FrontBounds.dominated(whole, whole[None, :] * 1.01)
    structural, _ = split_params(t.space(P), 8)
    corner = certify(
        t.space(P), StructureBounds(t, P, "latency"), structural, scored=set(), pruned=set(), best=None,
        prune=False, front=whole[None, :], front_bounds=fb,
    )  # fmt: skip
    assert corner.complete and corner.pruned_by_bound == corner.structures_total
    above = certify(
        t.space(P), StructureBounds(t, P, "latency"), structural, scored=set(), pruned=set(), best=None,
        prune=False, front=whole[None, :] * 1.01, front_bounds=fb,
    )  # fmt: skip
    assert above.unexplored == above.structures_total


def test_certify_counts_add_up_and_the_generic_bound_bounds_out_everything_at_the_roofline() -> None:
    t = FakeMatmulTarget()
    space = t.space(P)
    structural, _ = split_params(space, 8)
    bounds = StructureBounds(t, P, "latency")
    bounds.learn_clock(t.warm_starts(P)[0])
    at_roofline = certify(space, bounds, structural, scored=set(), pruned=set(), best=bounds.whole())
    assert at_roofline.complete and at_roofline.pruned_by_bound == at_roofline.structures_total
    above = certify(space, bounds, structural, scored=set(), pruned=set(), best=2 * bounds.whole())
    assert above.unexplored == above.structures_total and above.gap_bound == pytest.approx(1.0)


def test_a_front_shares_the_searchs_latency_bounds_and_their_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Best-first's front bounds take its latency bounds (one clock learnt, from one cost report, not two), and
    refuse bounds of another objective."""
    t = FakeMatmulTarget()
    with pytest.raises(ValueError, match="latency"):
        FrontBounds(t, P, ("latency", "offchip_bytes"), latency=StructureBounds(t, P, "offchip_bytes"))
    learnt: list[int] = []  # the bounds objects that priced a report for their clock
    learn = StructureBounds.learn_clock

    def counted(self: StructureBounds, point: dict[str, Choice]) -> None:
        if self._clock is None:
            learnt.append(id(self))
        learn(self, point)

    monkeypatch.setattr(StructureBounds, "learn_clock", counted)
    r = tune(P, t, SearchSettings(strategy="bestfirst", objectives=("latency", "offchip_bytes")), validate=False)
    assert r.proven_optimal and len(r.pareto) >= 1
    assert len(set(learnt)) == len(learnt) == 1
