"""Block-float halo sticks (issue #13): the halo op untilizes a block-float input to bf16 row-major sticks.

Sources: tt-metal ``ttnn/operations/sliding_window/halo/device/halo_device_operation.cpp``: the halo
program is ``untilize_with_halo_multi_core_v2`` with a ``ROW_MAJOR`` output, whose dtype is ``BFLOAT16``
for a ``BFLOAT8_B`` input; tenstorrent-conv2d.md "Haloing": the halo moves sticks (one pixel with all
its channels). Block floats exist only in tiles (`workload.blockfloat`), so their sticks move as bf16, 2
bytes an element, not pro rata 1088/1024 (bfloat8_b) or 576/1024 (bfloat4_b) bytes.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from costmodels.registry import get_target
from costmodels.tenstorrent.halo import TILE_HEIGHT, build_halo, shard_sticks
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.shape import halo_stick_bytes, tt_shape
from costmodels.tenstorrent.space import evaluate_point
from tests.costmodels.tenstorrent.points import BASE
from workload.conv2d import as_conv2d, conv2d

C = 64
TILE_ELEM_BYTES = {"bf16": 2.0, "bfloat8_b": 1088 / 1024, "bfloat4_b": 576 / 1024}
POINT: dict[str, Any] = {**BASE, "layout": "height/4", "math_fidelity": "LoFi"}


def _conv(dtype: str) -> Any:
    return conv2d(batch=1, in_channels=C, out_channels=C, input_height=16, input_width=16, kernel=3, padding=1,
                  dtype=dtype)  # fmt: skip


def _eval(dtype: str, point: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    t = get_target("wormhole-n150", {"fidelities": ["LoFi", "HiFi4"]})
    hw = cast(TensixHardware, t.hardware)
    return evaluate_point(tt_shape(_conv(dtype), hw.tile), hw, point or POINT).a


def test_halo_stick_format_per_input_dtype() -> None:
    assert halo_stick_bytes("bfloat8_b") == (2.0, True)
    assert halo_stick_bytes("bfloat4_b") == (2.0, True)  # [ASSUMPTION] as bfloat8_b
    assert halo_stick_bytes("bf16") == (2.0, False)
    assert halo_stick_bytes("f32") == (4.0, False)


@pytest.mark.parametrize("dtype", ["bfloat8_b", "bfloat4_b"])
def test_block_float_halo_moves_bf16_sticks(dtype: str) -> None:
    params = as_conv2d(_conv(dtype))
    assert params is not None
    cfg = build_halo(params, 4, tile=TILE_HEIGHT)
    a, ref = _eval(dtype), _eval("bf16")
    # remote sticks and the halo buffer at 2 bytes an element, exactly as a bf16 input's
    assert float(a["halo_bytes"][0]) == cfg.total_remote_sticks() * C * 2.0
    assert float(a["halo_buf"][0]) == cfg.max_buffer_sticks() * C * 2.0 == float(ref["halo_buf"][0])
    # pro rata would have been the tile's bytes per element
    assert float(a["halo_bytes"][0]) > cfg.total_remote_sticks() * C * TILE_ELEM_BYTES[dtype]


@pytest.mark.parametrize("dtype", ["bfloat8_b", "bfloat4_b"])
def test_block_float_halo_pays_the_untilize_pass(dtype: str) -> None:
    hw = cast(TensixHardware, get_target("wormhole-n150").hardware)
    a, ref = _eval(dtype), _eval("bf16")
    # each core reads its input shard's tiles and writes bf16 rows: 64 sticks of 64 channels
    shard = shard_sticks(16 * 16, 4, TILE_HEIGHT)
    untilize = shard * C * (TILE_ELEM_BYTES[dtype] + 2.0) / hw.l1_port_bytes_per_cycle
    assert float(a["t_halo"][0]) == pytest.approx(float(ref["t_halo"][0]) + untilize, rel=1e-12)
    # the im2col reader gathers bf16 sticks from the halo buffer: the same L1 bytes as a bf16 input
    assert float(a["l1_bytes"][0]) == float(ref["l1_bytes"][0])
    assert float(a["t_reader"][0]) == float(ref["t_reader"][0])


def test_block_float_halo_is_dearer_than_bf16_and_the_scorer_agrees() -> None:
    t = get_target("wormhole-n150", {"fidelities": ["LoFi", "HiFi4"]})
    halos = {}
    for dtype in ("bf16", "bfloat8_b"):
        p = _conv(dtype)
        c = t.cost(p, t.mapping(p, POINT))
        halos[dtype] = c.breakdown["halo"]
        s = t.score_batch(p, {k: np.array([v]) for k, v in POINT.items()})
        assert bool(s.feasible[0])
        assert s.objectives["latency"][0] == pytest.approx(c.cycles / c.clock_hz, rel=1e-12)
        assert s.objectives["footprint"][0] == pytest.approx(c.footprint_bytes, rel=1e-12)
    # the same sticks plus the untilize pass: a block-float halo costs more than a bf16 one, not half
    assert halos["bfloat8_b"] > halos["bf16"]


def test_dram_interleaved_block_float_conv_has_no_halo() -> None:
    a = _eval("bfloat8_b", {**POINT, "memory": "dram-interleaved", "layout": "block/2x2"})
    assert float(a["t_halo"][0]) == 0.0 and float(a["halo_bytes"][0]) == 0.0
