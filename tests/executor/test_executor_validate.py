"""The validation report, its derived tolerance, and the memory cap (proxy validation)."""

from __future__ import annotations

import tracemalloc

import numpy as np

from costmodels.ir import Level, Loop, Mapping
from executor import mutations
from executor.proxy import estimate_bytes, shrink
from executor.tolerance import derive
from executor.validate import DEFAULT_CAP_BYTES, validate
from workload.conv2d import conv2d
from workload.einsum import einsum


def gemm_mapping(m: int, n: int, k: int, tile: int) -> Mapping:
    return Mapping(
        levels=(
            Level(
                name="o",
                loops=(
                    Loop(axis="m", factor=m // tile),
                    Loop(axis="n", factor=n // tile),
                    Loop(axis="k", factor=k // tile),
                ),
            ),
            Level(
                name="t", loops=(Loop(axis="m", factor=tile), Loop(axis="n", factor=tile), Loop(axis="k", factor=tile))
            ),
        ),
        acc_dtype="f32",
    )


def test_report_fields_of_a_passing_run() -> None:
    p = einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, dtype="bf16")
    r = validate(p, gemm_mapping(64, 64, 64, 16))
    assert r.passed and r.method == "full" and r.checked_fraction == 1.0
    assert r.elements_compared == 64 * 64 and r.first_failing_index is None and r.failing_elements == 0
    assert 0 < r.max_abs_error < r.tolerance.sum_rtol * 64 * 4
    assert "sqrt(K=64)" in r.tolerance_reason and "bf16" not in r.tolerance_reason.split("u_acc")[1][:5]


def test_tolerance_grows_with_sqrt_k_and_uses_the_problems_accumulator() -> None:
    short, _ = derive(einsum("mk,kn->mn", {"m": 2, "k": 100, "n": 2}, dtype="bf16"))
    long, _ = derive(einsum("mk,kn->mn", {"m": 2, "k": 10000, "n": 2}, dtype="bf16"))
    assert np.isclose(long.sum_rtol / short.sum_rtol, 10.0)
    assert short.sum_rtol < 2.0**-8  # far below one bf16 rounding: a bf16 accumulator cannot hide in it
    exact, reason = derive(einsum("mk,kn->mn", {"m": 2, "k": 100, "n": 2}, dtype="i8"))
    assert exact.exact and "exactly" in reason


def test_failing_report_names_the_first_bad_index_and_coverage() -> None:
    p = einsum("mk,kn->mn", {"m": 32, "k": 32, "n": 32}, dtype="f32")
    broken = mutations.drop_tile(p, gemm_mapping(32, 32, 32, 8))
    assert broken is not None
    r = validate(p, broken)
    assert not r.passed and r.first_failing_index == (24, 0) and r.failing_elements == 8 * 32
    assert any("never visited" in n for n in r.notes)


def test_memory_cap_selects_a_proxy_that_keeps_the_tile_and_order() -> None:
    p = conv2d(batch=4, in_channels=32, out_channels=32, input_height=32, input_width=32, kernel=3, padding=1)
    m = Mapping(
        levels=(
            Level(name="o", loops=(Loop(axis="n", factor=4), Loop(axis="oh", factor=4), Loop(axis="ci", factor=4))),
            Level(
                name="t",
                loops=tuple(
                    Loop(axis=a, factor=s)
                    for a, s in {"oh": 8, "ow": 32, "fh": 3, "fw": 3, "ci": 8, "co": 32, "g": 1}.items()
                ),
            ),
        ),
        acc_dtype="f32",
    )
    cap = estimate_bytes(p, m) // 8
    proxy, pm, notes = shrink(p, m, cap)
    assert notes[-1].startswith("proxy loop factors n@o: 4->")
    assert estimate_bytes(proxy, pm) <= cap and pm.levels[-1] == m.levels[-1]
    assert proxy.axes["ci"] == 32 and proxy.axes["n"] < 4  # free axes shrink first, the reduction stays whole
    r = validate(p, m, memory_cap_bytes=cap)
    assert r.passed and r.method == "proxy" and 0 < r.checked_fraction < 1 and r.validated_axes == proxy.axes
    assert not validate(p, mutations.narrow_accumulator(m, "f8e4m3"), memory_cap_bytes=cap).passed


def test_8192_cubed_gemm_stays_under_the_default_cap() -> None:
    p = einsum("mk,kn->mn", {"m": 8192, "k": 8192, "n": 8192}, dtype="bf16", weight=1)
    m = gemm_mapping(8192, 8192, 8192, 512)
    assert estimate_bytes(p, m) > DEFAULT_CAP_BYTES
    tracemalloc.start()
    try:
        r = validate(p, m)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.passed and r.method == "proxy" and r.checked_fraction < 0.01
    assert peak < DEFAULT_CAP_BYTES


def test_sharded_convs_validate_from_their_halo_configs() -> None:
    from costmodels.tenstorrent.halo import build_halo
    from executor.validate import validate_sharded_conv
    from workload.conv2d import as_conv2d

    for kw in ({"stride": 2, "padding": 1}, {"dilation": 2, "padding": 2}, {"padding": 0}):
        p = conv2d(batch=2, in_channels=4, out_channels=8, input_height=9, input_width=7, kernel=3, **kw)  # type: ignore[arg-type]
        params = as_conv2d(p)
        assert params is not None
        # tile 32: ttnn's tile-high shards (`halo.shard_sticks`), the last cores empty
        for cores, tile in ((1, 1), (3, 1), (8, 1), (3, 32), (8, 32), (5, 4)):
            r = validate_sharded_conv(p, build_halo(params, cores, tile=tile))
            assert r.passed, (kw, cores, tile, r)
