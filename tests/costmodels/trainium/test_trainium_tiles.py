"""Tile sizes of the Trainium space (costmodels/trainium/tiles.py; issue #12): the legal limits, rule T1
checked on priced mappings against the unbalanced tiles it leaves out, the ladders and the point budget,
and the space sizes quoted in `build_space`'s docstring."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import costmodels.trainium.space as space_module
from costmodels.family import zero_fill
from costmodels.ir import Loop, Mapping
from costmodels.protocol import Choice
from costmodels.registry import get_target
from costmodels.trainium.scoring import price_grid
from costmodels.trainium.space import EVERY, LADDER, build_space, problem_consts
from costmodels.trainium.target import TrainiumTarget
from costmodels.trainium.tiles import POINT_BUDGET, POW2, THREE_HALVES, balanced, ladder, role_limit
from mapper.search import tune
from mapper.settings import SearchSettings
from workload import named
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem


def target(name: str) -> TrainiumTarget:
    t = get_target(name, {"tile_space": "every"})
    assert isinstance(t, TrainiumTarget)
    return t


def gemm(m: int, k: int, n: int, dtype: str = "bf16") -> Problem:
    return einsum("mk,kn->mn", {"m": m, "k": k, "n": n}, dtype=dtype, weight=1)


def test_role_limits_are_the_nc_matmul_limits() -> None:
    # nki-nc_matmul.txt: stationary free <= 128, moving free <= 512, partitions <= 128; double_row 256 (trn2 fp8)
    for preset in ("trn1", "trn2"):
        hw = target(preset).hardware
        assert (role_limit(hw, "s", False), role_limit(hw, "m", False), role_limit(hw, "k", False)) == (128, 512, 128)
    assert role_limit(target("trn2").hardware, "k", True) == 256
    assert role_limit(target("trn1").hardware, "k", True) == 128  # NeuronCore-v2 has no double_row
    fp8 = gemm(64, 1024, 64, dtype="f8e4m3")
    assert max(next(q.choices for q in build_space(fp8, target("trn2").hardware).params if q.name == "tile_k")) == 256


def test_ladders() -> None:
    assert ladder(128, 32, POW2) == (128, 64, 32)
    assert ladder(128, 32, THREE_HALVES) == (128, 96, 64, 48, 32)
    assert ladder(512, 64, THREE_HALVES) == (512, 384, 256, 192, 128, 96, 64)
    assert ladder(256, 32, THREE_HALVES)[:3] == (256, 192, 128)
    with pytest.raises(ValueError, match="unknown tile ladder"):
        ladder(128, 32, "fibonacci")
    assert [balanced(4099, t) for t in (512, 384, 257)] == [456, 373, 257]
    assert all(balanced(e, t) <= t and math.ceil(e / balanced(e, t)) == math.ceil(e / t)
               for e in range(1, 300) for t in range(1, 130))  # fmt: skip


def _counts(mapping: Mapping, axis: str) -> int:
    return math.prod(lp.factor for lvl in mapping.levels[:3] for lp in lvl.loops if lp.axis == axis)


def _with_tile(problem: Problem, mapping: Mapping, axis: str, tile: int) -> Mapping:
    lvl = mapping.levels[3]
    loops = tuple(Loop(axis=lp.axis, factor=tile if lp.axis == axis else lp.factor, spatial=lp.spatial)
                  for lp in lvl.loops)  # fmt: skip
    levels = (*mapping.levels[:3], lvl.model_copy(update={"loops": loops}))
    fill = zero_fill(problem, levels, problem.reduction_axes)  # padding on K is zero-filled, as build_mapping does
    return mapping.model_copy(update={"levels": levels, "fill": fill})


def _objectives(t: TrainiumTarget, p: Problem, m: Mapping) -> tuple[set[str], np.ndarray]:
    bad = {v.code for v in t.check(p, m)}
    c = t.cost(p, m)
    return bad, np.asarray([c.cycles, c.offchip_bytes, c.footprint_bytes, c.energy_pj])


CASES = [
    ("trn1", gemm(200, 300, 150)),
    ("trn2", gemm(700, 130, 90)),
    ("trn1", gemm(37, 530, 600, dtype="f32")),
    ("trn2", conv2d(batch=1, in_channels=13, out_channels=40, input_height=14, input_width=14, kernel=3, padding=1)),
]


@pytest.mark.parametrize(("preset", "problem"), CASES)
def test_rule_t1_every_unbalanced_tile_costs_at_least_the_balanced_one(preset: str, problem: Problem) -> None:
    """Random points of the space after T1; each tile of each point widened to every larger tile with the same count."""
    t = target(preset)
    space = build_space(problem, t.hardware, tiles=EVERY)
    rng = random.Random(5)
    compared = worse = 0
    for _ in range(25):
        point: dict[str, Choice] = {q.name: rng.choice(q.choices) for q in space.params}
        kept = t.mapping(problem, point)
        bad, cost = _objectives(t, problem, kept)
        assert not {"coverage", "structure"} & bad
        for lp in kept.levels[3].loops:
            e = problem.axes[lp.axis]
            n = math.ceil(e / lp.factor)  # tiles of the axis; the outer levels split this count
            assert lp.factor == balanced(e, lp.factor) and _counts(kept, lp.axis) >= n
            top = e + 64 if n == 1 else math.ceil(e / (n - 1)) - 1  # the largest tile with the same count
            for tile in sorted({lp.factor + 1, (lp.factor + top) // 2, top} - {lp.factor}):
                if tile <= lp.factor or math.ceil(e / tile) != n:
                    continue
                wide = _with_tile(problem, kept, lp.axis, tile)
                wbad, wcost = _objectives(t, problem, wide)
                assert "coverage" not in wbad  # a legal padded mapping of the problem
                assert bad <= wbad, (point, lp.axis, tile)
                assert np.all(wcost >= cost), (point, lp.axis, tile, cost, wcost)
                compared += 1
                worse += bool(np.any(wcost > cost))
    assert compared > 30 and worse > compared // 2  # the padding shows in most comparisons


def test_every_tile_space_is_one_tile_per_count() -> None:
    hw = target("trn1").hardware
    p = gemm(300, 40, 1000)
    ch = {q.name: q.choices for q in build_space(p, hw, tiles=EVERY).params}
    # weight stationary: s = n (1000), m = m (300); the other way round too: the union of both splits is kept
    counts = {(math.ceil(1000 / balanced(1000, c)), math.ceil(300 / balanced(300, c))) for c in range(1, 129)}
    assert len(ch["tile_stat"]) == len(counts)
    assert sorted(balanced(40, int(c)) for c in ch["tile_k"]) == [1, 2, 3, 4, 5, 6, 7, 8, 10, 14, 20, 40]  # per count


def _splits(p: Problem, name: str, caps: tuple[Choice, ...]) -> set[tuple[int, ...]]:
    """The balanced tiles of a GEMM's tile caps, for both stationary choices (s = n or m, moving = m or n)."""
    m, k, n = p.axes["m"], p.axes["k"], p.axes["n"]
    pair = {"tile_stat": (n, m), "tile_mov": (m, n), "tile_k": (k, k)}[name]
    return {tuple(balanced(e, int(c)) for e in pair) for c in caps}


