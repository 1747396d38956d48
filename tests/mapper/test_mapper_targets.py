"""The mapper on the real targets with the real executor: every preset, the library call and the CLI.

Small problems and budgets keep this fast; each search's answer is checked against an independent
scoring of the whole space (``SearchSpace.columns()`` through ``score_batch``, a slab per choice of one
parameter), and the best
mapping must pass the executor's validation.
"""

from __future__ import annotations

import itertools
import json
import math
import time

import numpy as np
import optuna
import pytest
from typer.testing import CliRunner

from app.cli import app
from costmodels.registry import FAMILIES, get_target, target_names
from mapper.cache import tune_cached
from mapper.keys import cost_model_version, problem_hash
from mapper.planning import DEFAULT_INNER
from mapper.result import TuneResult
from mapper.search import tune, tune_as_given
from mapper.settings import SearchSettings
from mapper.strategies import split_params
from tests.enumerable import narrowed
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = target_names()
GEMM = einsum("mk,kn->mn", {"m": 64, "k": 128, "n": 96}, weight=1)
CONV = conv2d(batch=1, in_channels=16, out_channels=32, input_height=8, input_width=8, kernel=3, padding=1)
SMALL = SearchSettings(max_trials=12, max_seconds=10)
runner = CliRunner()


#: spaces up to this many points are scored whole here; larger ones (Trainium's every tile count) are not
WHOLE = 4_000_000


_OPTIMA: dict[tuple[str, str], float] = {}


def space_optimum(preset: str, problem: Problem) -> float:
    """`whole_space_optimum`, once per preset and problem."""
    key = (preset, problem_hash(problem))
    if key not in _OPTIMA:
        _OPTIMA[key] = whole_space_optimum(preset, problem)
    return _OPTIMA[key]


def whole_space_optimum(preset: str, problem: Problem) -> float:
    """Best latency over the whole space: scored from `SearchSpace.columns()` up to `WHOLE` points, in one
    batch per choice of the parameter with the most choices (each batch that sub-space's columns: together
    every point once, and the encoding of a long string column is not sorted whole); above, best-first's
    proof over the whole space on a fresh target (Trainium's 64x128x96 GEMM has 1.3e8 to 5.1e8 points, too
    many to hold as columns). That proof's bound is checked against
    enumeration in tests/costmodels/test_structure_bounds.py and test_trainium_tile_bounds.py."""
    target = get_target(preset)
    if target.space(problem).size > WHOLE:
        proof = tune_as_given(problem, target, SearchSettings(strategy="bestfirst", max_seconds=120), validate=False)
        value = proof.best_value("latency")
        assert proof.proven_optimal and value is not None, proof.stop_reason
        return value
    space = target.space(problem)
    widest = max(range(len(space.params)), key=lambda i: len(space.params[i].choices))
    best, scored = math.inf, 0
    wide = space.params[widest]
    for choice in wide.choices:
        score = target.score_batch(problem, narrowed(space, {wide.name: (choice,)}).columns())
        lat = np.where(np.asarray(score.feasible, dtype=bool), np.asarray(score.objectives["latency"]), np.inf)
        best, scored = min(best, float(lat.min())), scored + lat.size
    assert scored == space.size
    return best


def assert_complete_result(r: TuneResult, preset: str, problem: Problem) -> None:
    """Everything issue 6 lists is present and consistent, and the executor validated the answer."""
    target = get_target(preset)
    assert r.target == preset and r.family == target.family and r.problem_hash
    assert r.mapping is not None and r.point is not None and r.cost is not None
    assert r.validation_passed is True and r.validation is not None and r.validation["passed"] is True
    # cost report, bound and gap agree with the target's own check/cost of the returned mapping
    assert target.check(problem, r.mapping) == []
    assert r.cost == target.cost(problem, r.mapping)
    assert r.values["latency"] == pytest.approx(r.cost.seconds, rel=1e-12)
    assert r.lower_bound.cycles <= r.cost.cycles * (1 + 1e-12)
    assert r.gap == pytest.approx(r.cost.cycles / r.lower_bound.cycles - 1, rel=1e-9, abs=1e-12)
    # the trace is the running best, ending at the answer; counts add up
    trace = [v for v in r.trace if v is not None]
    assert trace and all(b <= a for a, b in itertools.pairwise(trace))
    assert trace[-1] == pytest.approx(r.values["latency"], rel=1e-12)
    c = r.counts
    assert c.complete + c.infeasible + c.pruned_by_bound + c.duplicates == c.trials and c.points_scored > 0
    assert r.cost_model_version.split("+")[1].startswith(target.family + ".")
    # optimality is claimed only with a proof, and the answer never beats the whole space's optimum
    best = space_optimum(preset, problem)
    assert r.values["latency"] >= best * (1 - 1e-12)
    # these stops prove it; so does a certificate whose bounds rule out every structure left (below)
    assert r.proven_optimal or r.stop_reason not in ("enumerated", "space-exhausted", "lower-bound")
    cert = r.certificate
    assert cert is not None and r.proven_optimal == cert.complete and cert.space_points == target.space(problem).size
    assert cert.scored + cert.pruned_by_bound + cert.unexplored == cert.structures_total
    assert cert.best_remaining_bound is None or cert.best_remaining_bound <= best * (1 + 1e-9)  # admissible
    if cert.gap_bound is not None:
        assert r.values["latency"] / best - 1 <= cert.gap_bound + 1e-9  # "within X%" holds
    if r.proven_optimal:
        assert r.values["latency"] == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("preset", PRESETS)
