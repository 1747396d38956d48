"""Width sharding of a 1x1 (matmul) conv priced as ttnn runs it (issue #13).

tenstorrent-conv2d.md, "Sharded Input Data Movement Across Cores": width sharding splits the input
channels over all cores; "each core fetches a subset of the weights matrix corresponding to its assigned
output", computes a partial output from its own slice, then "each core broadcast[s] its input in turn"
to every other core. hardware-facts.md §4.2 step 4: a multicast costs one NoC traversal plus 9 cycles x
hops; §4.1 NoC row: 32 B/cycle per link on Wormhole. Conv2dConfig: act_block_h is ignored under
WIDTH_SHARDED, and tt-metal ``conv2d_utils.cpp`` (``determine_matmul_op_config_from_conv_op_config``)
runs a sharded 1x1 conv as a matmul whose in0 block is the core's whole M. ttnn's auto-shard never
picks width sharding for a matmul conv (hardware-facts.md §4.2 step 5), but runs it when asked, so
the search keeps it, priced.

The layer: ResNet-50 layer4 1x1 reduce at batch 1, 7x7 output, 2048 -> 512 channels, bf16: M = 49
rows (2 tiles, 64 rows), K = 2048 (64 tiles), N = 512 (16 tiles).
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest

from costmodels.registry import get_target
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.shape import tt_shape
from costmodels.tenstorrent.space import evaluate_point
from tests.costmodels.tenstorrent.points import BASE
from workload.conv2d import conv2d
from workload.einsum import einsum

LAYER = conv2d(batch=1, in_channels=2048, out_channels=512, input_height=7, input_width=7, kernel=1, dtype="bf16")
T = get_target("wormhole-n150")
HW = cast(TensixHardware, T.hardware)
ROWS, K, BF16 = 64, 2048, 2


def _a(layout: str, *, feasible: bool = True) -> dict[str, float]:
    ev = evaluate_point(tt_shape(LAYER, HW.tile), HW, {**BASE, "layout": layout})
    assert bool(ev.feasible[0]) == feasible, {k: bool(v[0]) for k, v in ev.ok.items()}
    return {k: float(np.asarray(v).reshape(-1)[0]) for k, v in ev.a.items()}


@pytest.mark.parametrize("c", [2, 4, 8, 16])
def test_each_core_receives_the_other_slices_in_c_minus_1_broadcast_turns(c: int) -> None:
    a = _a(f"width/{c}")
    hop = 9 * (HW.grid_x + HW.grid_y)  # hardware-facts.md §4.1: 9 cycles a router hop, the longest route
    assert HW.noc_link_bytes_per_cycle == 32 and hop == 144
    # all 64 rows at full K, less the core's own slice; one multicast turn per remote slice
    assert a["act_turns"] == c - 1
    assert a["noc_act_bytes"] == c * (c - 1) * ROWS * K * BF16 / c
    assert a["t_act"] == (c - 1) / c * ROWS * K * BF16 / 32 + (c - 1) * hop


@pytest.mark.parametrize("c", [4, 16])
def test_each_core_fetches_its_output_channel_slice_of_the_weights_once(c: int) -> None:
    a = _a(f"width/{c}")
    per_core = K * (512 // c) * BF16  # all of K, the core's 512/c output channels
    assert a["noc_w_bytes"] == c * per_core == K * 512 * BF16
    assert a["nbh"] == 1 and a["pm_t"] == 2  # the whole height in one block


def test_width_takes_the_whole_height_in_one_act_block() -> None:
    p = conv2d(batch=1, in_channels=256, out_channels=256, input_height=16, input_width=16, kernel=1, dtype="bf16")
    whole = T.mapping(p, {**BASE, "layout": "width/4"})
    assert whole.knobs["act_block_h"] == 256 and T.check(p, whole) == []
    half = whole.model_copy(update={"knobs": {**whole.knobs, "act_block_h": 128, "out_subblock": "1x2"}})
    vs = T.check(p, half)
    assert [v.code for v in vs] == ["act-block-h"] and "whole per-core height of 256 rows" in vs[0].message
    # a sharded 1x1 conv is a matmul over the core's whole M under height sharding too (tt-metal
    # conv2d_utils.cpp determine_matmul_op_config_from_conv_op_config: out_block_h = per_core_M) ...
    hs = T.mapping(p, {**BASE, "layout": "height/1"})
    vs = T.check(p, hs.model_copy(update={"knobs": {**hs.knobs, "act_block_h": 128, "out_subblock": "1x4"}}))
    assert [v.code for v in vs] == ["act-block-h"] and "whole M of 256 rows" in vs[0].message
    for lay in ("height/1", "block/1x2"):
        bs = T.mapping(p, {**BASE, "layout": lay})
        assert bs.knobs["act_block_h"] == 256 and T.check(p, bs) == []
        half = bs.model_copy(update={"knobs": {**bs.knobs, "act_block_h": 128, "out_subblock": "1x1"}})
        assert [v.code for v in T.check(p, half)] == ["act-block-h"], lay
    # ... while a plain einsum of the same GEMM honours act_block_h
    g = einsum("mk,kn->mn", {"m": 256, "k": 256, "n": 256}, dtype="bf16")
    gm = T.mapping(g, {**BASE, "layout": "height/1"})
    assert T.check(g, gm.model_copy(update={"knobs": {**gm.knobs, "act_block_h": 128, "out_subblock": "1x4"}})) == []


def test_broadcast_time_grows_with_the_width_and_height_sharding_moves_no_activations() -> None:
    t_act = [_a(f"width/{c}")["t_act"] for c in (2, 4, 8, 16)]
    assert t_act == sorted(t_act) and len(set(t_act)) == 4  # more cores: more turns, a larger remote share
    h = _a("height/2", feasible=False)  # 2 MiB of replicated weights do not fit L1; the price is still defined
    assert h["t_act"] == 0.0 and h["act_turns"] == 0  # height: full rows local, weights replicated instead
    # against one latency for the whole exchange: each turn waits for its own multicast
    w16 = _a("width/16")
    assert w16["t_act"] - 15 / 16 * ROWS * K * BF16 / 32 == 15 * 144 > 144
