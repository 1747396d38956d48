"""ttnn pads a conv's input channels to an alignment (issue #13), and the model prices the padded channels.

Source: tt-metal ``ttnn/cpp/ttnn/operations/conv/conv2d/conv2d_utils.cpp`` @002a3f412aeb,
``get_input_channels_alignment``: a non-matmul conv, not width-sharded, with a ``ROW_MAJOR`` input (or a
DRAM-sliced op) aligns to 8 elements when its input is not sharded (``get_l1_alignment() / 2``: 16-byte
L1 alignment, hardware-facts.md §4.1 Alignment row), otherwise to 32 (``TILE_WIDTH``); ``conv2d.cpp``
pads ``round_up(in_channels, num_cores_c * alignment)``. K work, halo sticks, L1 and DRAM bytes all
count the padded channels.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from costmodels.registry import get_target
from costmodels.tenstorrent.cost import dram_k_tiles
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.shape import (
    L1_ALIGNMENT_BYTES,
    input_channels_alignment,
    layout_stats,
    padded_in_channels,
    tt_shape,
)
from costmodels.tenstorrent.space import evaluate_point
from tests.costmodels.tenstorrent.points import BASE
from workload import named
from workload.conv2d import conv2d
from workload.einsum import einsum


def _hw(preset: str = "wormhole-n150") -> TensixHardware:
    return cast(TensixHardware, get_target(preset, {"fidelities": ["LoFi", "HiFi4"]}).hardware)


def _stem(cin: int, dtype: str = "bf16") -> Any:
    return conv2d(batch=2, in_channels=cin, out_channels=64, input_height=32, input_width=32, kernel=7, stride=2,
                  padding=3, dtype=dtype)  # fmt: skip


def test_the_alignment_is_half_the_16_byte_l1_alignment_or_a_tile() -> None:
    assert L1_ALIGNMENT_BYTES == 16  # hardware-facts.md §4.1, Alignment: "L1 16 B"
    rm, tiled = tt_shape(_stem(3), 32), tt_shape(_stem(3, "bfloat8_b"), 32)
    assert [input_channels_alignment(rm, k) for k in ("height", "block", "width", "dram")] == [8, 8, 32, 8]
    # a block float exists only in tiles: TILE layout, so 32 except on the DRAM-sliced path
    assert [input_channels_alignment(tiled, k) for k in ("height", "block", "width", "dram")] == [32, 32, 32, 8]
    mm = tt_shape(einsum("mk,kn->mn", {"m": 64, "k": 3, "n": 64}, dtype="bf16"), 32)
    assert input_channels_alignment(mm, "height") == 32  # is_mm_conv: TILE_WIDTH


@pytest.mark.parametrize(
    ("cin", "dtype", "kind", "c", "padded"),
    [(3, "bf16", "height", 1, 8), (3, "bf16", "block", 2, 16), (3, "bf16", "width", 2, 64),
     (9, "bf16", "height", 1, 16), (16, "bf16", "height", 1, 16), (3, "bfloat8_b", "height", 1, 32),
     (67, "bf16", "block", 3, 72), (3, "bfloat8_b", "dram", 1, 8)],
)  # fmt: skip
def test_padded_channels_round_up_to_channel_cores_times_the_alignment(
    cin: int, dtype: str, kind: str, c: int, padded: int
) -> None:
    assert padded_in_channels(tt_shape(_stem(cin, dtype), 32), kind, c) == padded


def test_the_3_channel_stem_computes_and_moves_8_channels() -> None:
    """Row-major bf16: the 3-channel stem's K tiles and halo sticks are those of an 8-channel stem."""
    hw = _hw()
    s3, s8 = tt_shape(_stem(3), 32), tt_shape(_stem(8), 32)
    for lay in ("height/8", "block/4x2"):
        a, b = layout_stats(s3, hw, lay), layout_stats(s8, hw, lay)
        assert (a.k_t, a.stick_channels) == (b.k_t, b.stick_channels)
    assert layout_stats(s3, hw, "height/8").k_t == 7 * 2  # 7 rows of round_up(8*7, 32); unpadded it was 7 * 1
    assert dram_k_tiles(s3) == dram_k_tiles(s8) == 14
    e3, e8 = evaluate_point(s3, hw, BASE).a, evaluate_point(s8, hw, BASE).a
    for term in ("t_comp", "t_halo", "halo_bytes", "halo_buf"):
        assert e3[term] == pytest.approx(e8[term]), term
    # DRAM: the row-major input is read as stored (3 channels); the padding happens on the way in
    assert e3["dram_bytes"] < e8["dram_bytes"]


def test_a_block_float_stem_pays_for_whole_tile_sticks() -> None:
    """bfloat8_b: tiles are 32 channels wide, so the stem's K, halo and input DRAM bytes count 32 channels."""
    hw = _hw()
    s = tt_shape(_stem(3, "bfloat8_b"), 32)
    assert s.stored_channels == 32
    st = layout_stats(s, hw, "height/8")
    assert st.k_t == 7 * 7 and st.stick_channels == 32
    e = evaluate_point(s, hw, BASE).a
    s32 = tt_shape(_stem(32, "bfloat8_b"), 32)
    e32 = evaluate_point(s32, hw, BASE).a
    for term in ("t_comp", "t_halo", "halo_bytes", "dram_bytes"):
        assert np.asarray(e[term]) == pytest.approx(np.asarray(e32[term])), term


def test_the_resnet50_stem_is_priced_dearer_than_on_its_3_channels() -> None:
    """The stem's cheapest sharded K is 7 tiles on 3 channels, 14 padded to 8 (bf16), 49 padded to 32 (bfloat8_b)."""
    hw = _hw()
    for dtype, k in (("bf16", 14), ("bfloat8_b", 49)):
        stem = named.load("resnet50", batch=16, dtype=dtype)[0]
        assert min(layout_stats(tt_shape(stem, 32), hw, f"height/{r}").k_t for r in (8, 32, 64)) == k


def test_width_and_grouped_convs() -> None:
    hw = _hw()
    s = tt_shape(_stem(48), 32)
    # width sharding over 2 cores: round_up(48, 2*32) = 64, 32 a core, K = 2 * ceil(32*49/32)
    assert layout_stats(s, hw, "width/2").k_t == 2 * 49 and layout_stats(s, hw, "width/2").stick_channels == 32
    g = tt_shape(conv2d(batch=1, in_channels=6, out_channels=6, input_height=8, input_width=8, kernel=3, padding=1,
                        groups=3, dtype="bf16"), 32)  # fmt: skip
    assert padded_in_channels(g, "height", 1) == 2  # grouped: channels kept ([ASSUMPTION], not modelled)
