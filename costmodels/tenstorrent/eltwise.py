"""Element-wise and pooling steps of a network on Tensix cores: the residual add (with its ReLU) and the max pool.

A network plan (`mapper.layout_plan`, issue #13) runs these between the convs, on the cores that
hold the sharded tensor, in the layout of their input. The references give no cost figure for
them (tenstorrent-conv2d.md's ``maxpool2d`` section reads "Coming soon"), so the price is built
from the chip facts the conv model uses, each assumption marked:

* **Tiles per core.** A layout ``height/R``, ``block/RxC`` or ``width/C`` gives each core the box of
  sticks x channels `tenstorrent.reshard.shard_boxes` gives it (tenstorrent-conv2d.md, "Sharding");
  [ASSUMPTION] a core works on its box padded to whole 32x32 tiles (hardware-facts.md §4.1, Tile).
* **Math.** [ASSUMPTION] the FPU handles one 8x16 block of an element-wise op per cycle, the rate
  of its matmul instruction (hardware-facts.md §4.1, FPU matmul row: one ``MVMUL`` per cycle on an
  8x16 block), so a 32x32 tile takes ``ELTWISE_TILE_CYCLES`` = 1024 / 128 = 8 cycles per operation.
  The add is one operation per output tile; the max pool is one max per window tap (Kh*Kw per
  output tile). The ReLU after the add is fused into the packer as conv2d's ``activation="relu"``
  (tenstorrent-conv2d.md, conv2d Python API) and [ASSUMPTION] costs nothing.
* **L1 traffic.** The unpacker reads the operands from L1 and the packer writes the result back
  (tenstorrent-conv2d.md, "unpack, math and pack" cores); [ASSUMPTION] at the NoC <-> L1 port rate
  (hardware-facts.md §4.1, NoC <-> L1 row: 256 bit per cycle), and overlapped with the math (the
  three compute cores run as a pipeline), so a core takes ``max(math, L1 bytes / port)``.
* **Max pool halo.** A sliding window over height-sharded sticks needs the neighbouring rows: the
  halo op of a conv with the pool's window (`tenstorrent.shape.halo_sticks`, tenstorrent-conv2d.md
  "Halo implementation"), remote sticks over one NoC link plus the hop latency, then the local
  buffer copy at the L1 port rate, before the window reduction (as `tenstorrent.cost` prices a
  conv's halo).
* **DRAM.** Operands not in L1 are read from DRAM and an output not kept is written there, at the
  chip's DRAM rate and one NoC link per core (hardware-facts.md §4.2 step 4:
  ``T_move = max(bytes_DRAM / BW_DRAM, bytes_per_core / link)``), overlapped with the core's work
  ([ASSUMPTION], as the conv's DRAM traffic). A DRAM-interleaved step (``layout=None``) spreads the
  output tiles over the whole grid and moves every operand through DRAM; [ASSUMPTION] its max pool
  reads each input stick once.
* **Fit.** A sharded step needs its input, skip and output shards (and the pool's halo buffer)
  beside the other live tensors in the free L1 (hardware-facts.md §4.1, L1 per core), else it is
  infeasible in that layout (``inf``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.reshard import shard_boxes
from costmodels.tenstorrent.shape import cdiv, halo_sticks, parse_layout
from workload.conv2d import Conv2dParams

#: cycles of one element-wise operation on a 32x32 tile: 1024 elements / (8 x 16) per cycle (see the docstring)
ELTWISE_TILE_CYCLES = 8


@dataclass(frozen=True)
class EltwiseOp:
    """One non-conv step: ``add`` (two operands of ``dims``, ReLU fused) or ``maxpool`` (a window over ``dims``).

    ``dims`` is the input NHWC; the output is ``out_dims`` (the same for the add).
    """

    kind: str  # "add" or "maxpool"
    dims: tuple[int, int, int, int]
    out_dims: tuple[int, int, int, int]
    elem_bytes: float
    kernel: int = 1
    stride: int = 1
    padding: int = 0

    @property
    def in_sticks(self) -> int:
        return self.dims[0] * self.dims[1] * self.dims[2]

    @property
    def out_sticks(self) -> int:
        return self.out_dims[0] * self.out_dims[1] * self.out_dims[2]

    @property
    def channels(self) -> int:
        return self.dims[3]

    def window(self) -> Conv2dParams:
        """The pool's window as conv parameters (for its halo)."""
        n, h, w, c = self.dims
        k, s, p = self.kernel, self.stride, self.padding
        return Conv2dParams(
            batch=n, in_channels=c, out_channels=c, input_height=h, input_width=w,
            kernel=(k, k), stride=(s, s), padding=(p, p),
        )  # fmt: skip


