"""The families' structure bounds (costmodels/ascend/bounds.py, costmodels/trainium/bounds.py,
costmodels/tenstorrent/bounds.py):
admissible on many random problems and structures, tighter than the whole problem's roofline where
the fixed choices cost more, and what branch and bound prunes by, with a certificate that holds
whether or not the budget ends first. One test body per property, one row of data per family."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pytest

from costmodels.protocol import Choice
from costmodels.registry import get_target
from costmodels.structure_bound import StructureBounded
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import split_params
from tests.costmodels.space_scan import sample_product, space_latencies
from tests.enumerable import enumerable_target
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem


@dataclass(frozen=True)
class Family:
    """What differs between the families' tests: presets, problem sizes and dtypes, the clock, a B&B case."""

    presets: tuple[str, ...]
    max_mkn: tuple[int, int, int]  # random GEMM sizes up to these
    dtypes: tuple[str, ...]  # of the random GEMMs; the first is the batched one's
    clock: str  # the hardware field the roofline cycles count in
    bad_choice: tuple[str, Choice, str]  # a choice outside the space, and the error it gives
    bnb: tuple[dict[str, int], int, int]  # the branch-and-bound GEMM's sizes, inner points, trials


FAMILIES = {
    "ascend": Family(
        presets=("ascend-910b", "ascend-a5"),
        max_mkn=(300, 300, 300),
        dtypes=("f16", "bf16", "i8", "f32"),
        clock="clock_hz",
        bad_choice=("core_grid", "1x1x99", "core_grid='1x1x99' is not a choice"),
        bnb=({"m": 127, "k": 1000, "n": 700}, 4096, 400),
    ),
    "trainium": Family(
        presets=("trn1", "trn2"),
        max_mkn=(700, 400, 300),
        dtypes=("bf16", "f16", "f8e4m3", "f32"),
        clock="te_clock_hz",
        bad_choice=("tile_mov", 999, "tile_mov=999 is not a choice"),
        bnb=({"m": 127, "k": 500, "n": 300}, 2048, 150),
    ),
    "tenstorrent": Family(
        presets=("wormhole-n150", "blackhole-p150"),
        max_mkn=(700, 400, 300),
        dtypes=("bf16", "f32", "bfloat8_b", "bfloat4_b"),
        clock="clock_hz",
        bad_choice=("layout", "height/999", "layout='height/999' is not a choice"),
        bnb=({"m": 1000, "k": 131, "n": 700}, 4096, 400),
    ),
}
CASES = [(fam, preset) for fam, f in FAMILIES.items() for preset in f.presets]


def _random_problems(f: Family, seed: int, n: int) -> list[Problem]:
    rng = random.Random(seed)
    out: list[Problem] = []
    for _ in range(n):
        if rng.random() < 0.25:
            hw, kernel = rng.choice([5, 9, 14]), rng.choice([1, 3])
            channels = {"in_channels": rng.choice([3, 8, 17]), "out_channels": rng.choice([8, 24, 40])}
            out.append(conv2d(batch=1, input_height=hw, input_width=hw, kernel=kernel, padding=1, **channels))
            continue
        sizes = {axis: rng.randint(1, top) for axis, top in zip("mkn", f.max_mkn, strict=True)}
        if rng.random() < 0.3:
            out.append(einsum("bmk,bkn->bmn", {**sizes, "b": rng.randint(2, 5)}, dtype=f.dtypes[0], weight=1))
        else:
            out.append(einsum("mk,kn->mn", sizes, dtype=rng.choice(f.dtypes), weight=1))
    return out


def _bounded(preset: str) -> StructureBounded:
    t = enumerable_target(preset)  # these tests enumerate every space they bound: Trainium's ladder
    assert isinstance(t, StructureBounded)
    return t


@pytest.mark.parametrize(("family", "preset"), CASES)
def test_no_structure_beats_its_bound_on_random_problems(family: str, preset: str) -> None:
    f, t = FAMILIES[family], enumerable_target(preset)
    bounded = _bounded(preset)
    rng = random.Random(7)
    checked = tighter = 0
    for p in _random_problems(f, seed=3 + f.presets.index(preset), n=7):  # each preset its own problems
        params, lat = space_latencies(t, p)
        names = [n for n, _ in params]
        generic = t.lower_bound(p).cycles / getattr(t.hardware, f.clock)
        # the mapper's own splits, and random subsets of fixed parameters
        subsets = [tuple(q.name for q in split_params(t.space(p), inner)[0]) for inner in (16, 256)]
        subsets += [tuple(rng.sample(names, rng.randint(1, len(names)))) for _ in range(3)]
        for fixed_names in subsets:
            axes = [names.index(n) for n in fixed_names]
            for combo in sample_product(rng, [len(params[a][1]) for a in axes], 40):
                fixed = {names[a]: params[a][1][c] for a, c in zip(axes, combo, strict=True)}
                sel = tuple(combo[axes.index(i)] if i in axes else slice(None) for i in range(len(names)))
                best = float(lat[sel].min())
                bound = bounded.structure_bound(p, fixed)
                assert bound <= best, (p.label, fixed, bound, best)
                checked += np.isfinite(best)
                tighter += bound > generic * (1 + 1e-9)
        assert bounded.structure_bound(p, {}) <= float(lat.min())
    assert checked > 500
    assert tighter > checked // 4  # the fixed choices' padding and cores show in most bounds


