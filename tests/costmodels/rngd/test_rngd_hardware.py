"""Facts of the RNGD preset, each checked against the behaviour of the model and its citation.

Sources: hardware-facts.md §1.1 (facts) and §1.2 (cost recipe); contraction-engine-rngd.txt.
"""

from __future__ import annotations

import pytest

from costmodels.presets import preset_sources
from costmodels.registry import get_target
from costmodels.rngd.target import RngdTarget
from tests.costmodels.rngd.points import BASE
from workload.einsum import einsum
from workload.errors import ProblemError


def _target(**over: object) -> RngdTarget:
    t = get_target("rngd", dict(over))
    assert isinstance(t, RngdTarget)
    return t


def test_every_preset_field_cites_a_reference_document() -> None:
    src = preset_sources("rngd")
    hw = _target().hw
    for field in type(hw).model_fields:
        assert field in src, f"{field} has no source"
        assert (
            "hardware-facts.md" in src[field]
            or "contraction-engine-rngd.txt" in src[field]
            or "ASSUMPTION" in src[field]
        )


def test_chip_hierarchy_clock_and_peak() -> None:
    """hardware-facts.md §1.1: 1.0 GHz, 2 clusters x 256 slices x 8 rows; 512 x 256 MAC x 2 x 1 GHz = 262 TFLOPS."""
    hw = _target().hw
    assert hw.clock_hz == 1.0e9 and hw.slices == 512 and hw.rows == 8
    assert 2 * hw.peak_macs_per_cycle("bf16") * hw.clock_hz == pytest.approx(262.144e12)
    assert hw.peak_macs_per_cycle("i8") == 2 * hw.peak_macs_per_cycle("bf16")


@pytest.mark.parametrize(("dtype", "elements"), [("bf16", 32), ("i8", 64), ("f8e4m3", 64), ("i4", 128)])
def test_packet_is_64_bytes(dtype: str, elements: int) -> None:
    """hardware-facts.md §1.1, MAC packet width: 64 B = 32 bf16, 64 i8/f8, 128 i4 elements."""
    assert _target().hw.packet_elements(dtype) == elements


@pytest.mark.parametrize(("dtype", "latency"), [("bf16", 5), ("i8", 6), ("f8e4m3", 6), ("i4", 7)])
def test_reducer_latency_per_dtype(dtype: str, latency: int) -> None:
    """hardware-facts.md §1.1, Packet Reducer latency 5/6/7 (contraction-engine-rngd.txt: 5-7 cycles)."""
    t = _target()
    p = einsum("mk,nk->mn", {"m": 16, "k": 256, "n": 16}, dtype=dtype, weight=1)
    pk = t.hw.packet_elements(dtype)
    c = t.cost(p, t.mapping(p, {**BASE, "packet_k": pk}))
    assert c.breakdown["tree"] == latency


def test_stream_is_one_32_byte_flit_per_cycle_and_time_broadcast_saves_it() -> None:
    """hardware-facts.md §1.1 Fetch (32 B/cycle) and §1.2 step 2: a 64 B packet costs 2 flits unless broadcast."""
    t = _target()
    p = einsum("mk,nk->mn", {"m": 64, "k": 64, "n": 8}, weight=1)  # N/8 = 1: nothing to broadcast over
    c = t.cost(p, t.mapping(p, BASE))
    assert c.breakdown["compute"] == 64 * 2
    assert c.breakdown["stream"] == 2 * c.breakdown["compute"]
    p2 = einsum("mk,nk->mn", {"m": 64, "k": 32, "n": 32}, weight=1)  # N/8 = 4 groups reuse each packet
    c2 = t.cost(p2, t.mapping(p2, BASE))
    assert c2.breakdown["stream"] == c2.breakdown["compute"] / 2


def test_drain_is_8_outputs_per_cycle() -> None:
    """hardware-facts.md §1.1, Lane Folder: 8-element output bus per cycle."""
    t = _target()
    p = einsum("mk,nk->mn", {"m": 64, "k": 32, "n": 8}, weight=1)
    c = t.cost(p, t.mapping(p, BASE))
    assert c.breakdown["vector"] == 64 * 8 / 8


