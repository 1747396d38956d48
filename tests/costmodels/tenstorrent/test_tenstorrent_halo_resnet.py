"""A sharded ResNet-50 layer's halo configuration against a hand-computed one (issue: Tenstorrent).

Layer ``layer2.0.conv2`` of ResNet-50 is a 3x3 convolution with stride 2 and padding 1. Reduced to
a 4x4 input and height-sharded over 2 cores, its halo follows tenstorrent-conv2d.md, "Halo
implementation" steps 1-5, worked out by hand below.

Padded input: Hp = Wp = 4 + 2 = 6, sticks numbered p = r*6 + c; real data at r, c in 1..4.
Output: Ho = Wo = (4 + 2 - 3) // 2 + 1 = 2, four output sticks; core 0 computes [0, 2), core 1 [2, 4).
Op trace (top-left window stick): (0,0) -> 0, (0,1) -> 2, (1,0) -> 12, (1,1) -> 14.
Window span: (3-1)*6 + (3-1) = 14, so core 0 needs p in [0, 17) and core 1 needs p in [12, 29).
Input shards: 16 real sticks over 2 cores, [0, 8) on core 0 and [8, 16) on core 1.

Core 0 buffer (dst = p):  p0-6 padding (row 0, then column 0 of row 1)         -> pad  dst 0  len 7
                          p7-10  real sticks 0-3  (core 0, offsets 0-3)           -> local dst 7 len 4
                          p11-12 padding (column 5 of row 1, column 0 of row 2)   -> pad  dst 11 len 2
                          p13-16 real sticks 4-7  (core 0, offsets 4-7)           -> local dst 13 len 4
Core 1 buffer (dst = p - 12): p12     padding                                     -> pad  dst 0  len 1
                          p13-16 real sticks 4-7  (core 0, offsets 4-7)           -> REMOTE from core 0, dst 1 len 4
                          p17-18 padding                                          -> pad  dst 5  len 2
                          p19-22 real sticks 8-11 (core 1, offsets 0-3)           -> local dst 7 len 4
                          p23-24 padding                                          -> pad  dst 11 len 2
                          p25-28 real sticks 12-15 (core 1, offsets 4-7)          -> local dst 13 len 4
"""

from __future__ import annotations

import numpy as np

from costmodels.tenstorrent.halo import Chunk, build_halo
from executor.validate import validate_sharded_conv
from workload.conv2d import as_conv2d, conv2d
from workload.named import load

PAD = -1


def _layer_reduced() -> tuple[object, object]:
    layer = next(p for p in load("resnet50", batch=1) if p.label.endswith("layer2.0.conv2"))
    params = as_conv2d(layer)
    assert params is not None
    assert (params.kernel, params.stride, params.padding, params.dilation) == ((3, 3), (2, 2), (1, 1), (1, 1))
    small = params.model_copy(update={"input_height": 4, "input_width": 4, "in_channels": 8, "out_channels": 8})
    return small, conv2d(
        batch=1,
        in_channels=8,
        out_channels=8,
        input_height=4,
        input_width=4,
        kernel=small.kernel,
        stride=small.stride,
        padding=small.padding,
    )


def test_resnet_layer_halo_matches_hand_computation() -> None:
    params, _ = _layer_reduced()
    cfg = build_halo(params, 2, tile=1)
    assert cfg.input_shards == ((0, 8), (8, 16))
    c0, c1 = cfg.cores
    assert (c0.out_start, c0.out_end, c0.in_start, c0.in_end) == (0, 2, 0, 17)
    assert (c1.out_start, c1.out_end, c1.in_start, c1.in_end) == (2, 4, 12, 29)
    assert c0.chunks == (Chunk(PAD, 0, 0, 7), Chunk(0, 0, 7, 4), Chunk(PAD, 0, 11, 2), Chunk(0, 4, 13, 4))
    assert c1.chunks == (
        Chunk(PAD, 0, 0, 1),
        Chunk(0, 4, 1, 4),
        Chunk(PAD, 0, 5, 2),
        Chunk(1, 0, 7, 4),
        Chunk(PAD, 0, 11, 2),
        Chunk(1, 4, 13, 4),
    )
    assert cfg.remote_chunks(0) == () and cfg.remote_chunks(1) == (Chunk(0, 4, 1, 4),)
    assert cfg.remote_sticks(1) == 4 and cfg.total_remote_sticks() == 4
    assert cfg.remote_config() == {0: {1: (Chunk(0, 4, 1, 4),)}}


def test_resnet_layer_runs_from_its_halo_and_a_shifted_chunk_fails() -> None:
    params, problem = _layer_reduced()
    cfg = build_halo(params, 2, tile=1)
    assert validate_sharded_conv(problem, cfg, seed=0).passed
    c1 = cfg.cores[1]
    shifted = tuple(
        Chunk(c.src_core, c.src_offset - 1, c.dst_offset, c.length) if c.src_core == 0 else c for c in c1.chunks
    )
    broken = type(cfg)(
        params=cfg.params,
        num_cores=cfg.num_cores,
        input_shards=cfg.input_shards,
        cores=(cfg.cores[0], type(c1)(c1.core, c1.out_start, c1.out_end, c1.in_start, c1.in_end, shifted)),
    )
    report = validate_sharded_conv(problem, broken, seed=0)
    # off by one stick: in range, finite, wrong
    assert not report.passed and np.isfinite(report.max_abs_error)
    assert report.first_failing_index is not None