def test_an_ascend_unary_problem_gets_its_roofline() -> None:
    t = get_target("ascend-910b")
    p = einsum("ij->i", {"i": 64, "j": 96}, dtype="f16", reduce_op="add")
    assert _bounded("ascend-910b").structure_bound(p, {}) == t.lower_bound(p).cycles / t.hardware.clock_hz


def test_a_problem_trainium_cannot_run_has_no_bound() -> None:
    t = get_target("trn2")
    p = einsum("ij->i", {"i": 64, "j": 96}, dtype="bf16", reduce_op="add")
    assert t.supports(p) and _bounded("trn2").structure_bound(p, {}) == 0.0


@pytest.mark.parametrize("family", FAMILIES)
def test_choices_outside_the_space_are_refused(family: str) -> None:
    f = FAMILIES[family]
    t = _bounded(f.presets[-1])
    p = einsum("mk,kn->mn", {"m": 600, "k": 300, "n": 200}, dtype=f.dtypes[0], weight=1)
    name, value, message = f.bad_choice
    with pytest.raises(ValueError, match=message):
        t.structure_bound(p, {name: value})
    with pytest.raises(ValueError, match="no parameter 'tile'"):
        t.structure_bound(p, {"tile": 16})


@pytest.mark.parametrize(("family", "preset"), CASES)
def test_branch_and_bound_prunes_and_its_certificate_holds(family: str, preset: str) -> None:
    f, t = FAMILIES[family], enumerable_target(preset)
    sizes, inner, trials = f.bnb
    p = einsum("mk,kn->mn", sizes, dtype=f.dtypes[0], weight=1)
    optimum = tune(p, t, SearchSettings(strategy="exhaustive"), validate=False).values["latency"]
    s = SearchSettings(strategy="tpe", inner_points=inner, max_trials=trials, patience=0, seed=1)
    r = tune(p, t, s, validate=False)
    cert = r.certificate
    assert cert is not None and cert.bound_source == "target.structure_bound"
    assert cert.pruned_by_bound > 0 and r.counts.pruned_by_bound > 0
    assert r.counts.points_scored < t.space(p).size
    if cert.complete:  # every structure scored or bounded out: the proof (a quiet machine gets here)
        assert r.proven_optimal and r.values["latency"] == optimum
    else:  # the budget ended first (a loaded machine): the remaining bound and the gap it gives still hold
        assert cert.best_remaining_bound is not None and cert.best_remaining_bound <= optimum
        assert cert.gap_bound is not None and r.values["latency"] / optimum - 1 <= cert.gap_bound


@pytest.mark.parametrize("preset", FAMILIES["ascend"].presets)
def test_ascend_floors_are_at_most_the_exact_bounds_on_random_problems(preset: str) -> None:
    """ascend/floors.py: every structure's floor is at most its exact bound (best-first's order relies on it),
    so at most every feasible point's latency; and it is above the roofline for many (it rules them out)."""
    t, f = get_target(preset), FAMILIES["ascend"]
    rng = random.Random(11)
    checked = above = 0
    for p in _random_problems(f, seed=5 + f.presets.index(preset), n=7):  # each preset its own problems
        space = t.space(p)
        names = [q.name for q in space.params]
        generic = t.lower_bound(p).cycles / t.hardware.clock_hz
        subsets = [tuple(q.name for q in split_params(space, inner)[0]) for inner in (16, 256, 4096)]
        subsets += [tuple(n for n in names if n in rng.sample(names, rng.randint(1, len(names)))) for _ in range(3)]
        subsets += [("core_grid", "double_buffer"), ()]  # any order of the names; none: the whole space
        for fixed_names in subsets:
            floors = t.structure_floors(p, fixed_names)
            choices = [space.params[names.index(n)].choices for n in fixed_names]
            assert floors.shape == tuple(len(c) for c in choices)
            for combo in sample_product(rng, [len(c) for c in choices], 30):
                fixed = {n: c[i] for n, c, i in zip(fixed_names, choices, combo, strict=True)}
                exact = t.structure_bound(p, fixed)
                assert floors[combo] <= exact, (p.label, fixed, floors[combo], exact)
                checked += 1
                above += bool(floors[combo] > generic * (1 + 1e-9))
    assert checked > 500
    assert above > checked // 4


def test_ascend_floors_of_unary_and_unknown_parameters() -> None:
    t = get_target("ascend-910b")
    p = einsum("ij->i", {"i": 64, "j": 96}, dtype="f16", reduce_op="add")
    names = tuple(q.name for q in t.space(p).params[:1])
    assert (t.structure_floors(p, names) == t.structure_bound(p, {})).all()
    gemm = einsum("mk,kn->mn", {"m": 600, "k": 300, "n": 200}, dtype="bf16", weight=1)
    with pytest.raises(ValueError, match="no parameter 'tile'"):
        t.structure_floors(gemm, ("tile",))