def test_auto_tune_is_feasible_validated_and_complete(preset: str) -> None:
    r = tune(GEMM, get_target(preset), SMALL)
    assert_complete_result(r, preset, GEMM)
    assert TuneResult.model_validate_json(r.model_dump_json()) == r


@pytest.mark.parametrize("preset", PRESETS)
def test_optuna_path_on_a_real_target(preset: str) -> None:
    """TPE with warm starts, sub-spaces sized from the space (no rate probe), and a small trial budget."""
    t = get_target(preset)
    r = tune(GEMM, t, SMALL.model_copy(update={"strategy": "tpe", "max_trials": 8}))
    assert r.strategy == "tpe" and r.counts.trials <= 8 and len(r.trace) == r.counts.trials
    # nothing measured, nothing decided by a clock: the sub-spaces are the split of the space at the default size
    _, inner = split_params(t.space(GEMM), DEFAULT_INNER)
    assert r.scorer_rate is None and r.inner_points == math.prod(len(p.choices) for p in inner) <= DEFAULT_INNER
    assert_complete_result(r, preset, GEMM)


@pytest.mark.parametrize("family_preset", ["wormhole-n150", "rngd", "trn2", "ascend-910b"])
def test_conv_on_each_family(family_preset: str) -> None:
    if family_preset not in PRESETS:
        pytest.skip(f"{family_preset} not registered")
    r = tune(CONV, get_target(family_preset), SMALL.model_copy(update={"max_trials": 6}))
    assert_complete_result(r, family_preset, CONV)


@pytest.mark.parametrize("preset", PRESETS)
def test_cli_tune_on_each_preset(preset: str) -> None:
    args = ["tune", "--einsum", "mk,kn->mn", "--size", "m=64", "--size", "k=128", "--size", "n=96"]
    res = runner.invoke(app, [*args, "--weight", "1", "--target", preset, "--trials", "10", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    r = TuneResult.model_validate(data)
    for key in ("mapping", "cost", "lower_bound", "gap", "proven_optimal", "trace", "counts", "cost_model_version"):
        assert data[key] is not None, key
    assert data["validation"]["passed"] is True and data["cost"]["cycles"] > 0
    assert_complete_result(r, preset, GEMM)


def test_cached_repeat_returns_in_milliseconds() -> None:
    store = optuna.storages.InMemoryStorage()
    preset = PRESETS[0]
    first = tune_cached(GEMM, preset, SMALL, storage=store)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        again = tune_cached(GEMM, preset, SMALL, storage=store)
        times.append(time.perf_counter() - t0)
    assert again.cached and not first.cached and again.model_copy(update={"cached": False}) == first
    assert min(times) < 0.05, times  # a lookup, not a search (the search itself validates too)


def test_every_preset_was_exercised() -> None:
    assert {"rngd", "trn2", "ascend-910b", "wormhole-n150"} <= set(PRESETS)
    assert math.isfinite(space_optimum("rngd", GEMM))


def test_cli_row_product_goes_to_the_vector_unit_with_reduce_op_mul() -> None:
    """`--reduce-op mul` reaches the problem: a row product on Ascend is priced as TROWPROD and validated."""
    args = ["tune", "--einsum", "ij->i", "--size", "i=64", "--size", "j=256", "--dtype", "f16", "--out-dtype", "f16"]
    res = runner.invoke(app, [*args, "--reduce-op", "mul", "--target", "ascend-910b", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert "(mul;" in data["problem"]
    assert data["validation"]["passed"] is True
    bad = runner.invoke(app, ["tune", "--conv", "batch=1,in=8,out=8,h=8,w=8,k=3", "--reduce-op", "max"])
    assert bad.exit_code == 2 and "--reduce-op applies to --einsum" in bad.output


def test_cost_model_version_covers_the_family_and_the_shared_modules_it_uses() -> None:
    """Editing one family's model invalidates that family's cached results only."""
    from mapper.keys import model_files

    for family in FAMILIES:
        files = {f.as_posix() for f in model_files(f"costmodels.{family}.target")}
        assert any(f.endswith(f"costmodels/{family}/target.py") for f in files)
        assert any(f.endswith("costmodels/protocol.py") for f in files)
        others = [o for o in FAMILIES if o != family]
        assert not [f for f in files for o in others if f"costmodels/{o}/" in f]
    versions = {n: cost_model_version(get_target(n)) for n in target_names()}
    assert versions["trn1"] == versions["trn2"] != versions["rngd"]
