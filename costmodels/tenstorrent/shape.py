"""What the Tenstorrent cost model needs to know about a problem, and its sharding layouts.

A problem is flattened to ttnn's GEMM view (hardware-facts.md §4.2 step 5): ``M`` rows = output
sticks ``N*Ho*Wo``, ``K = Kh*Kw*Ci``, ``N = Cout``; groups and einsum batch axes run one after
the other (``batches``). A conv that is not 1x1/stride 1/unpadded takes the conv path (im2col
reader over a halo buffer); everything else is the matmul special case (``use_matmul_for_1x1_conv``).

A layout is a string: ``height/R`` (R cores along the rows), ``block/RxC`` (R rows x C channel
columns) or ``width/C`` (C cores splitting channels).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from costmodels.gemm_view import gemm_view
from costmodels.tenstorrent.halo import shard_sticks, window_span
from costmodels.tenstorrent.hardware import TensixHardware
from workload import dtypes
from workload.conv2d import Conv2dParams, as_conv2d
from workload.problem import Problem

KINDS = ("height", "block", "width")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class TTShape:
    """The GEMM view of a problem, in the units the Tensix cost model uses."""

    batches: int  # groups / einsum batch, run in sequence
    rows: int  # M: output sticks per batch
    cols: int  # N: output channels per batch
    k_channels: int  # input channels per batch (conv) or K (matmul)
    kh: int
    kw: int
    in_channels: int  # channels of one input stick (all groups)
    in_sticks: int  # sticks of the unpadded input
    conv: Conv2dParams | None  # set on the conv (halo) path only
    in_bytes: float
    w_bytes: float
    out_bytes: float
    tile: int
    # bytes per element of the halo's row-major sticks: bf16 for a block-float input, which exists only in
    # tiles and which the halo op untilizes to bf16 (`halo_stick_bytes`); the input's own size otherwise
    stick_bytes: float
    untilize: bool  # the halo op untilizes the input's tiles first (block floats)
    mm_conv: bool = False  # a 1x1 conv on ttnn's matmul path (use_matmul_for_1x1_conv), not a plain einsum

    @property
    def m_t(self) -> int:
        return cdiv(self.rows, self.tile)

    @property
    def n_t(self) -> int:
        return cdiv(self.cols, self.tile)

    @property
    def stored_channels(self) -> int:
        """Channels of one input stick as the input tensor holds them: a tiled (block-float) conv input whole tiles."""
        if self.conv is not None and self.untilize:
            return cdiv(self.in_channels, self.tile) * self.tile
        return self.in_channels


def tt_shape(problem: Problem, tile: int) -> TTShape:
    """Flatten a binary problem (conv or einsum) for the cost model."""
    view = gemm_view(problem)
    x, w = problem.inputs[view.moving], problem.inputs[view.stationary]
    sz = dtypes.info
    params = as_conv2d(problem)
    if params is not None and not params.is_matmul():
        g = params.groups
        stick_bytes, untilize = halo_stick_bytes(x.dtype)
        return TTShape(
            batches=g,
            rows=params.batch * params.output_height * params.output_width,
            cols=params.out_channels // g,
            k_channels=params.in_channels // g,
            kh=params.kernel[0],
            kw=params.kernel[1],
            in_channels=params.in_channels,
            in_sticks=params.batch * params.input_height * params.input_width,
            conv=params,
            in_bytes=sz(x.dtype).bytes,
            w_bytes=sz(w.dtype).bytes,
            out_bytes=sz(problem.output.dtype).bytes,
            tile=tile,
            stick_bytes=stick_bytes,
            untilize=untilize,
        )
    gv = view
    return TTShape(
        batches=gv.B,
        rows=gv.M,
        cols=gv.N,
        k_channels=gv.K,
        kh=1,
        kw=1,
        in_channels=gv.K,
        in_sticks=gv.B * gv.M,
        conv=None,
        in_bytes=sz(x.dtype).bytes,
        w_bytes=sz(w.dtype).bytes,
        out_bytes=sz(problem.output.dtype).bytes,
        tile=tile,
        stick_bytes=sz(x.dtype).bytes,
        untilize=False,
        mm_conv=params is not None,
    )


#: bytes of one bf16 element, the halo's output format for a block-float input
BF16_BYTES = 2.0


#: L1 alignment, bytes (hardware-facts.md §4.1, Alignment row: "L1 16 B" on Wormhole; [ASSUMPTION] Blackhole the
#: same: the row gives only Blackhole's DRAM read alignment, and tt-metal's comment below names one 16-byte figure)
L1_ALIGNMENT_BYTES = 16


def input_channels_alignment(shape: TTShape, kind: str) -> int:
    """The multiple ttnn pads a conv's input channels to, per channel core (`kind`: height, block, width or dram).

    tt-metal ``ttnn/cpp/ttnn/operations/conv/conv2d/conv2d_utils.cpp`` @002a3f412aeb,
    ``get_input_channels_alignment``: a conv that is not a matmul (1x1) conv, not width-sharded, whose
    input is ``ROW_MAJOR`` (or a DRAM-sliced op) aligns to its input shard's width (32 if the width is a
    multiple of 32, else 16, else 8, else 32) or, unsharded, to ``get_l1_alignment() / 2`` ("at least 8
    elements (8 * 2 bytes = 16 bytes) ... so that one stick can be transferred over the NoC in a single,
    aligned operation"); every other conv to ``TILE_WIDTH`` (32). ``conv2d.cpp`` then pads
    ``in_channels_padded = round_up(in_channels, num_cores_c * alignment)``.

    Here: the matmul path (``shape.conv is None``), width sharding and a tiled input (a block float,
    ``shape.untilize``) align to the tile. A row-major input aligns to L1 / 2 = 8 elements: the DRAM
    input is sharded with that alignment first (``shard_or_reshard_tensor_if_required``), and the
    shard-width rule then returns a divisor of that shard's width, so rounding again changes nothing.
    The DRAM path (``kind="dram"``) takes the sliced-op branch: 8 for either layout ([ASSUMPTION] the
    model's DRAM-interleaved conv aligns as ttnn's DRAM-sliced conv, the unsharded input's branch).
    [ASSUMPTION] an input arriving L1-sharded in a producer's layout is resharded to the conv's own
    (as `tenstorrent.reshard` prices it), so its shard width is the conv's.
    """
    if shape.conv is None:
        return shape.tile
    if kind == "dram":
        return L1_ALIGNMENT_BYTES // 2
    if kind == "width" or shape.untilize:
        return shape.tile
    return L1_ALIGNMENT_BYTES // 2


def padded_in_channels(shape: TTShape, kind: str, c: int) -> int:
    """Input channels (per group) ttnn computes with over `c` channel cores: ``round_up(Cin, c * alignment)``.

    Grouped convs keep their channels ([ASSUMPTION]: ttnn's grouped weight layout is not modelled).
    """
    if shape.conv is None or shape.batches > 1:
        return shape.k_channels
    step = c * input_channels_alignment(shape, kind)
    return cdiv(shape.k_channels, step) * step


def halo_stick_bytes(dtype: str) -> tuple[float, bool]:
    """(bytes per element of the halo's sticks, whether the halo op untilizes the input first) for an input `dtype`.

    The halo op works on row-major sticks (tenstorrent-conv2d.md, "Haloing": a stick is one pixel with
    its channels). A tiled input is untilized inside the halo op (tt-metal
    ``ttnn/operations/sliding_window/halo/device/halo_device_operation.cpp``: the program is
    ``untilize_with_halo_multi_core_v2``, its output ``Layout::ROW_MAJOR``), and a ``bfloat8_b`` input
    comes out as ``bfloat16`` (``compute_output_specs``: ``input dtype == BFLOAT8_B ? BFLOAT16``). Block
    floats exist only in 32x32 tiles (`workload.blockfloat`: 1088 / 576 bytes a tile), so a block-float
    input is always untilized and its halo sticks, remote copies and buffer are bf16, 2 bytes an element,
    not the tile's 1.0625 / 0.5625. [ASSUMPTION] ``bfloat4_b`` the same way (the source names only
    ``BFLOAT8_B``; a row-major block float does not exist). [ASSUMPTION] any other input arrives
    row-major in its own type (the halo skips the untilize: "Input is ROW_MAJOR, no need to untilize").
    """
    if dtypes.is_block(dtype):
        return BF16_BYTES, True
    return dtypes.info(dtype).bytes, False


@dataclass(frozen=True)
class LayoutStats:
    """Per-core sizes of one sharding layout (tiles unless stated)."""

    kind: str
    r: int  # cores along the rows (output sticks)
    c: int  # cores along the channels
    valid: bool  # the layout string parsed and its kind/core counts are consistent
    error: str  # why not
    split_ok: bool  # c <= output channel tiles (input channels are padded to ceil(Cin / c) per core)
    pm_t: int  # output rows per core (tiles)
    pn_t: int  # output channels per core (tiles)
    k_t: int  # K of the core's GEMM (tiles, full K)
    kblocks: int  # K blocks of the inner loop before act_block_w_div
    halo_buffer_sticks: int
    halo_max_remote_sticks: int
    halo_total_remote_sticks: int
    stick_channels: float  # channels of one stick a core holds

    @property
    def cores(self) -> int:
        return self.r * self.c


def parse_layout(layout: str) -> tuple[str, int, int] | None:
    """``height/R`` -> (height, R, 1); ``block/RxC`` -> (block, R, C); ``width/C`` -> (width, 1, C)."""
    try:
        kind, _, rest = str(layout).partition("/")
        if kind == "height":
            return kind, int(rest), 1
        if kind == "width":
            return kind, 1, int(rest)
        if kind == "block":
            r, _, c = rest.partition("x")
            return kind, int(r), int(c)
    except ValueError:
        return None
    return None


def layout_stats(shape: TTShape, hw: TensixHardware, layout: str) -> LayoutStats:
    """Per-core sizes of `layout` (hardware-facts.md §4.2 step 5: HS / BS / WS)."""
    return _layout_stats(shape, hw.grid_x, hw.grid_y, layout)


@lru_cache(maxsize=4096)  # bounded: a long-running service sees many shapes
def _layout_stats(shape: TTShape, grid_x: int, grid_y: int, layout: str) -> LayoutStats:
    cores = grid_x * grid_y
    parsed = parse_layout(layout)
    bad = LayoutStats(layout, 1, 1, False, "", False, 1, 1, 1, 1, 0, 0, 0, 1.0)
    if parsed is None:
        return _with(bad, error=f"layout {layout!r} is not height/R, block/RxC or width/C")
    kind, r, c = parsed
    if r < 1 or c < 1:
        return _with(bad, error=f"layout {layout} needs positive core counts")
    # (a grid a vendor's configuration assumes, e.g. Blackhole's 13x10 before firmware v19.5.0, is an override)
    grid = f"override grid_x and grid_y for another grid (this target's: grid_x={grid_x}, grid_y={grid_y})"
    if r * c > cores:
        return _with(bad, error=f"layout {layout} uses {r * c} cores, the grid has {cores}: use fewer, or {grid}")
    if kind == "block" and (r > grid_y or c > grid_x):
        return _with(
            bad,
            error=f"block layout {r}x{c} does not fit the {grid_y}x{grid_x} grid: use fewer rows/columns, or {grid}",
        )
    t = shape.tile
    ci, kh, kw = padded_in_channels(shape, kind, c), shape.kh, shape.kw
    # input channels split over c columns, padded to c times ttnn's alignment (`padded_in_channels`; the
    # padding is priced: k_t and the halo's sticks count the padded channels); more columns than output
    # tiles idle cores
    split_ok = c <= shape.n_t
    cc = cdiv(ci, c)
    # rows per core: ttnn's tile-high shards (`halo.shard_sticks`), the split the halo executor uses too
    rows_t = shard_sticks(shape.rows, r, t) // t
    if kind == "height":
        pm_t, pn_t = rows_t, shape.n_t
        k_t, kblocks = kh * cdiv(ci * kw, t), kh  # act_block_w = round_up(Cin*Kw, 32), Kh blocks
    elif kind == "block":
        pm_t, pn_t = rows_t, cdiv(shape.n_t, c)
        k_t, kblocks = c * kh * cdiv(cc * kw, t), c * kh  # round_up(Cin/num_c * Kw, 32) per block
    else:
        pm_t, pn_t = shape.m_t, cdiv(shape.n_t, c)
        k_t, kblocks = c * cdiv(cc * kh * kw, t), c  # act_block_w = Cin*Kh*Kw / cores (before the div)
    if shape.conv is None:
        buf = shape.batches * pm_t * t
        max_remote = total_remote = 0
    else:
        buf, max_remote, total_remote = halo_sticks(shape.conv, r, tile=t)
    return LayoutStats(
        kind=kind,
        r=r,
        c=c,
        valid=True,
        error="",
        split_ok=split_ok,
        pm_t=pm_t,
        pn_t=pn_t,
        k_t=k_t,
        kblocks=kblocks,
        halo_buffer_sticks=buf,
        halo_max_remote_sticks=max_remote,
        halo_total_remote_sticks=total_remote,
        # a core's (padded) slice of one input stick
        stick_channels=float(cdiv(shape.in_channels if shape.batches > 1 else ci, c)),
    )


def halo_sticks(conv: Conv2dParams, cores: int, *, tile: int) -> tuple[int, int, int]:
    """(largest halo buffer, most sticks one core receives, sticks all cores receive) of `halo.build_halo`.

    Input and output sticks are split into `halo.shard_sticks` shards (ttnn's tile-high shards), as
    `halo.build_halo(conv, cores, tile=tile)` splits them.

    The same configuration in closed form, without building its chunks: core i's buffer holds the
    padded-input sticks from the top-left of its first output's window to the bottom-right of its
    last one's; its data sticks are, in order, the input sticks ``[D(start), D(end))``, where
    ``D(p)`` counts the data (non-padding) sticks before padded index ``p``; those outside core i's
    own input shard arrive from other cores.
    """
    h, w = conv.input_height, conv.input_width
    ph, pw = conv.padding
    hp, wp = h + 2 * ph, w + 2 * pw
    ho, wo = conv.output_height, conv.output_width
    outs = conv.batch * ho * wo
    size = shard_sticks(outs, cores, tile)
    core = np.arange(cores, dtype=np.int64)
    first = np.minimum(core * size, outs)
    used = np.minimum(first + size, outs) > first  # the last cores may get no output sticks
    core, first = core[used], first[used]
    last = np.minimum(first + size, outs) - 1

    def top_left(j: np.ndarray) -> np.ndarray:  # padded index of output stick j's window (halo.op_trace)
        n, rem = np.divmod(j, ho * wo)
        oh, ow = np.divmod(rem, wo)
        return n * hp * wp + oh * conv.stride[0] * wp + ow * conv.stride[1]

    def data_before(p: np.ndarray) -> np.ndarray:  # D(p)
        n, rem = np.divmod(p, hp * wp)
        y, x = np.divmod(rem, wp)
        y, x = y - ph, x - pw
        in_row = np.where((y >= 0) & (y < h), np.minimum(np.maximum(x, 0), w), 0)
        return n * h * w + np.minimum(np.maximum(y, 0), h) * w + in_row

    start, end = top_left(first), top_left(last) + window_span(conv) + 1
    d0, d1 = data_before(start), data_before(end)
    shard = shard_sticks(conv.batch * h * w, cores, tile)  # input sticks per core (the last shards shorter)
    local = np.maximum(np.minimum(d1, (core + 1) * shard) - np.maximum(d0, core * shard), 0)
    remote = d1 - d0 - local
    return int((end - start).max(initial=0)), int(remote.max(initial=0)), int(remote.sum())


def _with(s: LayoutStats, **kw: object) -> LayoutStats:
    return replace(s, **kw)  # type: ignore[arg-type]


def _largest_divisor(n: int, cap: int) -> int:
    return max(d for d in range(1, min(n, cap) + 1) if n % d == 0)


def layout_key(shape: TTShape, layout: str) -> tuple[object, ...]:
    """What of `layout` the model's objectives and constraints depend on: layouts with equal keys are one choice.

    Dominance rule 1 (equal layouts), proved: `tenstorrent.cost.evaluate` reads a layout only through
    its `LAYOUT_FIELDS` row. For a problem without a halo (``shape.conv is None``) that row is a
    function of (kind, pm_t, c) and of R only through ``r``: ``pm_t = ceil(M_t / R)``, ``pn_t``,
    ``k_t``, ``kblocks`` and ``stick_channels`` depend on (kind, c) alone, the halo fields are
    ``batches * pm_t * 32`` sticks and zeros. ``r`` enters `evaluate` only as ``cores = r * c``,
    which feeds the reported NoC/L1 byte totals, not feasibility, latency, off-chip bytes or the
    footprint. So two layouts of one kind with the same (pm_t, c) score alike at every other
    choice, and the space keeps the one with the fewest core rows. A conv's halo (buffer and
    remote sticks) depends on R itself, so its layouts are never merged.
    """
    parsed = parse_layout(layout)
    if parsed is None or shape.conv is not None:
        return (layout,)
    kind, r, c = parsed
    return (kind, cdiv(shape.m_t, r), c)


def candidate_layouts(shape: TTShape, hw: TensixHardware, *, prune: bool = True) -> list[str]:
    """Every sharding layout the core grid allows (hardware-facts.md §4.2 step 5; tenstorrent-conv2d.md, Sharding).

    * ``height/R`` for every R from 1 to min(cores, M_t): the rows split into R shards of
      ``ceil(M_t / R)`` tiles, the last ones padded (ttnn itself picks a divisor of M_t; a
      non-divisor is legal with padded rows and is priced by the padded ``pm_t``);
    * ``block/RxC`` for every R <= grid rows and C <= grid columns (R <= M_t, C <= N_t): rows over
      R, output channels over C, input channels over C (padded to ``ceil(Cin / C)`` per core and to
      tiles when C does not divide them, priced in ``k_t``);
    * ``width/C`` for every C from 1 to min(cores, N_t), padded the same way.

    Core counts past M_t rows (or N_t channel tiles) would only add idle cores, and the
    ``channel-split`` rule rejects C > N_t. With `prune`, layouts equal under `layout_key`
    (dominance rule 1) are kept once, fewest core rows first.
    """
    m_t, n_t = shape.m_t, shape.n_t
    cands = [f"height/{r}" for r in range(1, min(hw.cores, m_t) + 1)]
    cands += [f"block/{r}x{c}" for r in range(1, min(hw.grid_y, m_t) + 1) for c in range(1, min(hw.grid_x, n_t) + 1)]
    cands += [f"width/{c}" for c in range(1, min(hw.cores, n_t) + 1)]
    if not prune:
        return cands
    kept: dict[tuple[object, ...], str] = {}
    for lay in cands:  # fewest core rows first within a kind
        kept.setdefault(layout_key(shape, lay), lay)
    return list(kept.values())


def ttnn_layouts(shape: TTShape, hw: TensixHardware) -> list[str]:
    """ttnn's own choices per strategy plus a few smaller grids (the space before issue #12; warm starts)."""
    m_t, n_t, ci = shape.m_t, shape.n_t, shape.k_channels
    out: dict[str, None] = {}
    # height: ttnn num_cores_nhw = largest divisor <= grid of ceil(NHW/32); plus full/half/quarter grid
    for cap in (hw.cores, hw.cores // 2, hw.cores // 4):
        for r in {_largest_divisor(m_t, max(cap, 1)), min(m_t, max(cap, 1))}:
            r = cdiv(m_t, cdiv(m_t, r))  # fewest cores with the same rows per core
            out[f"height/{r}"] = None
    # block: rows over grid_y, channel columns = largest divisor of Cin <= grid_x (and <= Cout tiles)
    col_cap = min(hw.grid_x, n_t)
    cols = {_largest_divisor(ci, col_cap), _largest_divisor(ci, max(col_cap // 2, 1))} - {1}
    for c in sorted(cols, reverse=True):
        for r in {min(hw.grid_y, m_t), _largest_divisor(m_t, hw.grid_y)} - {1}:
            out[f"block/{r}x{c}"] = None
    # block over the whole grid, columns not dividing the channels: only the DRAM-interleaved path can use it
    full = (min(hw.grid_y, m_t), min(hw.grid_x, n_t))
    if full[0] > 1 and full[1] > 1:
        out[f"block/{full[0]}x{full[1]}"] = None
    # width: channels over all cores
    for cap in (min(hw.cores, n_t), min(hw.cores, n_t) // 2):
        if cap >= 2:
            c = _largest_divisor(ci, cap)
            if c > 1:
                out[f"width/{c}"] = None
    return list(out)
