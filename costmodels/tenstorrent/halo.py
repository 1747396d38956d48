"""The halo configuration of a height-sharded convolution, as data.

Follows the sliding-window steps of tenstorrent-conv2d.md, "Halo implementation":

1. *Pad metadata*: which sticks of the padded input ``(n, Hp, Wp)`` are padding
   (``Hp = H + 2*pad_h``, ``Wp = W + 2*pad_w``).
2. *Op trace metadata*: for each output stick ``(n, oh, ow)`` the padded-input index of the top-left
   of its window, ``n*Hp*Wp + oh*sh*Wp + ow*sw``.
3. *Shard boundaries*: each core's output sticks ``[out_start, out_end)`` (equal shards of
   `shard_sticks`, the last ones shorter or empty) and the padded-input sticks ``[in_start, in_end)``
   they read: from the first output's top-left to the last output's top-left plus
   ``(Kh-1)*dh*Wp + (Kw-1)*dw`` (ttnn ``generate_shard_boundaries``; hardware-facts.md §4.1 "Halo size").
4. *Tensor metadata*: for each padded-input stick, padding or ``(core, index in that core's shard)``,
   with the unpadded input split into contiguous `shard_sticks` ranges over the same cores.

Shard sizes follow ttnn, not the document's simplified example: "in a real-world scenario, additional
padding would be added to fit the tile height ... we are intentionally overlooking that detail here"
(tenstorrent-conv2d.md, "Halo implementation", the note before Step 1). ttnn pads the sticks to a
multiple of ``cores * 32`` and gives every core an equal, tile-high shard (`shard_sticks`), so the
last cores may hold fewer sticks or none. `build_halo` takes the tile as an argument: 32 as ttnn
runs (`TILE_HEIGHT`), 1 to reproduce the document's untiled example.
5. *Config tensors*: runs of consecutive sticks as padding, local and remote chunks; the remote
   config is the same chunks grouped by the core that holds the data ("Remote config").

A stick is one pixel with all its channels. The executor runs these configs to assemble each core's
halo buffer; the Tenstorrent cost model charges the remote sticks as bytes moved between cores.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import overload

import numpy as np

from workload.conv2d import Conv2dParams

PAD = -1  #: src_core of a padding chunk

#: rows of a tile, the unit ttnn rounds shard heights to (hardware-facts.md §4.1, Tile: TILE_HEIGHT = 32)
TILE_HEIGHT = 32


@overload
def shard_sticks(total: int, cores: int, tile: int) -> int: ...
@overload
def shard_sticks(total: int, cores: np.ndarray, tile: int) -> np.ndarray: ...
def shard_sticks(total: int, cores: int | np.ndarray, tile: int) -> int | np.ndarray:
    """Sticks of each shard when `total` sticks are height-sharded over `cores` cores, as ttnn shards them.

    ttnn pads the sticks to a multiple of ``cores * tile`` and splits them equally (tt-metal
    ``conv2d_utils.cpp``, ``create_sharded_memory_config_from_parallel_config``: ``nhw_padded =
    round_up(nhw, num_cores_nhw * tile_size)``, ``nhw_shard = nhw_padded / num_cores_nhw``; the halo
    op's input and the conv's output use it alike): ``tile * ceil(total / (cores * tile))``. The
    cost model's per-core height ``ceil(ceil(total / tile) / cores)`` tiles is the same number, and
    the halo configuration the executor validates through uses it too, so both split rows alike
    (3136 rows over 64 cores: 64-row shards, 49 busy cores, not 49 rows on each of 64). `cores` may be
    an array (the cost model's per-point row-core counts).
    """
    if np.any(np.asarray(cores) < 1) or tile < 1:
        raise ValueError(f"cores and tile must be >= 1, got {cores} and {tile}")
    return tile * -(-total // (cores * tile))


@dataclass(frozen=True)
class Chunk:
    """A run of consecutive sticks of one core's halo buffer with one origin.

    Attributes:
        src_core: core holding the data (``-1`` for a padding chunk).
        src_offset: stick index inside the source core's input shard (0 for padding).
        dst_offset: stick index inside this core's halo buffer.
        length: number of sticks.
    """

    src_core: int
    src_offset: int
    dst_offset: int
    length: int


@dataclass(frozen=True)
class CoreHalo:
    """The halo buffer of one core.

    Attributes:
        core: core index.
        out_start, out_end: output sticks ``[start, end)`` in flattened ``(n, oh, ow)`` order.
        in_start, in_end: padded-input sticks ``[start, end)`` held by the buffer (flattened ``(n, Hp, Wp)``).
        chunks: the buffer's contents in buffer order (padding, local and remote chunks).
    """

    core: int
    out_start: int
    out_end: int
    in_start: int
    in_end: int
    chunks: tuple[Chunk, ...]

    @property
    def buffer_sticks(self) -> int:
        return self.in_end - self.in_start


@dataclass(frozen=True)
class HaloConfig:
    """Halo configuration of every core of a height-sharded convolution."""

    params: Conv2dParams
    num_cores: int
    input_shards: tuple[tuple[int, int], ...]  # per core: unpadded input sticks [start, end), flattened (n, H, W)
    cores: tuple[CoreHalo, ...]

    def padding_chunks(self, core: int) -> tuple[Chunk, ...]:
        """Padding config of a core: chunks filled with the pad value."""
        return tuple(c for c in self.cores[core].chunks if c.src_core == PAD)

    def local_chunks(self, core: int) -> tuple[Chunk, ...]:
        """Local config: chunks copied from the core's own input shard."""
        return tuple(c for c in self.cores[core].chunks if c.src_core == core)

    def remote_chunks(self, core: int) -> tuple[Chunk, ...]:
        """Chunks this core receives from other cores."""
        return tuple(c for c in self.cores[core].chunks if c.src_core not in (PAD, core))

    def remote_sticks(self, core: int) -> int:
        """Sticks this core receives over the NoC."""
        return sum(c.length for c in self.remote_chunks(core))

    def total_remote_sticks(self) -> int:
        return sum(self.remote_sticks(i) for i in range(self.num_cores))

    def max_remote_sticks(self) -> int:
        return max(self.remote_sticks(i) for i in range(self.num_cores))

    def max_buffer_sticks(self) -> int:
        """Largest halo buffer of any core, in sticks (ttnn ``max_out_nsticks``)."""
        return max(c.buffer_sticks for c in self.cores)

    def remote_config(self) -> dict[int, dict[int, tuple[Chunk, ...]]]:
        """Remote config: source core -> destination core -> chunks the source sends.

        As in tenstorrent-conv2d.md, "Remote config": each core lists, per core that needs its data,
        the chunks of its local shard (``src_offset``) and where they land (``dst_offset``).
        """
        out: dict[int, dict[int, list[Chunk]]] = {}
        for dst in range(self.num_cores):
            for c in self.remote_chunks(dst):
                out.setdefault(c.src_core, {}).setdefault(dst, []).append(c)
        return {s: {d: tuple(cs) for d, cs in sorted(m.items())} for s, m in sorted(out.items())}


def _shards(total: int, parts: int, tile: int) -> list[tuple[int, int]]:
    """Equal contiguous shards of `shard_sticks`, the last ones shorter (possibly empty)."""
    size = shard_sticks(total, parts, tile)
    return [(min(i * size, total), min((i + 1) * size, total)) for i in range(parts)]


def _runs(src_core: np.ndarray, src_off: np.ndarray) -> list[Chunk]:
    """Group buffer sticks into chunks: same source core and consecutive source offsets."""
    n = src_core.size
    if n == 0:
        return []
    brk = np.ones(n, dtype=bool)
    same_core = src_core[1:] == src_core[:-1]
    consecutive = (src_core[1:] == PAD) | (src_off[1:] == src_off[:-1] + 1)
    brk[1:] = ~(same_core & consecutive)
    starts = np.flatnonzero(brk)
    ends = np.append(starts[1:], n)
    return [
        Chunk(int(src_core[s]), 0 if src_core[s] == PAD else int(src_off[s]), int(s), int(e - s))
        for s, e in zip(starts, ends, strict=True)
    ]


def op_trace(params: Conv2dParams) -> np.ndarray:
    """Step 2: padded-input index of the top-left of each output stick's window."""
    hp, wp = params.input_height + 2 * params.padding[0], params.input_width + 2 * params.padding[1]
    n = np.arange(params.batch)[:, None, None]
    oh = np.arange(params.output_height)[None, :, None]
    ow = np.arange(params.output_width)[None, None, :]
    return (n * hp * wp + oh * params.stride[0] * wp + ow * params.stride[1]).reshape(-1)


def window_span(params: Conv2dParams) -> int:
    """Distance from a window's top-left stick to its bottom-right stick in the padded input."""
    wp = params.input_width + 2 * params.padding[1]
    return (params.kernel[0] - 1) * params.dilation[0] * wp + (params.kernel[1] - 1) * params.dilation[1]


def _tensor_metadata(params: Conv2dParams, idx: np.ndarray, shard: int) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1 and 4: for padded-input sticks ``idx``, the source core (-1 = padding) and shard offset."""
    h, w = params.input_height, params.input_width
    ph, pw = params.padding
    hp, wp = h + 2 * ph, w + 2 * pw
    n, rem = np.divmod(idx, hp * wp)
    r, c = np.divmod(rem, wp)
    y, x = r - ph, c - pw
    is_pad = (y < 0) | (y >= h) | (x < 0) | (x >= w)
    stick = n * h * w + np.clip(y, 0, h - 1) * w + np.clip(x, 0, w - 1)
    core, off = np.divmod(stick, shard)
    return np.where(is_pad, PAD, core), np.where(is_pad, 0, off)


@cache
def build_halo(params: Conv2dParams, num_cores: int, *, tile: int) -> HaloConfig:
    """Halo configuration of ``params`` height-sharded over ``num_cores`` cores in shards of `shard_sticks`.

    `tile` is the shard-height unit: `TILE_HEIGHT` as ttnn runs, 1 for the document's untiled example.

    Raises:
        ValueError: ``num_cores`` or ``tile`` is not positive.
    """
    if num_cores < 1 or tile < 1:
        raise ValueError(f"num_cores and tile must be >= 1, got {num_cores} and {tile}")
    trace = op_trace(params)
    span = window_span(params)
    in_total = params.batch * params.input_height * params.input_width
    input_shards = _shards(in_total, num_cores, tile)
    in_shard = shard_sticks(in_total, num_cores, tile)
    cores: list[CoreHalo] = []
    for core, (o0, o1) in enumerate(_shards(trace.size, num_cores, tile)):
        if o1 <= o0:
            cores.append(CoreHalo(core, o0, o1, 0, 0, ()))
            continue
        i0, i1 = int(trace[o0]), int(trace[o1 - 1]) + span + 1
        src_core, src_off = _tensor_metadata(params, np.arange(i0, i1, dtype=np.int64), in_shard)
        cores.append(CoreHalo(core, o0, o1, i0, i1, tuple(_runs(src_core, src_off))))
    return HaloConfig(params=params, num_cores=num_cores, input_shards=tuple(input_shards), cores=tuple(cores))


def assemble(config: HaloConfig, core: int, shards: list[np.ndarray], pad_value: float = 0.0) -> np.ndarray:
    """Build one core's halo buffer from its chunks (what the halo kernel does).

    Args:
        config: the halo configuration.
        core: the core whose buffer to build.
        shards: each core's input shard, ``[sticks, channels]``.
        pad_value: value of padding sticks.
    """
    ch = config.cores[core]
    channels = shards[0].shape[1]
    buf = np.full((ch.buffer_sticks, channels), np.nan, dtype=np.float64)
    for c in ch.chunks:
        dst = slice(c.dst_offset, c.dst_offset + c.length)
        buf[dst] = pad_value if c.src_core == PAD else shards[c.src_core][c.src_offset : c.src_offset + c.length]
    return buf
