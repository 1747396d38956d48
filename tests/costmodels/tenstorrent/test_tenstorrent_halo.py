"""The halo configuration against tenstorrent-conv2d.md, "Haloing" and "Halo implementation".

The worked example is an input of size [1, 6, 4, 6] with a 3x3 kernel, stride 1, padding 1 and 3
cores. The document orders that shape the torch way (N, C, H, W): its weights are [6, 6, 3, 3]
= (Co, Ci, Kh, Kw) and its "Step 3 - Shard boundaries" says core 0's output sticks [0-7] need
padded-input sticks [0-27], which holds for H = 4, W = 6 (padded 6 x 8) and not for H = 6, W = 4
(that would give [0-23]). So the example is N=1, C=6, H=4, W=6.

Hand computation (padded grid 6 rows x 8 columns, padded index p = row*8 + col; data sits at rows
1..4, cols 1..6; 24 input sticks, 8 per core; 24 output sticks, 8 per core):

core 0: outputs 0..7 = (oh 0, ow 0..5), (oh 1, ow 0..1); buffer p in [0, 28)
  padding p 0..8 (row 0, then row 1 col 0), p 15..16, p 23..24: 3 chunks (Figure 16)
  p 9..14  = input sticks 0..5   -> local, shard offsets 0..5
  p 17..22 = input sticks 6..11  -> 6, 7 local (offsets 6, 7); 8..11 on core 1 (offsets 0..3)
  p 25..27 = input sticks 12..14 -> core 1, offsets 4..6
core 1: outputs 8..15 = (1, 2..5), (2, 0..3); first top-left p = 1*8+2 = 10, last 2*8+3 = 19,
  window span 2*8+2 = 18: buffer p in [10, 38)
  p 10..14 = sticks 1..5 (core 0 offsets 1..5); 15, 16 pad; 17..22 = sticks 6..11 (core 0: 6, 7;
  core 1 offsets 0..3); 23, 24 pad; 25..30 = sticks 12..17 (core 1 offsets 4..7, core 2 offsets 0..1);
  31, 32 pad; 33..37 = sticks 18..22 (core 2 offsets 2..6)
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodels.tenstorrent.halo import PAD, Chunk, assemble, build_halo
from costmodels.tenstorrent.shape import halo_sticks
from workload.conv2d import Conv2dParams

EXAMPLE = Conv2dParams(
    batch=1, in_channels=6, out_channels=6, input_height=4, input_width=6, kernel=(3, 3), padding=(1, 1)
)


def test_example_shard_boundaries() -> None:
    cfg = build_halo(EXAMPLE, 3, tile=1)
    assert [(c.out_start, c.out_end) for c in cfg.cores] == [(0, 8), (8, 16), (16, 24)]
    # "Step 3": core 0 needs padded input sticks [0-27]
    assert (cfg.cores[0].in_start, cfg.cores[0].in_end) == (0, 28)
    assert (cfg.cores[1].in_start, cfg.cores[1].in_end) == (10, 38)
    assert cfg.input_shards == ((0, 8), (8, 16), (16, 24))


def test_example_core0_chunks() -> None:
    cfg = build_halo(EXAMPLE, 3, tile=1)
    # Figure 16: three padding chunks for core 0
    assert cfg.padding_chunks(0) == (Chunk(PAD, 0, 0, 9), Chunk(PAD, 0, 15, 2), Chunk(PAD, 0, 23, 2))
    # Figure 19/20: two local chunks
    assert cfg.local_chunks(0) == (Chunk(0, 0, 9, 6), Chunk(0, 6, 17, 2))
    assert cfg.remote_chunks(0) == (Chunk(1, 0, 19, 4), Chunk(1, 4, 25, 3))
    assert cfg.remote_sticks(0) == 7


def test_example_core1_chunks() -> None:
    cfg = build_halo(EXAMPLE, 3, tile=1)
    assert cfg.padding_chunks(1) == (Chunk(PAD, 0, 5, 2), Chunk(PAD, 0, 13, 2), Chunk(PAD, 0, 21, 2))
    assert cfg.local_chunks(1) == (Chunk(1, 0, 9, 4), Chunk(1, 4, 15, 4))
    assert cfg.remote_chunks(1) == (
        Chunk(0, 1, 0, 5),
        Chunk(0, 6, 7, 2),
        Chunk(2, 0, 19, 2),
        Chunk(2, 2, 23, 5),
    )
    assert cfg.max_buffer_sticks() == 28


def test_remote_config_groups_by_source_core() -> None:
    cfg = build_halo(EXAMPLE, 3, tile=1)
    rc = cfg.remote_config()
    # "Remote config": core 1's local data needed by core 0 (Figure 21), and core 0's by core 1
    assert rc[1][0] == (Chunk(1, 0, 19, 4), Chunk(1, 4, 25, 3))
    assert rc[0][1] == (Chunk(0, 1, 0, 5), Chunk(0, 6, 7, 2))
    sent = sum(c.length for dsts in rc.values() for cs in dsts.values() for c in cs)
    assert sent == cfg.total_remote_sticks()


def test_nchw_reading_differs() -> None:
    """Reading [1, 6, 4, 6] as (N, H, W, C) would give core 0 the range [0-23], not [0-27]."""
    p = EXAMPLE.model_copy(update={"input_height": 6, "input_width": 4})
    assert (build_halo(p, 3, tile=1).cores[0].in_start, build_halo(p, 3, tile=1).cores[0].in_end) == (0, 24)


def test_rejects_zero_cores() -> None:
    with pytest.raises(ValueError, match="num_cores"):
        build_halo(EXAMPLE, 0, tile=1)


def _padded_sticks(p: Conv2dParams, x: np.ndarray) -> np.ndarray:
    ph, pw = p.padding
    xp = np.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    return xp.reshape(-1, x.shape[-1])


conv_params = st.builds(
    lambda n, h, w, kh, kw, s, pad, d: (n, h, w, kh, kw, s, pad, d),
    st.integers(1, 2),
    st.integers(1, 7),
    st.integers(1, 7),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 2),
    st.integers(0, 2),
    st.integers(1, 2),
)


def _conv(
    args: tuple[int, ...], stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int]
) -> Conv2dParams | None:
    """A 2-in, 1-out channel conv of the drawn sizes, or None when its window does not fit the padded input."""
    n, h, w, kh, kw = args[:5]
    if h + 2 * padding[0] < dilation[0] * (kh - 1) + 1 or w + 2 * padding[1] < dilation[1] * (kw - 1) + 1:
        return None
    return Conv2dParams(batch=n, in_channels=2, out_channels=1, input_height=h, input_width=w, kernel=(kh, kw),
                        stride=stride, padding=padding, dilation=dilation)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(conv_params, st.integers(1, 6), st.integers(0, 2**31 - 1), st.sampled_from([1, 3, 32]))
def test_assembled_buffers_equal_padded_slices(args: tuple[int, ...], cores: int, seed: int, tile: int) -> None:
    n, h, w, _, _, s, pad, d = args
    p = _conv(args, (s, s), (pad, pad), (d, d))
    if p is None:
        return
    x = np.random.default_rng(seed).standard_normal((n, h, w, 2))
    flat = x.reshape(-1, 2)
    cfg = build_halo(p, cores, tile=tile)
    shards = [flat[a:b] for a, b in cfg.input_shards]
    padded = _padded_sticks(p, x)
    covered = 0
    for core in range(cores):
        ch = cfg.cores[core]
        np.testing.assert_array_equal(assemble(cfg, core, shards), padded[ch.in_start : ch.in_end])
        covered += ch.out_end - ch.out_start
        # chunks tile the buffer exactly, in order
        starts = [c.dst_offset for c in ch.chunks]
        ends = [c.dst_offset + c.length for c in ch.chunks]
        assert starts == [0, *ends[:-1]][: len(starts)]
        assert (ends[-1] if ends else 0) == ch.buffer_sticks
    assert covered == n * p.output_height * p.output_width


@settings(max_examples=200, deadline=None)
@given(conv_params, st.integers(1, 70), st.integers(1, 3), st.sampled_from([1, 2, 32]))
def test_cost_model_halo_sizes_equal_the_configuration(args: tuple[int, ...], cores: int, sw: int, tile: int) -> None:
    """The cost model's closed form (`tt_shape.halo_sticks`) against the chunks `build_halo` builds."""
    _, _, _, _, _, s, pad, d = args
    p = _conv(args, (s, sw), (pad, 0), (d, 1))
    if p is None:
        return
    cfg = build_halo(p, cores, tile=tile)
    assert halo_sticks(p, cores, tile=tile) == (
        cfg.max_buffer_sticks(),
        cfg.max_remote_sticks(),
        cfg.total_remote_sticks(),
    )


def test_cost_model_halo_sizes_of_the_worked_example() -> None:
    # the hand computation above: a 28-stick buffer, core 0 receives 7 sticks and core 1 14 (5 + 2 from
    # core 0, 2 + 5 from core 2), the most of any core
    cfg = build_halo(EXAMPLE, 3, tile=1)
    assert [cfg.remote_sticks(i) for i in range(2)] == [7, 14]
    assert halo_sticks(EXAMPLE, 3, tile=1) == (28, 14, cfg.total_remote_sticks())
