"""Resharding an L1-sharded activation tensor from one layout to another, over the NoC.

A tensor of ``sticks x channels`` (NHW flattened, C) sharded as ``height/R``, ``block/RxC`` or
``width/C`` gives core ``i*C + j`` (row-major over the shard grid; [ASSUMPTION] the same numbering
for both layouts, as ttnn's row-major core ranges) the sticks of row ``i`` and the channels of
column ``j`` (tenstorrent-conv2d.md, "Sharding": height, width and block sharding): sticks in ttnn's
tile-high shards (`halo.shard_sticks`, the split the conv and its halo use), channels in ceil-sized
pieces; the last pieces are the short ones. Changing layout keeps on a core what both layouts
give it and sends the rest over the NoC.

Price (hardware-facts.md §4.1, NoC row: one link moves 32 B/cycle on Wormhole, 64 on Blackhole,
router hop latency 9 cycles; §4.2 step 4: data movement per core at the link rate): every core
sends and receives its moved bytes at one link's rate, in parallel with the other cores, so the
reshard takes ``max over cores of max(bytes sent, bytes received) / link + hops x hop latency``
with ``hops = grid_x + grid_y`` (the longest route), and nothing when the layouts are equal.
[ASSUMPTION] no contention between cores on shared links and one NoC per transfer (the second
NoC is left to the conv's own readers): a lower estimate of a congested reshard, an upper one of
a perfectly spread one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from costmodels.tenstorrent.halo import TILE_HEIGHT, shard_sticks
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.shape import cdiv, parse_layout


def shard_boxes(sticks: int, channels: int, layout: str, cores: int) -> np.ndarray:
    """``(cores, 4)`` array of each core's ``[stick_lo, stick_hi, channel_lo, channel_hi)``; empty for unused cores."""
    boxes = np.zeros((cores, 4), dtype=np.int64)
    parsed = parse_layout(layout)
    if parsed is None:
        raise ValueError(f"layout {layout!r} is not height/R, block/RxC or width/C")
    _, r, c = parsed
    if r * c > cores:
        raise ValueError(f"layout {layout} uses {r * c} cores, the grid has {cores}")
    ps, pc = shard_sticks(sticks, r, TILE_HEIGHT), cdiv(channels, c)
    i, j = np.divmod(np.arange(r * c, dtype=np.int64), c)  # core i*C + j: row i, column j
    s0, c0 = np.minimum(i * ps, sticks), np.minimum(j * pc, channels)
    boxes[: r * c] = np.stack([s0, np.minimum(s0 + ps, sticks), c0, np.minimum(c0 + pc, channels)], axis=1)
    return boxes


def _area(b: np.ndarray) -> np.ndarray:
    return np.maximum(b[..., 1] - b[..., 0], 0) * np.maximum(b[..., 3] - b[..., 2], 0)


def reshard_matrix(
    sticks: int, channels: int, elem_bytes: float, sources: Sequence[str], targets: Sequence[str], hw: TensixHardware
) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, bytes moved) of resharding from each layout of `sources` to each of `targets`: two ``(S, T)`` arrays."""
    cores = hw.cores
    a = np.stack([shard_boxes(sticks, channels, s, cores) for s in sources])  # (S, cores, 4)
    b = np.stack([shard_boxes(sticks, channels, t, cores) for t in targets])  # (T, cores, 4)
    # each bound as its own contiguous (S, 1, cores) / (1, T, cores) array: the (S, T, cores) passes stay few,
    # in 32-bit integers when every product fits
    it = np.int32 if sticks * channels < 2**31 else np.int64
    a0, a1, a2, a3 = (np.ascontiguousarray(a[:, None, :, k], dtype=it) for k in range(4))
    b0, b1, b2, b3 = (np.ascontiguousarray(b[None, :, :, k], dtype=it) for k in range(4))
    over_s = np.minimum(a1, b1) - np.maximum(a0, b0)
    over_c = np.minimum(a3, b3) - np.maximum(a2, b2)
    np.maximum(over_s, 0, out=over_s)
    np.maximum(over_c, 0, out=over_c)
    kept = over_s * over_c  # (S, T, cores): stays on the core
    # sent = own area - kept, received = new area - kept; a core moves the larger of the two
    area_a, area_b = _area(a)[:, None, :], _area(b)[None, :, :]
    per_core = (np.maximum(area_a, area_b) - kept).max(axis=-1) * elem_bytes
    moved = (area_b.sum(axis=-1) - kept.sum(axis=-1, dtype=np.int64)) * elem_bytes
    hops = hw.noc_hop_cycles * (hw.grid_x + hw.grid_y)
    cycles = np.where(moved > 0, per_core / hw.noc_link_bytes_per_cycle + hops, 0.0)
    return cycles, moved.astype(np.float64)


def reshard_cycles(
    sticks: int, channels: int, elem_bytes: float, source: str, target: str, hw: TensixHardware
) -> float:
    """Cycles of one reshard (0 when the layouts are equal or give every core the same piece)."""
    cyc, _ = reshard_matrix(sticks, channels, elem_bytes, [source], [target], hw)
    return float(cyc[0, 0])
