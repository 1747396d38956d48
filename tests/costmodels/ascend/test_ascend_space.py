"""The Ascend cube space (issue #12): tile choices beyond powers of two, tightened by the dominance
rule of `costmodels.ascend.space` (module docstring), compared with the unpruned space on small
problems and with the previous fixed-ladder space on awkward and benchmark shapes.

References: TMATMUL m/k/n in [1, 4095] (pto-tmatmul.txt, Constraints, Runtime); fractal 16 rows /
columns and k0 = 32 B of the input dtype (hardware-facts.md §3.1 "Fractal layout", §3.2 step 1).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from costmodels.ascend.space import CubeSetup, cube_setup, tighten, tile_choices, tile_limit
from costmodels.ascend.tiling import capped_choices, nest_group, round_up
from costmodels.protocol import Param, SearchSpace
from costmodels.registry import get_target
from tests.costmodels.ascend.old_grids import old_core_grids
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = ("ascend-910b", "ascend-a5")
OBJECTIVES = ("latency", "offchip_bytes", "footprint")


def _setup(preset: str, problem: Problem) -> CubeSetup:
    return cube_setup(problem, get_target(preset).hardware)  # type: ignore[attr-defined]


def _best(preset: str, problem: Problem, space: SearchSpace | None = None) -> dict[str, float]:
    """The best value of each objective over the target's space (None: by code, in chunks) or over a space
    given by value (score_batch prices values off the space)."""
    t = get_target(preset)
    if space is not None:
        score = t.score_batch(problem, space.columns())
        return {o: float(np.min(score.objectives[o])) for o in OBJECTIVES}
    own = t.space(problem)
    shape = tuple(len(p.choices) for p in own.params)
    best = dict.fromkeys(OBJECTIVES, np.inf)
    for start in range(0, own.size, 1 << 20):
        codes = np.unravel_index(np.arange(start, min(own.size, start + (1 << 20))), shape)
        score = t.score_codes(problem, {p.name: c for p, c in zip(own.params, codes, strict=True)})
        best = {o: min(best[o], float(np.min(score.objectives[o]))) for o in OBJECTIVES}
    return best


def _largest_grids(space: SearchSpace) -> SearchSpace:
    """The space with its two first (largest) core grids only: the tile rule does not read the grid."""
    return SearchSpace(
        params=tuple(
            Param(name=p.name, choices=p.choices[:2], doc=p.doc) if p.name == "core_grid" else p for p in space.params
        )
    )


def _with_tiles(space: SearchSpace, tiles: dict[str, tuple[int, ...]]) -> SearchSpace:
    return SearchSpace(
        params=tuple(
            Param(name=p.name, choices=tiles.get(p.name, p.choices), doc=p.doc) if p.name in tiles else p
            for p in space.params
        )
    )


@pytest.mark.parametrize(
    "axes",
    [(("m", 37),), (("m", 300),), (("p", 7), ("q", 9)), (("c", 3), ("r", 3), ("s", 5)), (("m", 1),)],
)
def test_tighten_is_the_smallest_tile_with_the_same_remainder(axes: tuple[tuple[str, int], ...]) -> None:
    extent = math.prod(s for _, s in axes)
    for t in range(1, extent + 2):
        rest = nest_group(axes, (t,)).factors[1]
        same = [u for u in range(1, extent + 1) if nest_group(axes, (u,)).factors[1] == rest]
        tt = tighten(axes, t)
        assert nest_group(axes, (tt,)).factors[1] == rest
        assert nest_group(axes, (tt,)).size(0) == tt == min(nest_group(axes, (u,)).size(0) for u in same)


SMALL = {
    "gemm 37x23x19 f16": einsum("mk,kn->mn", {"m": 37, "k": 23, "n": 19}, dtype="f16", weight=1),
    "gemm 20x70x17 i8": einsum("mk,kn->mn", {"m": 20, "k": 70, "n": 17}, dtype="i8", weight=1),
    "gemm 40x20x48 f32": einsum("mk,kn->mn", {"m": 40, "k": 20, "n": 48}, dtype="f32", weight=1),
    "conv 5x5 3x3 c6": conv2d(
        batch=1, in_channels=6, out_channels=20, input_height=5, input_width=5, kernel=3, padding=1
    ),
}


def _in_turn(names: list[str]) -> list[tuple[str, str]]:
    """Each problem on one preset, the presets in turn (each preset meets half of the problems)."""
    return [(name, PRESETS[i % len(PRESETS)]) for i, name in enumerate(names)]


@pytest.mark.parametrize(("name", "preset"), _in_turn(sorted(SMALL)))
def test_pruned_space_is_as_good_as_every_tile(preset: str, name: str) -> None:
    """Every tile from 1 to the group's extent (the unpruned space) vs the tightened choices, on every objective."""
    problem = SMALL[name]
    s = _setup(preset, problem)
    space = _largest_grids(get_target(preset).space(problem))
    every = {f"base_{g}": tuple(range(1, math.prod(n for _, n in s.axes(g)) + 1)) for g in ("m", "k", "n")}
    unpruned = _with_tiles(space, every)
    assert unpruned.size > space.size
    for g in ("m", "k", "n"):  # these groups are small enough to be offered every tile the rule keeps
        limit, unit = tile_limit(s, g), (s.k0 if g == "k" else 16)
        kept = {tighten(s.axes(g), t) for t in every[f"base_{g}"]}
        assert set(tile_choices(s, g)) == {t for t in kept if round_up(t, unit) <= limit}
    pruned_best, full_best = _best(preset, problem, space), _best(preset, problem, unpruned)
    assert pruned_best == full_best
    # and the tiles left out for their size are infeasible at every point
    for g in ("m", "k", "n"):
        limit = tile_limit(s, g)
        unit = s.k0 if g == "k" else 16
        assert all(round_up(t, unit) <= limit for t in tile_choices(s, g))


