"""Each Ascend fact of the presets, checked against the figure of its source.

Sources: hardware-facts.md §3.1 (the facts table), pto-tmatmul.txt and pto-trowprod.txt.
"""

from __future__ import annotations

import pytest

from costmodels.ascend.hardware import AscendHardware
from costmodels.ascend.target import AscendTarget
from costmodels.presets import preset_sources
from costmodels.registry import get_target, target_names
from workload.einsum import einsum
from workload.errors import ProblemError

PRESETS = ("ascend-910b", "ascend-a5")


def hw(preset: str) -> AscendHardware:
    t = get_target(preset)
    assert isinstance(t, AscendTarget)
    return t.hardware


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_are_registered_and_every_field_is_cited(preset: str) -> None:
    assert preset in target_names()
    sources = preset_sources(preset)
    missing = [f for f in AscendHardware.model_fields if not sources.get(f)]
    assert missing == []
    assert all(".txt" in s or ".md" in s or s.startswith("ASSUMPTION") for s in sources.values())


def test_core_counts() -> None:
    # hardware-facts.md §3.1 Core organisation (910B2): 24 AIC + 48 AIV; A5 (950PR_9599): 36 AIC + 72 AIV
    assert (hw("ascend-910b").aic_cores, hw("ascend-910b").aiv_cores) == (24, 48)
    assert (hw("ascend-a5").aic_cores, hw("ascend-a5").aiv_cores) == (36, 72)


@pytest.mark.parametrize("preset", PRESETS)
def test_cube_fractals_per_dtype(preset: str) -> None:
    # hardware-facts.md §3.1 Cube fractal: 16x16x16 f16/bf16, 16x32x16 int8, 16x8x16 fp32 (k0 = 32 B / sizeof)
    h = hw(preset)
    assert (h.fractal_m, h.fractal_n) == (16, 16)
    assert (h.k0("f16"), h.k0("bf16"), h.k0("i8"), h.k0("f32")) == (16, 16, 32, 8)
    # base tile of 512 B for A/B: every fractal is 16 x k0 elements of 32 B rows
    for d, k0 in h.fractal_k.items():
        assert 16 * k0 * {"f16": 2, "bf16": 2, "i8": 1, "i4": 0.5, "f32": 4, "f8e4m3": 1, "f8e5m2": 1}[d] == 512


def test_fp8_fractal_only_on_a5() -> None:
    # hardware-facts.md §3.1 A5 row: fp8 16x32x16 (CANN-950); A2/A3 has no fp8 cube
    assert hw("ascend-a5").k0("f8e4m3") == 32
    assert "f8e4m3" not in hw("ascend-910b").fractal_k


def test_buffer_capacities() -> None:
    # hardware-facts.md §3.1 Buffers A2/A3 and A5 (PTO buffer_limits.hpp; A5 UB from CANN-950)
    b = hw("ascend-910b")
    assert (b.l0a_bytes, b.l0b_bytes, b.l0c_bytes, b.l1_bytes, b.ub_bytes) == (
        64 << 10,
        64 << 10,
        128 << 10,
        512 << 10,
        192 << 10,
    )
    a = hw("ascend-a5")
    assert (a.l0a_bytes, a.l0b_bytes, a.l0c_bytes, a.l1_bytes, a.ub_bytes) == (
        64 << 10,
        64 << 10,
        256 << 10,
        512 << 10,
        253952,
    )
    assert b.l2_bytes == 192 << 20 and a.l2_bytes == 128 << 20


def test_data_path_rates() -> None:
    # hardware-facts.md §3.1 Data-path rates per AIC (CANN ini), A5 rates (CANN-950)
    b, a = hw("ascend-910b"), hw("ascend-a5")
    assert (b.l1_to_l0a_bytes_per_cycle, b.l1_to_l0b_bytes_per_cycle) == (512, 256)
    assert (a.l1_to_l0a_bytes_per_cycle, a.l1_to_l0b_bytes_per_cycle) == (256, 256)
    assert (b.hbm_bytes_per_cycle_per_core, b.l2_bytes_per_cycle_per_core) == (32, 110)
    assert (a.hbm_bytes_per_cycle_per_core, a.l2_bytes_per_cycle_per_core) == (31, 100)
    # derived: 24 x 32 B x 1.8 GHz = 1.38 TB/s aggregate HBM
    assert b.aic_cores * b.hbm_bytes_per_cycle_per_core * b.clock_hz == pytest.approx(1.38e12, rel=0.01)
    # PTO arch_config.hpp: L0C->GM 70 GiB/s and GM->UB 100.9 GiB/s at 1.85 GHz
    assert b.l0c_to_gm_bytes_per_cycle == pytest.approx(70 * 2**30 / 1.85e9, rel=0.01)
    assert b.gm_to_ub_bytes_per_cycle == pytest.approx(100.9 * 2**30 / 1.85e9, rel=0.01)


def test_clock_and_derived_fp16_peak() -> None:
    # hardware-facts.md §3.1 Clock (cube_freq 1800 MHz) and Peak (derived): 24 x 4096 x 2 x 1.8 GHz = 354 TFLOPS
    t = get_target("ascend-910b")
    p = einsum("mk,kn->mn", {"m": 4096, "n": 4096, "k": 4096}, dtype="f16", weight=1)
    lb = t.lower_bound(p)
    tflops = 2 * p.macs / (lb.compute_cycles / t.hardware.clock_hz) / 1e12  # type: ignore[attr-defined]
    assert tflops == pytest.approx(354, rel=0.01)
    # int8 twice, fp32 a quarter (r = 2 and k0 = 8)
    h = hw("ascend-910b")
    assert h.macs_per_cycle("i8") == 2 * h.macs_per_cycle("f16") == 8 * h.macs_per_cycle("f32")


