"""Broken mappings of every target shape must fail validation; their correct originals must pass.

Each break is one a real mapping bug produces: a missing output tile, a reduction tile counted
twice, a halo off by one stick, a wrong loop stride, dummy (#) padding inside a reduction, and a
bf16 accumulator for a long bf16 reduction. Target-shaped mappings are built here (RNGD packet/row/
time levels, Trainium 128x128x512 tiles with K on partitions, Ascend 16x16x16 fractals, a K split
across cores, a Tenstorrent halo config); the registry's presets are broken the same way.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from costmodels.ir import Level, Loop, Mapping, coverage_errors
from costmodels.tenstorrent.halo import build_halo
from executor import mutations
from executor.validate import validate, validate_sharded_conv
from workload.conv2d import as_conv2d, conv2d
from workload.einsum import einsum
from workload.problem import Problem


def _m(acc: str, *levels: tuple[str, list[Loop]], fill: dict[str, dict[str, str]] | None = None) -> Mapping:
    return Mapping(
        target="hand",
        levels=tuple(Level(name=n, loops=tuple(lps)) for n, lps in levels),
        acc_dtype=acc,
        fill=fill or {},
    )


def L(axis: str, factor: int, spatial: bool = False) -> Loop:
    return Loop(axis=axis, factor=factor, spatial=spatial)


def rngd_like() -> tuple[Problem, Mapping]:
    """contraction-engine-rngd.txt style: H packet loops | Row: C=8 spatial | T: W=10+2# (dummy)."""
    p = conv2d(batch=1, in_channels=16, out_channels=8, input_height=10, input_width=10, kernel=3, padding=1)
    m = _m(
        "f32",
        ("H", [L("oh", 10), L("ci", 2), L("fh", 3), L("co", 8), L("fw", 3)]),
        ("Row", [L("ci", 8, True)]),
        ("T", [L("n", 1), L("g", 1), L("ow", 12)]),
    )
    return p, m


def trainium_like() -> tuple[Problem, Mapping]:
    """nc_matmul-shaped: K=128 on partitions, M tile 128, N tile 512 (moving free size)."""
    p = einsum("mk,kn->mn", {"m": 256, "k": 384, "n": 512}, dtype="bf16", weight=1)
    m = _m("f32", ("sbuf", [L("m", 2), L("n", 1), L("k", 3)]), ("pe", [L("k", 128, True), L("m", 128), L("n", 512)]))
    return p, m


def ascend_like() -> tuple[Problem, Mapping]:
    """TMATMUL fractals 16x16x16 under L0/L1 loops and two cores splitting M."""
    p = einsum("mk,kn->mn", {"m": 128, "k": 128, "n": 128}, dtype="f16", weight=1)
    m = _m(
        "f32",
        ("core", [L("m", 2, True)]),
        ("L1", [L("n", 2), L("k", 2)]),
        ("L0", [L("m", 4), L("n", 4), L("k", 4)]),
        ("cube", [L("m", 16), L("n", 16), L("k", 16)]),
    )
    return p, m


def ksplit_like() -> tuple[Problem, Mapping]:
    """K split across 4 cores (spatial partial sums reduced at the end), padded N with zero-filled K."""
    p = einsum("vmk,vnk->vmn", {"v": 2, "m": 32, "n": 40, "k": 200}, dtype="bf16", weight=1)
    fill = {"A": {"k": "zero"}, "B": {"k": "zero"}}
    m = _m(
        "f32",
        ("chip", [L("k", 4, True), L("v", 2)]),
        ("core", [L("k", 2), L("n", 3)]),
        ("tile", [L("m", 32), L("n", 16), L("k", 32)]),
        fill=fill,
    )
    return p, m


SHAPES = {"rngd": rngd_like, "trainium": trainium_like, "ascend": ascend_like, "ksplit": ksplit_like}
BREAKS = {
    "missing-tile": mutations.drop_tile,
    "k-tile-twice": mutations.repeat_reduction_tile,
    "wrong-stride": mutations.wrong_stride,
    "dummy-in-reduction": mutations.dummy_in_reduction,
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_correct_target_shaped_mapping_passes(shape: str) -> None:
    p, m = SHAPES[shape]()
    assert coverage_errors(p, m) == []
    report = validate(p, m)
    assert report.passed, report
    assert report.method == "full" and report.elements_compared == math.prod(p.shape(p.output))


@pytest.mark.parametrize("brk", sorted(BREAKS))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_broken_target_shaped_mapping_fails(shape: str, brk: str) -> None:
    p, m = SHAPES[shape]()
    broken = BREAKS[brk](p, m)
    assert broken is not None, f"{brk} does not apply to {shape}"
    report = validate(p, broken)
    assert not report.passed, report
    assert report.first_failing_index is not None and report.failing_elements > 0


def test_bf16_accumulator_fails_a_long_bf16_reduction() -> None:
    p = einsum("mk,kn->mn", {"m": 32, "k": 4096, "n": 32}, dtype="bf16", out_dtype="f32", weight=1)
    m = _m("f32", ("outer", [L("k", 32)]), ("tile", [L("m", 32), L("n", 32), L("k", 128)]))
    assert validate(p, m).passed
    report = validate(p, mutations.narrow_accumulator(m, "bf16"))
    assert not report.passed and report.max_abs_error > 0


def test_halo_off_by_one_stick_fails() -> None:
    p = conv2d(batch=1, in_channels=8, out_channels=8, input_height=12, input_width=10, kernel=3, padding=1, stride=1)
    params = as_conv2d(p)
    assert params is not None
    config = build_halo(params, 4, tile=1)
    assert validate_sharded_conv(p, config).passed
    broken = mutations.shift_halo_chunk(config, 1)
    assert broken is not None
    report = validate_sharded_conv(p, broken)
    assert not report.passed and report.first_failing_index is not None


# ---- every registered preset ---------------------------------------------------------------------


def _registry_mapping(preset: str) -> tuple[Problem, Mapping]:
    registry = pytest.importorskip("costmodels.registry")
    try:
        target = registry.get_target(preset)
    except (ImportError, ModuleNotFoundError) as exc:  # a family still being written
        pytest.skip(f"{preset}: {exc}")
    for dtype in ("bf16", "f16"):
        p = einsum("mk,kn->mn", {"m": 96, "k": 512, "n": 80}, dtype=dtype, weight=1)
        if not target.supports(p):
            break
    space = target.space(p)
    if space.size > 200_000:  # sample the space instead of enumerating it
        rng = np.random.default_rng(0)
        cols = {q.name: np.array([q.choices[rng.integers(len(q.choices))] for _ in range(2000)]) for q in space.params}
    else:
        cols = space.columns()
    score = target.score_batch(p, cols)
    lat = np.where(np.asarray(score.feasible, bool), np.asarray(score.objectives["latency"], float), np.inf)
    best = int(np.argmin(lat))
    point = {k: (v[best].item() if isinstance(v[best], np.generic) else v[best]) for k, v in cols.items()}
    return p, target.mapping(p, point)


def _presets() -> list[str]:
    from costmodels.registry import target_names

    presets = target_names()
    assert presets, "the registry lists no presets"
    return presets


@pytest.mark.parametrize("preset", _presets())
def test_registry_mapping_passes_and_its_breaks_fail(preset: str) -> None:
    p, m = _registry_mapping(preset)
    assert validate(p, m).passed
    tried = 0
    for name, brk in BREAKS.items():
        broken = brk(p, m)
        if broken is None:
            continue
        tried += 1
        assert not validate(p, broken).passed, (preset, name)
    assert tried >= 2, f"{preset}: too few breaks applied"
