"""Every legal core grid (costmodels/ascend/grids.py) and the dominance rules that prune them.

The unpruned grids are every ``BxMxN`` with at most the AI cores (hardware-facts.md §3.2 step 6;
``core-count``). The rules are checked point by point on small problems: every point of the
unpruned space has a witness (each side tightened, `tiling.tighten`) whose grid the pruned space
offers and which is feasible whenever the point is and no worse in any objective, with the inputs
L2-resident and in HBM (``l2_bytes=0``). With the inputs in HBM a grid using fewer cores than all
moves fewer bytes and wins; the space before this change (the largest grids only) missed it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from costmodels.ascend.grids import every_grid, grid_choices
from costmodels.ascend.space import CubeSetup, build_space, cube_setup, cube_space
from costmodels.ascend.tiling import Side, grid_text, nest_group, parse_grid, side_cores, side_text, tighten
from costmodels.protocol import Param, SearchSpace
from costmodels.registry import get_target
from mapper.search import tune
from mapper.settings import SearchSettings
from tests.costmodels.ascend.old_grids import old_core_grids
from tests.enumerable import narrowed
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = ("ascend-910b", "ascend-a5")
OBJECTIVES = ("latency", "offchip_bytes", "footprint", "energy")


def test_every_legal_grid_is_offered_before_the_rules() -> None:
    grids = every_grid(24)
    # ordered triples with product at most 24, counted by divisors: sum over k <= 24 of d3(k)
    d3 = {
        k: sum(1 for a in range(1, k + 1) if k % a == 0 for b in range(1, k // a + 1) if (k // a) % b == 0)
        for k in range(1, 25)
    }
    assert len(grids) == len(set(grids)) == sum(d3.values()) == 203
    assert {(1, 4, 6), (1, 6, 4), (1, 5, 1), (1, 1, 7), (2, 11, 1), (1, 1, 1)} <= set(
        grids
    )  # orientations, fewer cores
    assert all(b * m * n <= 24 for b, m, n in grids) and (1, 5, 5) not in grids
    assert grids[0][0] * grids[0][1] * grids[0][2] == 24  # most cores first (the warm starts take the first)
    assert len(grid_choices(24)) == 203


def test_split_k_is_not_offered() -> None:
    """No reference prices a reduction of partial accumulators across cores (ascend/grids.py): grids split B, M, N."""
    assert all(len(parse_grid(g)) == 3 for g in grid_choices(24))
    space = cube_space(cube_setup(einsum("mk,kn->mn", {"m": 16, "k": 100000, "n": 16}, weight=1), _hw("ascend-910b")))
    assert {p.name for p in space.params} == {
        "base_m", "base_k", "base_n", "l1_m", "l1_k", "l1_n", "double_buffer", "core_grid"
    }  # fmt: skip


def _hw(preset: str, l2_bytes: int | None = None):  # type: ignore[no-untyped-def]
    return get_target(preset, {} if l2_bytes is None else {"l2_bytes": l2_bytes}).hardware  # type: ignore[attr-defined]


SMALL = {
    "gemm 200x40x90": einsum("mk,kn->mn", {"m": 200, "k": 40, "n": 90}, dtype="f16", weight=1),
    "batched 3x70x30x50": einsum("bmk,bkn->bmn", {"b": 3, "m": 70, "k": 30, "n": 50}, dtype="f16", weight=1),
    "conv 9x9 3x3 c8->40": conv2d(
        batch=1, in_channels=8, out_channels=40, input_height=9, input_width=9, kernel=3, padding=1
    ),
}


def _restricted(space: SearchSpace, grids: tuple[str, ...]) -> SearchSpace:
    """The space with at most 5 base_m and base_n choices, one base_k and l1_k (the rule is point by point:
    any subset of the other choices shows it), and these grids."""

    def spread(c: tuple[object, ...]) -> tuple[object, ...]:
        return c[:: -(-len(c) // 5)]

    ch = {p.name: p.choices for p in space.params}
    cut = {"base_m": spread(ch["base_m"]), "base_n": spread(ch["base_n"]), "core_grid": grids}
    cut |= {"base_k": ch["base_k"][:1], "l1_k": ch["l1_k"][:1]}
    return narrowed(space, cut)  # type: ignore[arg-type]


def side_witness(axes: tuple[tuple[str, int], ...], inner: tuple[int, ...], side: Side, kept: set[Side]) -> Side:
    """The side a point with `side` is replaced by: the side tightened (a count, `tiling.tighten`), or for a group
    of several axes a kept split leaving every core the same blocks on at most as many cores (and at most as many
    grid cores), searched over the kept sides (ascend/grids.py, rules 1 and 3), the fewest cores first."""
    rest = nest_group(axes, inner).factors[-1]
    rem = tuple((a, r) for (a, _), r in zip(axes, rest, strict=True))
    if len(axes) <= 1:
        return tighten(rem, side_cores(side))

    def blocks_and_cores(x: Side) -> tuple[int, int]:
        nest = nest_group(axes, (*inner, x)) if isinstance(x, int) else nest_group(axes, inner, x)
        return math.prod(nest.factors[-1]), math.prod(nest.factors[-2])

    blocks, used = blocks_and_cores(side)
    fits = [k for k in kept if side_cores(k) <= side_cores(side)]
    same = [k for k in fits if blocks_and_cores(k)[0] == blocks and blocks_and_cores(k)[1] <= used]
    assert same, (rem, side)  # the rules keep a dominating split for every remainder the tiles leave
    return min(same, key=lambda k: (side_cores(k), side_text(k)))


def _witness(s: CubeSetup, space: SearchSpace, kept_grids: tuple[str, ...]) -> np.ndarray:
    """For every point of `space` (C order), the index of its witness: each grid side replaced by `side_witness`."""
    ch = {p.name: p.choices for p in space.params}
    shape = tuple(len(p.choices) for p in space.params)
    gidx = {g: i for i, g in enumerate(ch["core_grid"])}
    kept = [parse_grid(g) for g in kept_grids]
    kb, km, kn = ({k[i] for k in kept} for i in range(3))

    memo: dict[tuple[str, tuple[int, ...], Side], Side] = {}

    def witness(group: str, inner: tuple[int, ...], side: Side, kept_sides: set[Side]) -> Side:
        """`side_witness` of the group, each (group, tiles, side) worked out once (grids share their sides)."""
        key = (group, inner, side)
        if key not in memo:
            memo[key] = side_witness(s.axes(group), inner, side, kept_sides)
        return memo[key]

    look = np.empty((shape[0], shape[3], shape[2], shape[5], shape[7]), dtype=np.int64)
    for (i, bm), (j, lm), (k, bn), (m, ln) in itertools.product(
        *(enumerate(ch[n]) for n in ("base_m", "l1_m", "base_n", "l1_n"))
    ):
        for gi, g in enumerate(ch["core_grid"]):
            b, gm, gn = parse_grid(str(g))
            w = (
                witness("b", (), b, kb),
                witness("m", (int(bm), int(lm)), gm, km),  # type: ignore[call-overload]
                witness("n", (int(bn), int(ln)), gn, kn),  # type: ignore[call-overload]
            )
            look[i, j, k, m, gi] = gidx[grid_text(w)]
    codes = np.unravel_index(np.arange(space.size), shape)
    wg = look[codes[0], codes[3], codes[2], codes[5], codes[7]]
    return np.ravel_multi_index((*codes[:7], wg), shape)


@pytest.mark.parametrize("l2_bytes", [None, 0])
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_pruned_point_is_dominated_by_a_kept_one(name: str, preset: str, l2_bytes: int | None) -> None:
    problem = SMALL[name]
    t = get_target(preset, {} if l2_bytes is None else {"l2_bytes": l2_bytes})
    s = cube_setup(problem, t.hardware)  # type: ignore[attr-defined]
    every = cube_space(s, prune=False).params[7].choices
    kept_grids = cube_space(s).params[7].choices
    assert len(kept_grids) < len(every)  # the rules prune something
    # every legal grid for one-axis groups; with a group of several axes (the conv), every 8th of them and the kept
    grids = every if len(every) < 400 else tuple(g for i, g in enumerate(every) if i % 8 == 0 or g in kept_grids)
    full = _restricted(cube_space(s, prune=False), grids)  # type: ignore[arg-type]
    cols = full.columns()
    sc = t.score_batch(problem, cols)
    ok, obj = np.asarray(sc.feasible), {o: np.asarray(sc.objectives[o]) for o in OBJECTIVES}
    w = _witness(s, full, kept_grids)  # type: ignore[arg-type]
    grid_of = np.asarray(cols["core_grid"])
    assert set(grid_of[w]) <= set(kept_grids)  # every witness is a point of the pruned space
    pruned = ~np.isin(grid_of, kept_grids)
    assert pruned.any() and ok[pruned].any()
    assert ok[w][ok].all()  # feasible whenever the point is
    for o in OBJECTIVES:
        assert (obj[o][w][ok] <= obj[o][ok]).all(), o
    grid_texts, grid_at = np.unique(grid_of, return_inverse=True)  # each point's cores, worked out per grid
    cores = np.array([math.prod(side_cores(x) for x in parse_grid(str(g))) for g in grid_texts])[grid_at]
    assert (cores[w] < cores).any()  # the witnesses use fewer cores where the grid was not tight
    kept = ~pruned  # the same optimum of each objective over the pruned and the unpruned space
    for o in OBJECTIVES:
        assert obj[o][kept].min() == obj[o].min(), o


def _optimum(preset: str, problem: Problem, grids: tuple[str, ...] | None, l2_bytes: int | None) -> tuple[float, str]:
    """The best latency and its grid: over the target's space (by code, every point, a slab of the space per
    grid; the first point in enumeration order on ties), or with these grids instead (by value)."""
    t = get_target(preset, {} if l2_bytes is None else {"l2_bytes": l2_bytes})
    space = t.space(problem)
    if grids is None:
        shape = tuple(len(p.choices) for p in space.params)
        assert space.params[7].name == "core_grid" and len(shape) == 8
        inner = np.unravel_index(np.arange(space.size // shape[7]), shape[:7])
        found = (math.inf, space.size)  # (latency, index of the point in the whole space)
        for g in range(shape[7]):
            codes = {p.name: c for p, c in zip(space.params[:7], inner, strict=True)}
            sc = t.score_codes(problem, {**codes, "core_grid": np.full(inner[0].size, g)})
            lat = np.where(sc.feasible, sc.objectives["latency"], np.inf)
            i = int(np.argmin(lat))
            found = min(found, (float(lat[i]), i * shape[7] + g))
        return found[0], str(space.params[7].choices[found[1] % shape[7]])
    else:
        space = SearchSpace(params=(*space.params[:7], Param(name="core_grid", choices=grids)))
        sc = t.score_batch(problem, space.columns())
    lat = np.where(sc.feasible, sc.objectives["latency"], np.inf)
    best = int(np.argmin(lat))
    return float(lat[best]), str(space.params[7].choices[best % len(space.params[7].choices)])


@pytest.mark.parametrize("preset", PRESETS)
def test_with_inputs_in_hbm_the_widened_space_finds_a_smaller_grid_that_wins(preset: str) -> None:
    """The case the largest grids missed: 70x16x90, inputs in HBM (``l2_bytes=0``)."""
    problem = einsum("mk,kn->mn", {"m": 70, "k": 16, "n": 90}, dtype="f16", weight=1)
    hw = _hw(preset, 0)
    s = cube_setup(problem, hw)
    old = old_core_grids(hw.aic_cores, s.view.B, -(-s.view.M // 16), -(-s.view.N // 16))
    widened, grid = _optimum(preset, problem, None, 0)
    before, _ = _optimum(preset, problem, old, 0)
    assert widened < before
    assert math.prod(side_cores(x) for x in parse_grid(grid)) < hw.aic_cores and grid not in old


@pytest.mark.parametrize("sizes", [{"m": 200, "k": 100, "n": 160}, {"m": 130, "k": 100, "n": 250}])
def test_with_l2_resident_inputs_the_widened_space_is_no_worse(sizes: dict[str, int]) -> None:
    problem = einsum("mk,kn->mn", sizes, dtype="f16", weight=1)
    hw = _hw("ascend-910b")
    s = cube_setup(problem, hw)
    old = old_core_grids(hw.aic_cores, s.view.B, -(-s.view.M // 16), -(-s.view.N // 16))
    assert _optimum("ascend-910b", problem, None, None)[0] <= _optimum("ascend-910b", problem, old, None)[0]


#: (points after the rules, every legal grid, largest grids only) quoted in `build_space`'s docstring
SIZES = {
    ("ascend-910b", "gemm"): (9_704_448, 25_256_448, 995_328),
    ("ascend-910b", "conv"): (7_560_000, 70_610_400, 302_400),
    ("ascend-a5", "gemm"): (14_183_424, 45_163_008, 1_119_744),
    ("ascend-a5", "conv"): (10_432_800, 136_458_000, 302_400),
}


@pytest.mark.parametrize("key", list(SIZES))
def test_space_sizes_quoted_in_the_docs(key: tuple[str, str]) -> None:
    preset, kind = key
    hw = _hw(preset)
    if kind == "gemm":
        problem = einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, dtype="bf16", weight=1)
    else:
        problem = conv2d(
            batch=1, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1, dtype="bf16"
        )
    pruned, full, before = SIZES[key]
    space = build_space(problem, hw)
    assert space.size == pruned and build_space(problem, hw, prune=False).size == full
    s = cube_setup(problem, hw)
    old = old_core_grids(hw.aic_cores, s.view.B, -(-s.view.M // 16), -(-s.view.N // 16))
    assert space.size // len(space.params[7].choices) * len(old) == before
    doc = build_space.__doc__ or ""
    every = build_space(problem, hw, prune=False).params[7].choices
    for n in (pruned, full, before, len(space.params[7].choices), len(every)):
        assert f"{n:,}" in doc
    if key == ("ascend-910b", "conv"):
        sides = [parse_grid(str(g)) for g in space.params[7].choices]
        assert (len({g[1] for g in sides}), len({g[2] for g in sides})) == (26, 13)
        assert all(isinstance(g[1], tuple) and len(g[1]) == 3 for g in sides)  # M = (n, oh, ow): per-axis sides
        innermost = grid_choices(hw.aic_cores, None)  # counts only: the grids before per-axis splits
        assert len(innermost) == 203 and space.size // len(sides) * len(innermost) == 15_346_800


@pytest.mark.parametrize("preset", PRESETS)
def test_the_structure_bound_of_a_grid_is_its_exact_optimum(preset: str) -> None:
    """ascend/bounds.py: the bound of a structure (grid and double buffering fixed) is its best feasible latency."""
    t = get_target(preset)
    problem = SMALL["gemm 200x40x90"]
    space = t.space(problem)
    shape = tuple(len(p.choices) for p in space.params)
    codes = np.unravel_index(np.arange(space.size), shape)
    sc = t.score_codes(problem, {p.name: c for p, c in zip(space.params, codes, strict=True)})
    lat = np.where(sc.feasible, sc.objectives["latency"], np.inf).reshape(shape)
    grids = space.params[7].choices
    for gi in range(0, len(grids), 3):
        for di, db in enumerate(space.params[6].choices):
            bound = t.structure_bound(problem, {"core_grid": grids[gi], "double_buffer": db})  # type: ignore[attr-defined]
            assert bound == float(lat[..., di, gi].min())
    assert t.structure_bound(problem, {}) == float(lat.min())  # type: ignore[attr-defined]


def _cores(grid: object) -> tuple[int, ...]:
    """The cores of each side of a grid (a per-axis side: their product)."""
    return tuple(side_cores(x) for x in parse_grid(str(grid)))


def _largest(grids: tuple[object, ...]) -> set[tuple[int, ...]]:
    """The cores per side of the grids no other grid matches or exceeds on every side."""
    sides = {_cores(g) for g in grids}
    return {x for x in sides if not any(y != x and all(a >= b for a, b in zip(y, x, strict=True)) for y in sides)}


def test_warm_starts_visit_every_largest_grid_and_the_search_proves_a_32_core_optimum() -> None:
    """ResNet-50 layer4.1.conv1 on ascend-a5 (36 cores): the optimum's grid has 2x16 cores (32; 2 on a row of the
    7x7 output, the M side per axis), and TPE (the space is above the enumeration limit) found only a 1x1x32 point
    8% worse until the warm starts covered every largest grid (one grid per cores per side: the per-axis splits of
    equal cores differ only in which axis takes them)."""
    t = get_target("ascend-a5")
    problem = conv2d(batch=1, in_channels=2048, out_channels=512, input_height=7, input_width=7, kernel=1)
    space = t.space(problem)
    assert space.size > 2_000_000
    warm = t.warm_starts(problem)
    assert _largest(space.params[7].choices) <= {_cores(w["core_grid"]) for w in warm}
    assert all(w[p.name] in p.choices for w in warm for p in space.params)
    best, grid = _optimum("ascend-a5", problem, None, None)
    assert _cores(grid) == (1, 2, 16)
    found = tune(problem, t, SearchSettings(), validate=False)
    assert found.proven_optimal and found.values["latency"] == best