def test_the_ladder_widens_only_within_the_budget() -> None:
    assert SearchSettings().enumerate_limit == POINT_BUDGET
    rng = random.Random(11)
    widened = 0
    for preset in ("trn1", "trn2"):
        hw = target(preset).hardware
        for _ in range(12):
            p = gemm(rng.randint(1, 5000), rng.randint(1, 5000), rng.randint(1, 5000))
            auto, narrow = build_space(p, hw, tiles=LADDER), build_space(p, hw, tiles=POW2)
            assert auto.size <= max(POINT_BUDGET, narrow.size)
            for a, b in zip(auto.params, narrow.params, strict=True):
                if a.name.startswith("tile"):
                    assert _splits(p, b.name, b.choices) <= _splits(p, a.name, a.choices)
            widened += auto.size > narrow.size
    assert widened >= 6


def _best(t: TrainiumTarget, p: Problem, tiles: str) -> float:
    space = build_space(p, t.hardware, tiles=tiles)
    grid = price_grid(p, t.hardware, space, lambda r: problem_consts(p, t.hardware, r, supported=True))
    return float(grid.latency.min())


def test_the_wider_ladder_finds_better_mappings_on_awkward_sizes() -> None:
    t, p = target("trn1"), gemm(1094, 532, 2079)
    assert build_space(p, t.hardware, tiles=LADDER).size > build_space(p, t.hardware, tiles=POW2).size
    assert _best(t, p, LADDER) < _best(t, p, POW2) * 0.96  # measured -4.31%


def test_every_tile_count_is_the_targets_space_and_beats_the_ladder_on_awkward_sizes() -> None:
    t, p = target("trn1"), gemm(1094, 532, 2079)
    assert t.space(p).size == build_space(p, t.hardware, tiles=EVERY).size > POINT_BUDGET
    r = tune(p, t, SearchSettings(max_seconds=120), validate=False)
    assert r.certificate is not None and r.certificate.unexplored == 0  # proven over every tile count
    assert r.cost is not None and r.cost.seconds <= _best(t, p, LADDER)


#: (every tile with no rule, offered: after rule T1 and the merges, the ladder, pow2) as quoted in `build_space`'s doc
SIZES = {
    ("trn1", "gemm"): (150_994_944_000, 13_271_040_000, 1_260_000, 432_000),
    ("trn2", "gemm"): (905_969_664_000, 53_084_160_000, 1_728_000, 1_728_000),
    ("trn1", "conv"): (150_994_944_000, 108_864_000, 648_000, 432_000),
    ("trn2", "conv"): (905_969_664_000, 435_456_000, 1_728_000, 1_728_000),
}


@pytest.mark.parametrize("key", list(SIZES))
def test_space_sizes_quoted_in_the_docs(key: tuple[str, str]) -> None:
    preset, kind = key
    hw = target(preset).hardware
    if kind == "gemm":
        p = gemm(4096, 4096, 4096)
    else:
        p = next(q for q in named.load("resnet50") if q.label.endswith("layer1.0.conv2"))
        assert (p.axes["fh"], p.axes["ci"], p.axes["co"], p.axes["oh"]) == (3, 64, 64, 56)
    every, after, ladder_size, before = SIZES[key]
    cores_x_shards = 2 * 3 if preset == "trn1" else 4 * 9  # (1, 2) x (m, s, b); (1, 2, 4, 8) x 3 roles + 6 pairs
    assert every == 2 * 128 * 512 * 128 * 5**3 * 6 * 2 * cores_x_shards
    assert build_space(p, hw).size == build_space(p, hw, tiles=EVERY).size == after
    assert build_space(p, hw, tiles=LADDER).size == ladder_size <= POINT_BUDGET
    assert build_space(p, hw, tiles=POW2).size == before
    doc = space_module.build_space.__doc__ or ""
    for n in (every, after, ladder_size, before):
        assert f"{n:,}" in doc
