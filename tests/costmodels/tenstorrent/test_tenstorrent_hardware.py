"""Tenstorrent preset facts, each checked against its source (hardware-facts.md §4.1)."""

from __future__ import annotations

import pytest

from costmodels.presets import load_preset, preset_sources
from costmodels.registry import get_target
from costmodels.tenstorrent.hardware import TensixHardware
from tests.costmodels.tenstorrent.points import BASE
from workload.conv2d import conv2d
from workload.errors import ProblemError


def hw(name: str) -> TensixHardware:
    return load_preset(name, TensixHardware)


def test_core_grids() -> None:
    # hardware-facts.md §4.1, Compute grid (ttnn): WH n150 8x8 = 64; BH 11x10 = 110
    assert (hw("wormhole-n150").grid_x, hw("wormhole-n150").grid_y, hw("wormhole-n150").cores) == (8, 8, 64)
    assert hw("blackhole-p150").cores == 110


@pytest.mark.parametrize("name", ["wormhole-n150", "blackhole-p150"])
def test_common_tensix_facts(name: str) -> None:
    h = hw(name)
    assert h.l1_kib == 1464  # §4.1 L1 per core: 1464 KiB
    assert h.tile == 32  # §4.1 Tile: 32x32
    # §4.1 Math fidelity: cycles per 32x32x32 tile product
    assert h.tile_cycles == {"LoFi": 16, "HiFi2": 32, "HiFi3": 48, "HiFi4": 64}
    assert (h.dst_tiles, h.dst_tiles_fp32) == (8, 4)  # §4.1 Dst register
    assert h.noc_hop_cycles == 9  # §4.1 NoC: router hop latency 9 cycles
    # §4.1 FPU matmul: 2048 MAC/cycle/core at one fidelity phase
    assert h.peak_macs_per_cycle_core == 2048


def test_bandwidths_and_clocks() -> None:
    wh, bh = hw("wormhole-n150"), hw("blackhole-p150")
    assert (wh.noc_link_bytes_per_cycle, bh.noc_link_bytes_per_cycle) == (32, 64)  # §4.1 NoC row
    assert (wh.dram_gb_per_s, bh.dram_gb_per_s) == (288, 512)  # §4.1 DRAM rows
    assert (wh.clock_ghz, bh.clock_ghz) == (1.0, 1.35)  # §4.1 Clock row
    # §4.2 step 4: 288 GB/s at 1 GHz is about 288 B/cycle
    assert wh.dram_bytes_per_cycle == pytest.approx(288)


def test_derived_chip_peak_n150() -> None:
    # §4.1 Chip peak (derived): WH n150 64 cores x 4.096 TFLOPS = 262 TFLOPS LoFi
    h = hw("wormhole-n150")
    tflops = h.cores * h.peak_macs_per_cycle_core * 2 * h.clock_hz / 1e12
    assert tflops == pytest.approx(262.1, abs=0.1)


@pytest.mark.parametrize("name", ["wormhole-n150", "blackhole-p150"])
def test_every_field_is_sourced(name: str) -> None:
    src = preset_sources(name)
    assert set(TensixHardware.model_fields) <= set(src)
    assert all(v.strip() for v in src.values())


def test_overrides_apply_and_validate() -> None:
    t = get_target("wormhole-n150", {"grid_x": 4})
    assert t.hardware.cores == 32  # type: ignore[attr-defined]
    with pytest.raises(ProblemError, match="tile_cycles"):
        get_target("wormhole-n150", {"tile_cycles": {"LoFi": 64, "HiFi2": 32, "HiFi3": 48, "HiFi4": 16}})
    with pytest.raises(ProblemError, match="dst_tiles_fp32"):
        get_target("wormhole-n150", {"dst_tiles_fp32": 16})
    with pytest.raises(ProblemError, match="no setting"):
        get_target("wormhole-n150", {"sram": 1})


@pytest.mark.parametrize("name", ["wormhole-n150", "blackhole-p150"])
def test_fidelity_policy_defaults_to_hifi4(name: str) -> None:
    # tenstorrent-conv2d.md, Compute Config: math_fidelity = HiFi4 is ttnn's conv default; hardware-facts.md
    # §4.1 Fidelity per dtype: only FP8/BFP4/BFP2 are exact at LoFi, so bf16/f32 keep HiFi4 unless overridden
    assert hw(name).fidelities == ("HiFi4",)
    t = get_target(name, {"fidelities": ["LoFi", "HiFi2"]})
    assert t.hardware.fidelities == ("LoFi", "HiFi2")  # type: ignore[attr-defined]
    with pytest.raises(ProblemError, match="fidelities"):
        get_target(name, {"fidelities": []})
    with pytest.raises(ProblemError, match="fidelities"):
        get_target(name, {"fidelities": ["HiFi4", "HiFi4"]})


def test_fidelity_scales_compute_cycles() -> None:
    """§4.2 step 1: T_comp = per_core_M * K_t * per_core_N * 16 * F cycles."""
    t = get_target("wormhole-n150", {"fidelities": ["LoFi", "HiFi2", "HiFi3", "HiFi4"]})
    p = conv2d(batch=1, in_channels=64, out_channels=64, input_height=16, input_width=16, kernel=3, padding=1)
    comp = {}
    for fid in ("LoFi", "HiFi2", "HiFi3", "HiFi4"):
        m = t.mapping(p, {**BASE, "math_fidelity": fid})
        assert t.check(p, m) == []
        comp[fid] = t.cost(p, m).breakdown["compute"]
    # per core: 256 sticks / 8 = 1 row tile x K_t = 3 * ceil(64*3/32) = 18 x N_t = 2 tile products
    tiles = 1 * 18 * 2
    assert comp["HiFi4"] - comp["LoFi"] == pytest.approx(tiles * (64 - 16))
    assert comp["HiFi2"] - comp["LoFi"] == pytest.approx(tiles * 16)
