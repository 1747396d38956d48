"""Every Trainium preset number, checked against its source (the citation is in each test)."""

from __future__ import annotations

import pytest

from costmodels.presets import load_preset, preset_sources
from costmodels.registry import get_target
from costmodels.trainium.hardware import SEARCH_OPTIONS, TrainiumHardware
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.problem import Problem

KIB = 1024


def hw(name: str) -> TrainiumHardware:
    return load_preset(name, TrainiumHardware)


@pytest.mark.parametrize("name", ["trn1", "trn2"])
def test_every_field_has_a_citation(name: str) -> None:
    sources = preset_sources(name)
    assert set(TrainiumHardware.model_fields) - SEARCH_OPTIONS == set(sources)
    assert all(("hardware-facts.md" in s or "nki-nc_matmul.txt" in s) for s in sources.values())


@pytest.mark.parametrize("name", ["trn1", "trn2"])
def test_tensor_engine_is_128_by_128_with_nc_matmul_limits(name: str) -> None:
    # hardware-facts.md §2.1 Tensor Engine row; nki-nc_matmul.txt: partition <= 128, stationary free <= 128,
    # moving free <= 512
    h = hw(name)
    assert (h.pe_rows, h.pe_cols, h.moving_free_max) == (128, 128, 512)


def test_clocks() -> None:
    # hardware-facts.md §2.1 Engine clocks rows: NC-v2 tensor 2.8 GHz / vector 1.12 GHz; NC-v3 2.4 / 0.96 GHz
    assert (hw("trn1").te_clock_hz, hw("trn1").ve_clock_hz) == (2.8e9, 1.12e9)
    assert (hw("trn2").te_clock_hz, hw("trn2").ve_clock_hz) == (2.4e9, 0.96e9)


def test_sbuf_sizes() -> None:
    # hardware-facts.md §2.1 SBUF row: 24 MiB = 128 x 192 KiB (NC-v2), 28 MiB = 128 x 224 KiB (NC-v3)
    assert hw("trn1").sbuf_partitions * hw("trn1").sbuf_partition_bytes == 24 * KIB * KIB
    assert hw("trn2").sbuf_partitions * hw("trn2").sbuf_partition_bytes == 28 * KIB * KIB


@pytest.mark.parametrize("name", ["trn1", "trn2"])
def test_psum_is_8_banks_of_512_fp32(name: str) -> None:
    # hardware-facts.md §2.1 PSUM row: 2 MiB = 128 partitions x 16 KiB; 8 banks of 2 KiB = 512 FP32
    h = hw(name)
    assert h.psum_banks == 8 and h.psum_bank_bytes // 4 == 512
    assert h.sbuf_partitions * h.psum_banks * h.psum_bank_bytes == 2 * KIB * KIB


def test_hbm_dma_and_cores() -> None:
    # hardware-facts.md §2.1 HBM row (820 GB/s Trn1, 2.9 TB/s Trn2), DMA row (16 engines x 27 GiB/s on NC-v2;
    # Trn2 3.5 TB/s over 128 engines), Peak per chip row (2 and 8 cores)
    t1, t2 = hw("trn1"), hw("trn2")
    assert (t1.hbm_bytes_per_s, t2.hbm_bytes_per_s) == (820e9, 2.9e12)
    assert (t1.cores_per_chip, t2.cores_per_chip) == (2, 8)
    assert t1.dma_engines_per_core == 16 and t1.dma_engine_bytes_per_s == 27 * 2**30
    assert t2.dma_engines_per_core * t2.cores_per_chip * t2.dma_engine_bytes_per_s == pytest.approx(3.5e12)


def test_peak_per_core_matches_published_tflops() -> None:
    # hardware-facts.md §2.1 Peak per NeuronCore row: NC-v2 92 TFLOPS bf16, 23 fp32; NC-v3 79 bf16, 158 fp8
    t1, t2 = hw("trn1"), hw("trn2")
    assert 2 * t1.peak_macs_per_cycle(fp32=False, double_row=False) * t1.te_clock_hz / 1e12 == pytest.approx(92, 0.01)
    assert 2 * t1.peak_macs_per_cycle(fp32=True, double_row=False) * t1.te_clock_hz / 1e12 == pytest.approx(23, 0.01)
    assert 2 * t2.peak_macs_per_cycle(fp32=False, double_row=False) * t2.te_clock_hz / 1e12 == pytest.approx(79, 0.01)
    assert 2 * t2.peak_macs_per_cycle(fp32=False, double_row=True) * t2.te_clock_hz / 1e12 == pytest.approx(158, 0.01)


def test_fp8_double_row_only_on_neuroncore_v3() -> None:
    # hardware-facts.md §2.1 FP8 double-row row: K up to 256 per instruction on NC-v3
    assert hw("trn2").max_contraction(double_row=True) == 256
    assert hw("trn1").max_contraction(double_row=True) == 128


def test_instruction_cost_constants() -> None:
    # nki-nc_matmul.txt, Estimated instruction cost: the 64 of min(64, N_stationary) and 4x for fp32;
    # hardware-facts.md §2.1 SBUF/PSUM access row: about 60 cycles of static overhead per access
    for name in ("trn1", "trn2"):
        h = hw(name)
        assert (h.matmul_floor_cycles, h.fp32_cost_factor, h.access_overhead_cycles) == (64, 4, 60)


def test_roofline_lower_bound_uses_all_cores_and_hbm() -> None:
    # hardware-facts.md §2.2: cores x 128 x 128 MAC/cycle (x2 fp8 on NC-v3, /4 fp32) and HBM on min_bytes
    p = einsum("mk,kn->mn", {"m": 2048, "k": 2048, "n": 2048}, dtype="bf16", weight=1)
    lb = get_target("trn2").lower_bound(p)
    assert lb.compute_cycles == pytest.approx(p.macs / (8 * 128 * 128))
    assert lb.memory_cycles == pytest.approx(p.min_bytes / 2.9e12 * 2.4e9)
    f8 = einsum("mk,kn->mn", {"m": 2048, "k": 2048, "n": 2048}, dtype="f8e4m3", weight=1)
    assert get_target("trn2").lower_bound(f8).compute_cycles == pytest.approx(lb.compute_cycles / 2)
    assert get_target("trn1").lower_bound(f8).compute_cycles == pytest.approx(p.macs / (2 * 128 * 128))
    f32 = einsum("mk,kn->mn", {"m": 2048, "k": 2048, "n": 2048}, dtype="f32", weight=1)
    assert get_target("trn2").lower_bound(f32).compute_cycles == pytest.approx(4 * lb.compute_cycles)


def test_overrides_apply_and_are_validated() -> None:
    t = get_target("trn2", {"cores_per_chip": 2, "sbuf_partition_bytes": 96 * KIB})
    assert isinstance(t.hardware, TrainiumHardware) and t.hardware.cores_per_chip == 2
    assert t.hardware.sbuf_partition_bytes == 96 * KIB
    cores = {p.name: p.choices for p in t.space(_gemm()).params}["cores"]
    assert cores == (1, 2)
    with pytest.raises(ProblemError, match="no setting"):
        get_target("trn2", {"tensor_cores": 4})
    with pytest.raises(ProblemError, match="PSUM bank"):
        get_target("trn1", {"moving_free_max": 1024})
    with pytest.raises(ProblemError, match="cores_per_chip"):
        get_target("trn1", {"cores_per_chip": 0})


def _gemm() -> Problem:
    return einsum("mk,kn->mn", {"m": 256, "k": 256, "n": 256}, dtype="bf16", weight=1)