def test_trf_capacity_64_kib_and_32_kib_double_buffered() -> None:
    """hardware-facts.md §1.1: TRF 64 KB usable per slice, 32 KB in FirstHalf/SecondHalf mode."""
    t = _target()
    # weight tile = n * k * 2 B = 48 KiB: fits 64 KiB, not 32 KiB
    p = einsum("mk,nk->mn", {"m": 4, "k": 1024, "n": 24}, weight=1)
    single = t.check(p, t.mapping(p, {**BASE, "inner": "k"}))
    double = t.check(p, t.mapping(p, {**BASE, "inner": "k", "double_buffer": True}))
    assert [v.code for v in single] == []
    assert [v.code for v in double] == ["trf-capacity"]
    assert "48 KiB per slice, 32 KiB available" in double[0].message


def test_dma_startup_and_hbm_rate() -> None:
    """hardware-facts.md §1.2 step 4: 500-cycle startup, bytes / min(256 x engines, 1500 B/cycle at 1.5 TB/s)."""
    t = _target()
    hw = t.hw
    assert hw.hbm_bytes_per_cycle == 1500 and hw.dma_startup_cycles == 500
    p = einsum("mk,nk->mn", {"m": 64, "k": 64, "n": 8}, weight=1)
    c = t.cost(p, t.mapping(p, BASE))
    assert c.breakdown["dma"] == pytest.approx(500 + c.offchip_bytes / 1500)
    slow = _target(dma_engines=1)
    c1 = slow.cost(p, slow.mapping(p, BASE))
    assert c1.breakdown["dma"] == pytest.approx(500 + c1.offchip_bytes / 256)


def test_lower_bound_is_the_roofline() -> None:
    """Roofline: 512 slices x 8 rows x packet elements MAC/cycle, HBM 1.5 TB/s for min_bytes."""
    t = _target()
    p = einsum("mk,nk->mn", {"m": 4096, "k": 4096, "n": 4096}, weight=1)
    lb = t.lower_bound(p)
    assert lb.compute_cycles == pytest.approx(4096**3 / (512 * 8 * 32))
    assert lb.memory_cycles == pytest.approx(p.min_bytes / 1500)
    assert lb.cycles == max(lb.compute_cycles, lb.memory_cycles)


def test_overrides_change_the_part_and_bad_values_are_rejected() -> None:
    small = _target(slices_per_cluster=64)
    assert small.hw.slices == 128
    assert small.lower_bound(einsum("mk,nk->mn", {"m": 512, "k": 512, "n": 512}, weight=1)).compute_cycles == (
        pytest.approx(512**3 / (128 * 8 * 32))
    )
    with pytest.raises(ProblemError, match="rows"):
        get_target("rngd", {"rows": 3})
    with pytest.raises(ProblemError, match="trf_half"):
        get_target("rngd", {"trf_half_bytes_per_slice": 1 << 20})
    with pytest.raises(ProblemError, match="no setting"):
        get_target("rngd", {"tensor_cores": 4})


def test_seed_dm_figure_is_kept_with_its_conflict() -> None:
    """contraction-engine-rngd.txt says 256 B/cycle; hardware-facts.md §1.1 flags it as a DMA/DMN figure."""
    src = preset_sources("rngd")["dm_stream_bytes_per_cycle"]
    assert _target().hw.dm_stream_bytes_per_cycle == 256
    assert "CONFLICT" in src and "32 B/cycle" in src


def test_accumulator_and_widened_outputs() -> None:
    """Time Reducer 128 cells per row (hardware-facts.md §1.1); outputs widen i8 -> i32, bf16 -> f32 (seed)."""
    t = _target()
    assert t.hw.accumulator_cells_per_row == 128
    for dt, acc in (("i8", "i32"), ("i4", "i32"), ("bf16", "f32"), ("f8e4m3", "f32")):
        p = einsum("mk,nk->mn", {"m": 8, "k": 64, "n": 8}, dtype=dt, weight=1)
        assert t.mapping(p, {**BASE, "packet_k": t.hw.packet_elements(dt)}).acc_dtype == acc
