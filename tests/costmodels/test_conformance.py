"""Conformance suite: every registered target obeys the Target protocol's promises.

For each preset and a set of representative problems (small enough to enumerate):
- the space is finite and non-empty, and every point maps to a loop nest that covers the
  iteration space exactly once (costmodels.ir.coverage_errors);
- costs are finite and non-negative, and never below the target's roofline lower bound;
- `score_batch` agrees with `check` and `cost` point by point (feasibility, latency and energy), and
  `score_codes` (the mapper's path: choice indices) agrees with `score_batch` on every objective;
- the best mapping validates in the executor against the numpy reference;
- an infeasible point's violations carry a code and a message that says what to do.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from costmodels.ir import coverage_errors
from costmodels.protocol import CostReport, SearchSpace, Target
from costmodels.registry import get_target, target_names
from tests.enumerable import random_subgrid
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = target_names()
MAX_POINTS = 4000
#: points of each space checked one by one against check/cost (each preset its own sample: `_rng`)
COVER_POINTS, AGREE_POINTS = 60, 75
#: spaces up to this many points are scanned whole for infeasible points; larger ones by a random sample
SCAN_POINTS = 400_000


def _problems() -> dict[str, Problem]:
    return {
        "gemm": einsum("mk,kn->mn", {"m": 256, "k": 192, "n": 320}, dtype="bf16", weight=1),
        "bmm": einsum("vmk,vnk->vmn", {"v": 8, "m": 64, "n": 48, "k": 96}, dtype="bf16", weight=1),
        "conv": conv2d(batch=1, in_channels=32, out_channels=64, input_height=16, input_width=16, kernel=3, padding=1),
        "int8": einsum("mk,kn->mn", {"m": 64, "k": 128, "n": 64}, dtype="i8", weight=1),
    }


PROBLEMS = _problems()


def _points(space: SearchSpace, rng: np.random.Generator) -> list[dict[str, object]]:
    cols = space.columns() if space.size <= MAX_POINTS else None
    names = space.names()
    if cols is not None:
        n = len(next(iter(cols.values()))) if cols else 1
        idx = np.arange(n) if n <= 400 else rng.choice(n, size=400, replace=False)
        return [{k: _py(cols[k][i]) for k in names} for i in idx]
    return [{p.name: _py(p.choices[rng.integers(len(p.choices))]) for p in space.params} for _ in range(400)]


def _rng(target: Target, seed: int) -> np.random.Generator:
    """Each preset its own random points: the two presets of a family (alike spaces) check different ones."""
    return np.random.default_rng((seed, PRESETS.index(target.name)))


def _py(v: object) -> object:
    return v.item() if isinstance(v, np.generic) else v


def _supported(target: Target, problem: Problem) -> bool:
    return not target.supports(problem)


def _problem_or_skip(target: Target, pname: str) -> Problem:
    """The named conformance problem; the test skips, visibly, where the target does not support it."""
    problem = PROBLEMS[pname]
    if not _supported(target, problem):
        pytest.skip(f"{target.name} does not support {pname} (reasons checked in test_unsupported_problem_reasons)")
    return problem


@pytest.fixture(scope="module", params=PRESETS)
def target(request: pytest.FixtureRequest) -> Target:
    return get_target(request.param)


def test_every_family_has_presets() -> None:
    from costmodels.presets import preset_family

    families = {preset_family(p) for p in PRESETS}
    assert families == {"rngd", "trainium", "ascend", "tenstorrent"}
    assert {"rngd", "trn1", "trn2", "ascend-910b", "ascend-a5", "wormhole-n150", "blackhole-p150"} <= set(PRESETS)


def test_target_satisfies_protocol(target: Target) -> None:
    assert isinstance(target, Target)
    assert "latency" in target.objectives and "energy" in target.objectives


@pytest.mark.parametrize("pname", list(PROBLEMS))
def test_points_cover_space_and_cost_above_bound(target: Target, pname: str) -> None:
    problem = _problem_or_skip(target, pname)
    space = target.space(problem)
    assert space.size >= 1
    bound = target.lower_bound(problem)
    assert bound.cycles > 0 and math.isfinite(bound.cycles)
    feasible = 0
    for point in _points(space, _rng(target, 0))[:COVER_POINTS]:
        mapping = target.mapping(problem, point)
        assert coverage_errors(problem, mapping) == [], point
        violations = target.check(problem, mapping)
        if violations:
            assert all(v.code and len(v.message) > 10 for v in violations)
            continue
        feasible += 1
        report = target.cost(problem, mapping)
        assert isinstance(report, CostReport)
        assert math.isfinite(report.cycles) and report.cycles > 0
        assert report.cycles >= bound.cycles * (1 - 1e-9), (point, report.cycles, bound.cycles)
        assert report.lower_bound_cycles == pytest.approx(bound.cycles)
        assert 0 <= report.utilization <= 1
        assert all(v >= 0 and math.isfinite(v) for v in report.bytes.values())
        assert all(v >= 0 and math.isfinite(v) for v in report.breakdown.values())
    assert feasible > 0, f"no feasible point among the sampled points of {target.name} for {pname}"


@pytest.mark.parametrize("pname", list(PROBLEMS))
def test_score_batch_agrees_with_check_and_cost(target: Target, pname: str) -> None:
    problem = _problem_or_skip(target, pname)
    space = target.space(problem)
    points = _points(space, _rng(target, 1))[:AGREE_POINTS]
    cols = {name: np.asarray([p[name] for p in points], dtype=object) for name in space.names()}
    cols = {k: (v.astype(type(v[0])) if len({type(x) for x in v}) == 1 else v) for k, v in cols.items()}
    score = target.score_batch(problem, cols)
    feas = np.asarray(score.feasible, dtype=bool)
    lat = np.asarray(score.objectives["latency"], dtype=float)
    energy = np.asarray(score.objectives["energy"], dtype=float)
    assert feas.shape == (len(points),) and lat.shape == (len(points),) and energy.shape == (len(points),)
    for i, point in enumerate(points):
        mapping = target.mapping(problem, point)
        ok = not target.check(problem, mapping)
        assert bool(feas[i]) == ok, (point, target.check(problem, mapping))
        if ok:
            report = target.cost(problem, mapping)
            assert lat[i] == pytest.approx(report.seconds, rel=1e-9)
            assert report.energy_pj is not None and energy[i] == pytest.approx(report.energy_pj, rel=1e-9)
            assert sum(report.energy_breakdown.values()) == pytest.approx(report.energy_pj, rel=1e-12)
            assert sum(report.stall_stack.values()) == pytest.approx(report.cycles, rel=1e-9)
            for level, ops in report.operand_bytes.items():
                assert sum(ops.values()) == pytest.approx(report.bytes[level], rel=1e-9, abs=1e-6), level
        else:
            assert math.isinf(lat[i]) and math.isinf(energy[i])


@pytest.mark.parametrize("pname", list(PROBLEMS))
def test_score_codes_equals_score_batch(target: Target, pname: str) -> None:
    """The mapper's code columns score exactly as the value columns, in any order and any chunk."""
    from costmodels.choice_codes import SpaceCoder

    problem = _problem_or_skip(target, pname)
    space = target.space(problem)
    coder = SpaceCoder(space)
    rng = np.random.default_rng(2)
    if space.size <= SCAN_POINTS:
        order = rng.permutation(space.size)[:200_000]
        digits = np.unravel_index(order, tuple(len(p.choices) for p in space.params))
        codes = {p.name: d.astype(np.intp) for p, d in zip(space.params, digits, strict=True)}
    else:  # a random sub-grid in a random order (a permutation of 1e8+ codes would not fit)
        grid = random_subgrid(space, rng, SCAN_POINTS)
        order = rng.permutation(len(next(iter(grid.values()))))
        codes = {k: v[order] for k, v in grid.items()}
    by_codes = target.score_codes(problem, codes)
    by_values = target.score_batch(problem, coder.decode(codes))
    assert np.array_equal(np.asarray(by_codes.feasible, bool), np.asarray(by_values.feasible, bool))
    assert np.asarray(by_codes.feasible, bool).any(), f"no feasible point for {pname} on {target.name}"
    for name in target.objectives:
        if name in by_values.objectives:
            assert np.array_equal(by_codes.objectives[name], by_values.objectives[name]), name
    part = target.score_codes(problem, {k: v[17:29] for k, v in codes.items()})  # a small chunk alone
    assert np.array_equal(part.objectives["latency"], np.asarray(by_values.objectives["latency"])[17:29])