def _box_tiles(boxes: np.ndarray, tile: int) -> np.ndarray:
    rows = np.maximum(boxes[:, 1] - boxes[:, 0], 0)
    cols = np.maximum(boxes[:, 3] - boxes[:, 2], 0)
    return -(-rows // tile) * -(-cols // tile)


def eltwise_cycles(
    op: EltwiseOp,
    layout: str | None,
    hw: TensixHardware,
    *,
    in_dram: bool,
    skip_dram: bool,
    out_dram: bool,
    live_bytes_per_core: int = 0,
) -> float:
    """Cycles of `op` run sharded in `layout` (None: DRAM-interleaved over the whole grid); inf if it does not fit.

    `in_dram`, `skip_dram`, `out_dram`: the input (the chain operand), the add's second operand and
    the output go through DRAM (read, read, written) rather than staying in L1. The skip operand's
    reshard, when it sits in L1 in another layout, is the caller's (`tenstorrent.reshard`).
    """
    t, b = hw.tile, op.elem_bytes
    tile_bytes = t * t * b
    taps = op.kernel * op.kernel if op.kind == "maxpool" else 1
    operands = 2 if op.kind == "add" else 1
    if layout is None:
        cores = hw.cores
        out_tiles = cdiv(cdiv(op.out_sticks, t) * cdiv(op.channels, t), cores)
        in_bytes_core, halo = 0.0, 0.0
        in_dram = skip_dram = out_dram = True
    else:
        parsed = parse_layout(layout)
        if parsed is None:
            raise ValueError(f"layout {layout!r} is not height/R, block/RxC or width/C")
        _, r, c = parsed
        cores = r * c
        out_box = shard_boxes(op.out_sticks, op.channels, layout, hw.cores)[:cores]
        in_box = shard_boxes(op.in_sticks, op.channels, layout, hw.cores)[:cores]
        out_tiles = int(_box_tiles(out_box, t).max())
        in_bytes_core = float(_box_tiles(in_box, t).max()) * tile_bytes
        halo = 0.0
        buf_bytes = 0.0
        if op.kind == "maxpool":
            buf, max_remote, _ = halo_sticks(op.window(), r, tile=t)  # tile-high shards, as a conv's
            stick = cdiv(op.channels, c) * b
            buf_bytes = buf * stick
            hop = hw.noc_hop_cycles * (hw.grid_x + hw.grid_y)
            halo = max_remote * stick / hw.noc_link_bytes_per_cycle + (hop if max_remote else 0)
            halo += buf_bytes / hw.l1_port_bytes_per_cycle
        resident = in_bytes_core * operands + out_tiles * tile_bytes + buf_bytes + live_bytes_per_core
        if resident > hw.l1_free_bytes:
            return float("inf")
    math = out_tiles * taps * ELTWISE_TILE_CYCLES
    l1 = out_tiles * (operands * taps + 1) * tile_bytes / hw.l1_port_bytes_per_cycle
    core = max(math, l1)
    in_total = op.in_sticks * op.channels * b
    out_total = op.out_sticks * op.channels * b
    dram = (in_total if in_dram else 0.0) + (in_total if op.kind == "add" and skip_dram else 0.0)
    dram += out_total if out_dram else 0.0
    move = 0.0
    if dram > 0:
        move = max(dram / hw.dram_bytes_per_cycle, dram / cores / hw.noc_link_bytes_per_cycle)
    return float(max(core, move) + halo)