def _old_space(s: CubeSetup) -> SearchSpace:
    """The space before issue #12: powers of two (and the recommended tiles), untightened."""
    v, hw = s.view, s.hw
    mp, np_, kp = round_up(v.M, hw.fractal_m), round_up(v.N, hw.fractal_n), round_up(v.K, s.k0)
    rec_m, rec_k, rec_n = hw.recommended_base_mkn
    base = (16, 32, 64, 128, 256, 512)
    bm = capped_choices((*base[:-1], rec_m), mp)
    bn = capped_choices((*base, rec_n), np_)
    bk = capped_choices((*(s.k0 * f for f in (1, 2, 4, 8, 16)), rec_k), kp)
    grids = old_core_grids(hw.aic_cores, v.B, -(-v.M // hw.fractal_m), -(-v.N // hw.fractal_n))

    def mults(tiles: tuple[int, ...], values: tuple[int, ...], extent: int) -> tuple[int, ...]:
        return capped_choices(values, -(-extent // min(tiles)))

    return SearchSpace(
        params=(
            Param(name="base_m", choices=bm),
            Param(name="base_k", choices=bk),
            Param(name="base_n", choices=bn),
            Param(name="l1_m", choices=mults(bm, (1, 2, 4), mp)),
            Param(name="l1_k", choices=mults(bk, (1, 2, 4, 8), kp)),
            Param(name="l1_n", choices=mults(bn, (1, 2, 4), np_)),
            Param(name="double_buffer", choices=(True, False)),
            Param(name="core_grid", choices=grids),
        )
    )


AWKWARD = {
    "prime 4093x4091x4079": einsum("mk,kn->mn", {"m": 4093, "k": 4091, "n": 4079}, weight=1),
    "4095^3": einsum("mk,kn->mn", {"m": 4095, "k": 4095, "n": 4095}, weight=1),
    "ones 1x1x1": einsum("mk,kn->mn", {"m": 1, "k": 1, "n": 1}, weight=1),
    "gemv 1x4096x4096": einsum("mk,kn->mn", {"m": 1, "k": 4096, "n": 4096}, weight=1),
    "tall 1e6x64x97": einsum("mk,kn->mn", {"m": 1_000_000, "k": 64, "n": 97}, weight=1),
    "primes 131x257x17 i8": einsum("mk,kn->mn", {"m": 131, "k": 257, "n": 17}, dtype="i8", weight=1),
    "conv 7x7/2 resnet50": conv2d(
        batch=1, in_channels=3, out_channels=64, input_height=224, input_width=224, kernel=7, stride=2, padding=3
    ),
    "conv 3x3 resnet50": conv2d(
        batch=1, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1
    ),
}


@pytest.mark.parametrize(("name", "preset"), _in_turn(sorted(AWKWARD)))
def test_awkward_shapes_at_least_as_good_as_the_old_space(preset: str, name: str) -> None:
    problem = AWKWARD[name]
    s = _setup(preset, problem)
    new, old = _best(preset, problem), _best(preset, problem, _old_space(s))
    assert np.isfinite(new["latency"])
    for o in OBJECTIVES:
        assert new[o] <= old[o] * (1 + 1e-12), (o, new[o], old[o])


@pytest.mark.parametrize("preset", PRESETS)
def test_every_old_tile_has_its_tightened_tile_in_the_space(preset: str) -> None:
    """The point-by-point form of the guarantee: each old choice's tightened tile is offered (or infeasible)."""
    for problem in itertools.islice(AWKWARD.values(), None):
        s = _setup(preset, problem)
        old = {p.name: p.choices for p in _old_space(s).params}
        for g in ("m", "k", "n"):
            unit = s.k0 if g == "k" else 16
            offered = set(tile_choices(s, g))
            for t in old[f"base_{g}"]:
                tt = tighten(s.axes(g), int(t))
                assert tt in offered or round_up(tt, unit) > tile_limit(s, g)


def _bench_layers() -> list[tuple[str, Problem]]:
    from bench.mapper_quality import WORKLOADS, distinct_layers

    return [(label, p) for label, p, _ in distinct_layers(WORKLOADS, quick=True)]


@pytest.mark.parametrize("preset", PRESETS)
def test_benchmark_layers_at_least_as_good_as_the_old_space(preset: str) -> None:
    """Every 16th distinct benchmark layer (every 4th of bench.mapper_quality --quick; each preset its own
    quarter): the new optimum is no worse.

    `python -m bench.mapper_quality --targets ascend-910b,ascend-a5` checks all of them against
    the exhaustive optima it recomputes.
    """
    for label, problem in _bench_layers()[2 * PRESETS.index(preset) :: 4]:
        s = _setup(preset, problem)
        new, old = _best(preset, problem), _best(preset, problem, _old_space(s))
        assert new["latency"] <= old["latency"] * (1 + 1e-12), (label, new["latency"], old["latency"])