def test_tmatmul_triples_per_generation() -> None:
    # pto-tmatmul.txt, Constraints: A2A3 triples; A5 adds fp8 pairs (hardware-facts.md §3.1: all 4 e4m3/e5m2 combos)
    a2 = set(hw("ascend-910b").matmul_triples)
    assert a2 == {("i32", "i8", "i8"), ("f32", "f16", "f16"), ("f32", "f32", "f32"), ("f32", "bf16", "bf16")}
    a5 = set(hw("ascend-a5").matmul_triples)
    fp8 = {("f32", x, y) for x in ("f8e4m3", "f8e5m2") for y in ("f8e4m3", "f8e5m2")}
    assert a5 == a2 | fp8
    assert hw("ascend-910b").tmatmul_max_dim == hw("ascend-a5").tmatmul_max_dim == 4095


def test_cube_cycle_constants() -> None:
    # hardware-facts.md §3.1 Cube cycle model: 6-cycle head, r = 2 for fp32
    h = hw("ascend-910b")
    assert (h.cube_head_cycles, h.cube_repeats("f32"), h.cube_repeats("f16"), h.cube_repeats("i8")) == (6, 2, 1, 1)


def test_vector_constants() -> None:
    # hardware-facts.md §3.1 Vector unit: repeat 256 B of 8 x 32 B blocks, vmul 2 cycles/repeat, vcadd 7
    # §3.2 step 7: 43 cycles per 32 B vmul block on A2/A3; §3.1 TROWPROD: A5 tree 7 steps b16 / 6 b32
    for preset in PRESETS:
        h = hw(preset)
        assert (h.vector_repeat_bytes, h.vector_block_bytes, h.vector_repeat_cycles) == (256, 32, 2)
        assert (h.vcadd_repeat_cycles, h.vcadd_head_cycles, h.vcadd_tail_cycles) == (7, 14, 32)
        assert (h.rowprod_tree_steps_b16, h.rowprod_tree_steps_b32) == (7, 6)
        assert h.vector_dtypes == ("f16", "f32")
    assert hw("ascend-910b").rowprod_block_cycles == 43
    assert not hw("ascend-910b").rowprod_register_tree and hw("ascend-a5").rowprod_register_tree


def test_recommended_base_tiles() -> None:
    # hardware-facts.md §3.1 Recommended GEMM base tiles (PTO performance-best-practices.md)
    assert hw("ascend-910b").recommended_base_mkn == (128, 64, 256)
    assert hw("ascend-a5").recommended_base_mkn == (256, 128, 512)
    p = einsum("mk,kn->mn", {"m": 2048, "n": 2048, "k": 2048}, dtype="f16", weight=1)
    first = get_target("ascend-910b").warm_starts(p)[0]
    assert (first["base_m"], first["base_k"], first["base_n"]) == (128, 64, 256)
    # A5's 256/128/512 is read as an L1 block: its 128x512 half right tile (128 KiB) exceeds L0B (64 KiB)
    # and its 256x512 fp32 accumulator (512 KiB) L0C (256 KiB) (hardware-facts.md §3.1 Buffers A5), so
    # the warm start keeps base_m=256 and a 128-deep L1 K chunk with the largest TMATMUL that fits L0.
    first = get_target("ascend-a5").warm_starts(p)[0]
    assert (first["base_m"], first["base_k"], first["base_n"], first["l1_k"]) == (256, 64, 256, 2)


@pytest.mark.parametrize("preset", ["ascend-910b", "ascend-a5"])
@pytest.mark.parametrize("dtype", ["f16", "bf16", "i8", "f32", "f8e4m3"])
def test_recommended_warm_start_is_feasible(preset: str, dtype: str) -> None:
    """The first warm start (PTO's recommendation) must never waste a trial on an infeasible point."""
    t = get_target(preset)
    p = einsum("mk,kn->mn", {"m": 4096, "n": 4096, "k": 4096}, dtype=dtype, weight=1)
    if t.supports(p):
        return
    first = t.warm_starts(p)[0]
    assert t.check(p, t.mapping(p, first)) == [], first
    assert first["base_m"] == t.hardware.recommended_base_mkn[0]  # type: ignore[attr-defined]


def test_overrides_are_validated() -> None:
    t = get_target("ascend-910b", {"aic_cores": 8, "l1_bytes": 256 << 10})
    assert t.hardware.aic_cores == 8  # type: ignore[attr-defined]
    with pytest.raises(ProblemError, match="no setting"):
        get_target("ascend-910b", {"cube_cores": 8})
    with pytest.raises(ProblemError, match="aic_cores"):
        get_target("ascend-910b", {"aic_cores": 0})
    with pytest.raises(ProblemError, match="fractal_k"):
        get_target("ascend-910b", {"fractal_k": {"f16": 32, "i8": 32, "bf16": 16, "f32": 8}})
    with pytest.raises(ProblemError):
        get_target("ascend-910b", {"matmul_triples": [["f32", "f8e4m3", "f8e4m3"]]})  # no fp8 fractal on A2/A3
