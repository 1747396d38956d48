"""The Ascend structure bound (costmodels/ascend/bounds.py): admissible on many random problems and
structures, tighter than the whole problem's roofline where the fixed choices cost more, and what
branch and bound prunes by, with a certificate that holds whether or not the budget ends first."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from costmodels.ascend.target import AscendTarget
from costmodels.protocol import Choice
from costmodels.registry import get_target
from costmodels.structure_bound import StructureBounded
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import split_params
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = ("ascend-910b", "ascend-a5")


def _target(preset: str) -> AscendTarget:
    t = get_target(preset)
    assert isinstance(t, AscendTarget)
    return t


def _random_problems(seed: int, n: int) -> list[Problem]:
    rng = random.Random(seed)
    out: list[Problem] = []
    for _ in range(n):
        if rng.random() < 0.25:
            hw, kernel = rng.choice([5, 9, 14]), rng.choice([1, 3])
            channels = {"in_channels": rng.choice([3, 8, 17]), "out_channels": rng.choice([8, 24, 40])}
            out.append(conv2d(batch=1, input_height=hw, input_width=hw, kernel=kernel, padding=1, **channels))
            continue
        sizes = {"m": rng.randint(1, 300), "k": rng.randint(1, 300), "n": rng.randint(1, 300)}
        if rng.random() < 0.3:
            out.append(einsum("bmk,bkn->bmn", {**sizes, "b": rng.randint(2, 5)}, dtype="f16", weight=1))
        else:
            out.append(einsum("mk,kn->mn", sizes, dtype=rng.choice(["f16", "bf16", "i8", "f32"]), weight=1))
    return out


def _latencies(t: AscendTarget, p: Problem) -> tuple[list[tuple[str, tuple[Choice, ...]]], np.ndarray]:
    """Every point's latency (inf where infeasible), in the space's C order."""
    space = t.space(p)
    shape = tuple(len(q.choices) for q in space.params)
    codes = np.unravel_index(np.arange(space.size), shape)
    s = t.score_codes(p, {q.name: c for q, c in zip(space.params, codes, strict=True)})
    lat = np.where(s.feasible, s.objectives["latency"], np.inf).reshape(shape)
    return [(q.name, q.choices) for q in space.params], lat


@pytest.mark.parametrize("preset", PRESETS)
def test_no_structure_beats_its_bound_on_random_problems(preset: str) -> None:
    t = _target(preset)
    assert isinstance(t, StructureBounded)
    rng = random.Random(7)
    checked = tighter = 0
    for p in _random_problems(seed=3, n=30):
        params, lat = _latencies(t, p)
        names = [n for n, _ in params]
        generic = t.lower_bound(p).cycles / t.hardware.clock_hz
        # the mapper's own splits, and random subsets of fixed parameters
        subsets = [tuple(q.name for q in split_params(t.space(p), inner)[0]) for inner in (16, 256)]
        subsets += [tuple(rng.sample(names, rng.randint(1, len(names)))) for _ in range(3)]
        for fixed_names in subsets:
            axes = [names.index(n) for n in fixed_names]
            combos = list(itertools.product(*(range(len(params[a][1])) for a in axes)))
            for combo in rng.sample(combos, min(len(combos), 40)):
                fixed = {names[a]: params[a][1][c] for a, c in zip(axes, combo, strict=True)}
                sel = tuple(combo[axes.index(i)] if i in axes else slice(None) for i in range(len(names)))
                best = float(lat[sel].min())
                bound = t.structure_bound(p, fixed)
                assert bound <= best, (p.label, fixed, bound, best)
                checked += np.isfinite(best)
                tighter += bound > generic * (1 + 1e-9)
        assert t.structure_bound(p, {}) <= float(lat.min())
    assert checked > 1000
    assert tighter > checked // 4  # the fixed choices' padding and cores show in most bounds


def test_a_unary_problem_gets_its_roofline() -> None:
    t = _target("ascend-910b")
    p = einsum("ij->i", {"i": 64, "j": 96}, dtype="f16", reduce_op="add")
    assert t.structure_bound(p, {}) == t.lower_bound(p).cycles / t.hardware.clock_hz


def test_choices_outside_the_space_are_refused() -> None:
    t = _target("ascend-910b")
    p = einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, dtype="f16", weight=1)
    with pytest.raises(ValueError, match="core_grid='1x1x99' is not a choice"):
        t.structure_bound(p, {"core_grid": "1x1x99"})
    with pytest.raises(ValueError, match="no parameter 'tile'"):
        t.structure_bound(p, {"tile": 16})


@pytest.mark.parametrize("preset", PRESETS)
def test_branch_and_bound_prunes_and_its_certificate_holds(preset: str) -> None:
    t = _target(preset)
    p = einsum("mk,kn->mn", {"m": 127, "k": 1000, "n": 700}, dtype="f16", weight=1)
    optimum = tune(p, t, SearchSettings(strategy="exhaustive"), validate=False).values["latency"]
    s = SearchSettings(strategy="tpe", inner_points=4096, max_trials=400, patience=0, seed=1)
    r = tune(p, t, s, validate=False)
    cert = r.certificate
    assert cert is not None and cert.bound_source == "target.structure_bound"
    assert cert.pruned_by_bound > 0 and r.counts.points_scored < t.space(p).size
    if cert.complete:  # every structure scored or bounded out: the proof (a quiet machine gets here)
        assert r.proven_optimal and r.values["latency"] == optimum
    else:  # the budget ended first (a loaded machine): the remaining bound and the gap it gives still hold
        assert cert.best_remaining_bound is not None and cert.best_remaining_bound <= optimum
        assert cert.gap_bound is not None and r.values["latency"] / optimum - 1 <= cert.gap_bound
