"""Every Trainium constraint, tripped; and every point of small spaces covers its problem exactly once."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from costmodels.ir import Level, Loop, Mapping, coverage_errors
from costmodels.protocol import Choice, Violation
from costmodels.registry import get_target
from costmodels.trainium.space import LADDER
from costmodels.trainium.target import TrainiumTarget
from costmodels.trainium.violations import CODES as CODES  # the family's codes: the `tripped` fixture reads them
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem


def target(name: str = "trn1") -> TrainiumTarget:
    """A target over the ladder space (`space.LADDER`): these checks enumerate whole spaces, and the formulas
    do not depend on the tiles offered (every tile count: test_trainium_tile_bounds.py)."""
    t = get_target(name)
    assert isinstance(t, TrainiumTarget)
    t.tiles = LADDER
    return t


def gemm(m: int = 256, k: int = 256, n: int = 256, dtype: str = "bf16") -> Problem:
    return einsum("mk,kn->mn", {"m": m, "k": k, "n": n}, dtype=dtype, weight=1)


BASE: dict[str, Choice] = {
    "stationary": "weight", "tile_stat": 128, "tile_mov": 512, "tile_k": 128, "block_stat": 1, "block_mov": 1,
    "block_k": 1, "order": "smk", "acc": "sbuf", "cores": 1, "shard": "m",
}  # fmt: skip


def with_tile(mapping: Mapping, axis: str, factor: int) -> Mapping:
    """The mapping with the instruction-level loop on `axis` set to `factor` (outer loops shrunk to cover)."""
    levels = []
    for lvl in mapping.levels:
        loops = tuple(lp for lp in lvl.loops if lp.axis != axis)
        if lvl.name == "nc_matmul":
            loops = (*loops, Loop(axis=axis, factor=factor))
        levels.append(Level(name=lvl.name, loops=loops))
    return mapping.model_copy(update={"levels": tuple(levels)})


def codes(t: TrainiumTarget, p: Problem, m: Mapping) -> set[str]:
    return {v.code for v in t.check(p, m)}


def test_moving_free_over_512_is_rejected_with_the_fix() -> None:
    # nki-nc_matmul.txt: moving free axis <= 512
    p = gemm(m=640)
    t = target()
    m = with_tile(t.mapping(p, BASE), "m", 640)
    msgs = {v.code: v.message for v in t.check(p, m)}
    assert msgs["moving-free"] == "moving free size 640 exceeds the 512 limit of nc_matmul: tile m by 512 or less"
    # the 640 fp32 results also overflow one 2 KiB PSUM bank (hardware-facts.md §2.1 PSUM row)
    assert "2560 B" in msgs["psum-bank"] and "2048 B" in msgs["psum-bank"]


def test_stationary_free_over_128_is_rejected() -> None:
    # nki-nc_matmul.txt: stationary free axis <= 128
    p = gemm(n=256)
    t = target()
    msgs = {v.code: v.message for v in t.check(p, with_tile(t.mapping(p, BASE), "n", 256))}
    assert msgs["stationary-free"].startswith("stationary free size 256 exceeds the 128 limit")
    assert "tile n by 128" in msgs["stationary-free"]


def test_contraction_over_128_needs_fp8_double_row_on_trn2() -> None:
    # nki-nc_matmul.txt: partition (contraction) <= 128; hardware-facts.md §2.1 FP8 double-row row: 256 on NC-v3
    for name, dtype, ok in [("trn1", "bf16", False), ("trn2", "bf16", False), ("trn1", "f8e4m3", False),
                            ("trn2", "f8e4m3", True)]:  # fmt: skip
        p = gemm(k=256, dtype=dtype)
        t = target(name)
        m = with_tile(t.mapping(p, BASE), "k", 256)
        assert ("contraction" not in codes(t, p, m)) is ok, (name, dtype)
    p = gemm(k=512, dtype="f8e4m3")
    t = target("trn2")
    assert "contraction" in codes(t, p, with_tile(t.mapping(p, BASE), "k", 512))


def test_fp8_space_offers_k256_only_where_double_row_exists() -> None:
    p = gemm(k=512, dtype="f8e5m2")
    choices = {n: {q.name: q.choices for q in target(n).space(p).params}["tile_k"] for n in ("trn1", "trn2")}
    assert 256 in choices["trn2"] and 256 not in choices["trn1"]


def test_psum_capacity_trips_with_too_many_open_accumulators() -> None:
    # hardware-facts.md §2.1 PSUM row / §2.2 step 3: concurrent accumulators <= 8 banks per partition
    p = gemm(m=2048, k=512, n=2048)
    t = target()
    point = {**BASE, "acc": "psum", "block_stat": 4, "block_mov": 4}
    msgs = {v.code: v.message for v in t.check(p, t.mapping(p, point))}
    assert "16 PSUM banks are needed" in msgs["psum-capacity"] and "PSUM has 8" in msgs["psum-capacity"]
    assert not t.check(p, t.mapping(p, {**point, "acc": "sbuf"}))
    assert not t.check(p, t.mapping(p, {**point, "block_stat": 2, "block_mov": 4}))


def test_sbuf_capacity_trips_and_shrinking_override_trips_sooner() -> None:
    # hardware-facts.md §2.1 SBUF row: 192 KiB per partition on NC-v2; §2.2 step 4
    p = gemm(m=8192, k=8192, n=2048)
    t = target()
    big = {**BASE, "block_stat": 16, "block_mov": 16, "block_k": 16}
    msgs = {v.code: v.message for v in t.check(p, t.mapping(p, big))}
    assert "per partition, 192.0 KiB available" in msgs["sbuf-capacity"]
    small = {**BASE, "block_k": 4}
    assert not t.check(p, t.mapping(p, small))
    tiny = get_target("trn1", {"sbuf_partition_bytes": 8 * 1024})
    assert "sbuf-capacity" in codes(tiny, p, tiny.mapping(p, small))  # type: ignore[arg-type]


def test_more_cores_than_the_chip_has_is_rejected() -> None:
    p = gemm(m=4096)
    big = target("trn2")
    m = big.mapping(p, {**BASE, "cores": 8})
    msgs = {v.code: v.message for v in target("trn1").check(p, m)}
    assert "spreads over 8 NeuronCores, trn1 has 2" in msgs["cores"]


def test_sharding_the_contraction_is_rejected() -> None:
    p = gemm(k=1024)
    t = target()
    m = t.mapping(p, BASE)
    chip = Level(name="chip", loops=(Loop(axis="k", factor=2, spatial=True),))
    hbm = Level(name="hbm", loops=tuple(lp if lp.axis != "k" else Loop(axis="k", factor=4) for lp in m.levels[1].loops))
    bad = m.model_copy(update={"levels": (chip, hbm, *m.levels[2:])})
    assert coverage_errors(p, bad) == []
    assert "k-sharding" in codes(t, p, bad)


def test_batch_inside_one_instruction_is_rejected() -> None:
    p = einsum("vmk,vkn->vmn", {"v": 4, "m": 64, "k": 64, "n": 64}, dtype="bf16", weight=1)
    t = target()
    assert "batch-in-instruction" in codes(t, p, with_tile(t.mapping(p, BASE), "v", 4))


def test_broken_coverage_and_foreign_levels_are_reported() -> None:
    p = gemm(m=1024)
    t = target()
    m = t.mapping(p, BASE)
    short = with_tile(m, "m", 256)  # the hbm loop still has 2 trips of 512: covers 0..511 twice over 256
    assert "coverage" in codes(t, p, short)
    foreign = m.model_copy(update={"levels": (Level(name="tile", loops=m.levels[-1].loops),)})
    assert codes(t, p, foreign) == {"structure"}


@pytest.mark.parametrize(
    ("problem", "code"),
    [
        (einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, dtype="i8", weight=1), "dtype"),
        (einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, dtype="i4", weight=1), "dtype"),
        (einsum("mk->m", {"m": 64, "k": 64}, dtype="bf16"), "unary"),
        (einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 8}, dtype="bf16", reduce_op="max", weight=1), "reduce-op"),
    ],
)
def test_unsupported_problems_are_rejected_with_a_reason(problem: Problem, code: str) -> None:
    # nki-nc_matmul.txt: float8/bfloat16/float16/tfloat32/float32 inputs only; unary work is the Vector Engine's
    for name in ("trn1", "trn2"):
        t = target(name)
        reasons = t.supports(problem)
        assert code in {v.code for v in reasons}
        assert all(len(v.message) > 30 for v in reasons)
        space = t.space(problem)
        m = t.mapping(problem, {p.name: p.choices[0] for p in space.params})
        assert code in codes(t, problem, m)
        assert not np.asarray(t.score_batch(problem, space.columns()).feasible).any()
    assert "cast it to bf16" in " ".join(v.message for v in target().supports(problem)) or code != "dtype"


def _tile(name: str, p: Problem, axis: str, factor: int, point: dict[str, Choice] = BASE) -> list[Violation]:
    t = target(name)
    return t.check(p, with_tile(t.mapping(p, point), axis, factor))


def _mapped(p: Problem, point: dict[str, Choice], t: TrainiumTarget | None = None) -> list[Violation]:
    t = t or target()
    return t.check(p, t.mapping(p, point))


def _k_sharded() -> list[Violation]:
    p, t = gemm(k=1024), target()
    m = t.mapping(p, BASE)
    chip = Level(name="chip", loops=(Loop(axis="k", factor=2, spatial=True),))
    hbm = Level(name="hbm", loops=tuple(lp if lp.axis != "k" else Loop(axis="k", factor=4) for lp in m.levels[1].loops))
    return t.check(p, m.model_copy(update={"levels": (chip, hbm, *m.levels[2:])}))


def _foreign_levels() -> list[Violation]:
    p, t = gemm(), target()
    m = t.mapping(p, BASE)
    return t.check(p, m.model_copy(update={"levels": (Level(name="tile", loops=m.levels[-1].loops),)}))


#: one problem and mapping that trips each code of `CODES`
TRIPS: dict[str, Callable[[], list[Violation]]] = {
    "unary": lambda: target().supports(einsum("mk->m", {"m": 64, "k": 64}, dtype="bf16")),
    "reduce-op": lambda: target().supports(
        einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 8}, dtype="bf16", reduce_op="max", weight=1)
    ),
    "dtype": lambda: target().supports(gemm(64, 64, 64, dtype="i8")),
    "knobs": lambda: target().check(gemm(), target().mapping(gemm(), BASE).model_copy(update={"knobs": {}})),
    "structure": _foreign_levels,
    "coverage": lambda: _tile("trn1", gemm(m=1024), "m", 256),
    "stationary-free": lambda: _tile("trn1", gemm(n=256), "n", 256),
    "moving-free": lambda: _tile("trn1", gemm(m=640), "m", 640),
    "contraction": lambda: _tile("trn1", gemm(k=256), "k", 256),
    "psum-bank": lambda: _tile("trn1", gemm(m=640), "m", 640),
    "psum-capacity": lambda: _mapped(gemm(2048, 512, 2048), {**BASE, "acc": "psum", "block_stat": 4, "block_mov": 4}),
    "sbuf-capacity": lambda: _mapped(
        gemm(8192, 8192, 2048), {**BASE, "block_stat": 16, "block_mov": 16, "block_k": 16}
    ),
    "cores": lambda: target("trn1").check(gemm(m=4096), target("trn2").mapping(gemm(m=4096), {**BASE, "cores": 8})),
    "k-sharding": _k_sharded,
    "batch-in-instruction": lambda: _tile(
        "trn1", einsum("vmk,vkn->vmn", {"v": 4, "m": 64, "k": 64, "n": 64}, dtype="bf16", weight=1), "v", 4
    ),
}


def test_code_trips(tripped: tuple[str, set[str]]) -> None:
    """Each code of CODES, tripped by its TRIPS case (the fixture holds the table to CODES)."""
    code, found = tripped
    assert code in found


SMALL = {
    "gemm": einsum("mk,kn->mn", {"m": 24, "k": 136, "n": 20}, dtype="bf16", weight=1),
    "bmm": einsum("vmk,vnk->vmn", {"v": 3, "m": 20, "n": 12, "k": 36}, dtype="f16", weight=1),
    "vecmat": einsum("k,kn->n", {"k": 40, "n": 24}, dtype="bf16", weight=1),
    "conv": conv2d(
        batch=1, in_channels=4, out_channels=8, input_height=7, input_width=7, kernel=3, stride=2, padding=1
    ),
    "f8": einsum("mk,kn->mn", {"m": 16, "k": 300, "n": 16}, dtype="f8e4m3", weight=1),
    "f32": einsum("mk,kn->mn", {"m": 24, "k": 40, "n": 20}, dtype="f32", weight=0),
}


@pytest.mark.parametrize("name", list(SMALL))
@pytest.mark.parametrize("preset", ["trn1", "trn2"])
def test_every_point_covers_and_batch_agrees(name: str, preset: str) -> None:
    p = SMALL[name]
    t = target(preset)
    space = t.space(p)
    cols = space.columns()
    n = len(cols["stationary"])
    score = t.score_batch(p, cols)
    lat = np.asarray(score.objectives["latency"])
    lb = t.lower_bound(p).cycles / t.hardware.te_clock_hz
    step = max(1, n // 300)
    for i in range(n):
        point = {k: (v[i].item() if isinstance(v[i], np.generic) else v[i]) for k, v in cols.items()}
        m = t.mapping(p, point)
        assert coverage_errors(p, m) == [], point
        if i % step:
            continue
        ok = not t.check(p, m)
        assert bool(score.feasible[i]) == ok, point
        if ok:
            assert lat[i] == pytest.approx(t.cost(p, m).seconds, rel=1e-9)
            assert lat[i] >= lb * (1 - 1e-9)
    assert np.isfinite(lat).any()