def test_infeasible_points_are_found_and_explained(target: Target) -> None:
    """Every preset rules some points out on these problems, and says why for each one it rules out.

    The infeasible points are found with the scorer over the whole space, or over a random sub-grid of
    `SCAN_POINTS` points of a larger one (Trainium's every tile count: 1e8 points and more), since the sampled points
    of the tests above may all be feasible; then a spread of them is checked one by one.
    """
    from costmodels.choice_codes import SpaceCoder

    rules: set[str] = set()
    rng = np.random.default_rng(7)
    for problem in PROBLEMS.values():
        if not _supported(target, problem):
            continue
        space = target.space(problem)
        if space.size <= SCAN_POINTS:
            codes = {k: v.astype(np.intp) for k, v in SpaceCoder(space).encode(space.columns())[0].items()}
        else:
            codes = random_subgrid(space, rng, SCAN_POINTS)
        bad = np.flatnonzero(~np.asarray(target.score_codes(problem, codes).feasible, dtype=bool))
        for i in bad[:: max(1, bad.size // 25)][:25]:
            point = {p.name: p.choices[int(codes[p.name][i])] for p in space.params}
            violations = target.check(problem, target.mapping(problem, point))
            assert violations, f"the scorer rules out {point} but check finds nothing wrong"
            for v in violations:
                assert v.code and len(v.message) > 20, v
                rules.add(v.code)
    assert rules, f"no constraint of {target.name} trips on any conformance problem: its messages go untested"


@pytest.mark.parametrize("pname", list(PROBLEMS))
def test_unsupported_problem_reasons(target: Target, pname: str) -> None:
    """A problem a target cannot run is refused with coded reasons that say what to do; its space is not asked for."""
    reasons = target.supports(PROBLEMS[pname])
    for v in reasons:
        assert v.code and len(v.message) > 20, v
    if pname in ("gemm", "bmm", "conv"):
        assert reasons == [], f"{target.name} must support the bf16 {pname}"


def test_best_mapping_validates_in_executor(target: Target) -> None:
    validate = pytest.importorskip("executor.validate").validate
    problem = einsum("mk,kn->mn", {"m": 96, "k": 160, "n": 80}, dtype="bf16", weight=1)
    if not _supported(target, problem):
        problem = einsum("mk,kn->mn", {"m": 96, "k": 160, "n": 80}, dtype="f16", weight=1)
    assert _supported(target, problem)
    space = target.space(problem)
    if space.size <= 1_000_000:
        cols = space.columns()
        score = target.score_batch(problem, cols)
        lat = np.where(np.asarray(score.feasible, bool), np.asarray(score.objectives["latency"], float), np.inf)
        best = int(np.argmin(lat))
        assert math.isfinite(lat[best])
        point = {k: _py(cols[k][best]) for k in space.names()}
    else:  # too many points for one batch here: the mapper's answer, searched by structures
        from mapper import SearchSettings, tune

        found = tune(problem, target, SearchSettings(seed=0), validate=False)
        assert found.point is not None, found.notes
        point = dict(found.point)
    report = validate(problem, target.mapping(problem, point), seed=0)
    assert report.passed, report
