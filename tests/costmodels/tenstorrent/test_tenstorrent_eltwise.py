"""The residual add and the max pool on Tensix cores (`costmodels.tenstorrent.eltwise`): each rate and constraint."""

from __future__ import annotations

import math
from typing import Any, cast

import pytest

from costmodels.registry import get_target
from costmodels.tenstorrent.eltwise import ELTWISE_TILE_CYCLES, EltwiseOp, eltwise_cycles
from costmodels.tenstorrent.hardware import TensixHardware

ADD = EltwiseOp("add", (1, 32, 32, 64), (1, 32, 32, 64), 2.0)  # bf16
POOL = EltwiseOp("maxpool", (1, 16, 16, 32), (1, 8, 8, 32), 2.0, kernel=3, stride=2, padding=1)


def hw(**ov: Any) -> TensixHardware:
    return cast(TensixHardware, get_target("wormhole-n150", ov).hardware)


def test_an_8x16_block_per_cycle_is_8_cycles_per_tile() -> None:
    # hardware-facts.md §4.1, FPU matmul row: one MVMUL per cycle on an 8x16 block -> 1024 / 128 per 32x32 tile
    assert ELTWISE_TILE_CYCLES == 32 * 32 // (8 * 16)


def test_add_is_bound_by_the_l1_port_then_by_the_math() -> None:
    kw = {"in_dram": False, "skip_dram": False, "out_dram": False}
    # height/2: 512 sticks x 64 channels per core = 16 x 2 tiles; unpack 2 operand tiles, pack 1, per output tile
    tiles = 16 * 2
    h = hw()
    assert h.l1_port_bytes_per_cycle == 32  # hardware-facts.md §4.1, NoC <-> L1 row: 256 bit per cycle
    assert eltwise_cycles(ADD, "height/2", h, **kw) == pytest.approx(tiles * 3 * 2048 / 32)
    # a port wide enough leaves the math: 8 cycles per tile
    assert eltwise_cycles(ADD, "height/2", hw(l1_port_bytes_per_cycle=4096), **kw) == pytest.approx(tiles * 8)
    # spread over more cores, each core has fewer tiles
    assert eltwise_cycles(ADD, "height/8", h, **kw) < eltwise_cycles(ADD, "height/2", h, **kw)


def test_operands_in_dram_pay_the_dram_rate() -> None:
    slow = hw(dram_gb_per_s=8.0)  # 8 B/cycle at 1 GHz
    tensor = 32 * 32 * 64 * 2
    in_l1 = eltwise_cycles(ADD, "height/2", slow, in_dram=False, skip_dram=False, out_dram=False)
    skip = eltwise_cycles(ADD, "height/2", slow, in_dram=False, skip_dram=True, out_dram=False)
    both = eltwise_cycles(ADD, "height/2", slow, in_dram=True, skip_dram=True, out_dram=True)
    assert skip == pytest.approx(max(in_l1, tensor / 8))  # overlapped with the core's work
    assert both == pytest.approx(3 * tensor / 8)
    # DRAM-interleaved: everything through DRAM, the tiles over the whole grid
    assert eltwise_cycles(ADD, None, slow, in_dram=False, skip_dram=False, out_dram=False) == pytest.approx(both)


def test_max_pool_reduces_its_window_and_pays_its_halo() -> None:
    wide = hw(l1_port_bytes_per_cycle=1 << 20)
    kw = {"in_dram": False, "skip_dram": False, "out_dram": False}
    # width/1: one core holds every stick (no remote halo): 64 output sticks x 32 channels = 2 tiles, 9 taps each
    assert eltwise_cycles(POOL, "width/1", wide, **kw) == pytest.approx(2 * 9 * ELTWISE_TILE_CYCLES, rel=1e-3)
    # height/2: the window crosses the shard boundary, so rows come over the NoC: a slower link costs more
    fast_link = eltwise_cycles(POOL, "height/2", hw(), **kw)
    slow_link = eltwise_cycles(POOL, "height/2", hw(noc_link_bytes_per_cycle=1.0), **kw)
    assert slow_link > fast_link
    unsplit = eltwise_cycles(POOL, "width/1", hw(), **kw)
    assert eltwise_cycles(POOL, "width/1", hw(noc_link_bytes_per_cycle=1.0), **kw) == pytest.approx(unsplit)


def test_a_step_that_does_not_fit_l1_is_infeasible_sharded_but_runs_interleaved() -> None:
    kw = {"in_dram": False, "skip_dram": False, "out_dram": False}
    assert math.isfinite(eltwise_cycles(ADD, "height/1", hw(), **kw))
    tight = hw(l1_kib=200, l1_reserved_kib=100)  # 100 KiB free < 3 x 128 KiB on one core
    assert eltwise_cycles(ADD, "height/1", tight, **kw) == math.inf
    assert math.isfinite(eltwise_cycles(ADD, None, tight, **kw))
    # the other live tensors count too
    roomy = hw()
    assert eltwise_cycles(ADD, "height/1", roomy, **kw, live_bytes_per_core=roomy.l1_free_bytes) == math.inf
