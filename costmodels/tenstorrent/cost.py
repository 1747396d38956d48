"""The Tensix conv2d/matmul cost and constraint formulas, over numpy arrays of mapping points.

One implementation serves `check`, `cost` (one-point arrays) and `score_batch` (the whole space at
once, broadcast over one axis per parameter), so they cannot drift. Inputs are numeric
(`tenstorrent.resolve` turns points into them). Formulas follow hardware-facts.md §4.2 (Tenstorrent
recipe) and tenstorrent-conv2d.md; assumptions are marked [ASSUMPTION].

Two memory placements share the compute formulas:

* ``l1-sharded``: input, output and (height sharding) weights stay resident in L1, as ttnn's
  sharded conv2d ("Sharding", "Haloing").
* ``dram-interleaved``: operands live in DRAM (tenstorrent-conv2d.md, "Implementation of
  Convolution Operation on a Single Tensix Core" and "Interleaved Tensors"); a conv first transforms
  its input into the activation matrix in DRAM (the document's step 1, a step of its own), then each
  core streams activation blocks ``act_block_h x in0_block_w`` and weight blocks ``in0_block_w x
  N_core`` through circular buffers, computes one output block and writes it back, then moves down
  the rows. The activation rows are read once (multicast along a core row); the weights of a core
  column are re-read once per output block along the rows. No halo, no reuse between windows.

By default a sharded conv reads its input shards from DRAM and writes its output back, as a lone
layer does. In a network (issue #13) the input may arrive L1-sharded from the previous layer
(possibly in another layout: a reshard over the NoC, `tenstorrent.reshard`) and the output may stay
in L1 for the next one; `_placement` says when they do and when they spill to DRAM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodels.tenstorrent.halo import shard_sticks
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.shape import TTShape, cdiv, padded_in_channels

#: what check/cost read from a mapping's knobs (act_block_h in rows, out_subblock "HxW", in0_block_w in tiles)
PARAMS = (
    "layout",
    "memory",
    "act_block_h",
    "act_block_w_div",
    "in0_block_w",
    "out_subblock",
    "act_double_buffer",
    "weights_double_buffer",
    "split_reader",
    "math_fidelity",
    "fp32_acc",
)

MEMORIES = ("l1-sharded", "dram-interleaved")

#: ttnn's sub-block preference order (hardware-facts.md §4.2 step 2)
SUBBLOCKS: tuple[tuple[int, int], ...] = (
    (2, 4), (4, 2), (1, 8), (8, 1), (1, 7), (7, 1), (2, 3), (3, 2), (1, 6), (6, 1),
    (1, 5), (5, 1), (2, 2), (1, 4), (4, 1), (1, 3), (3, 1), (1, 2), (2, 1), (1, 1),
)  # fmt: skip

#: constraint codes, in the order check() reports them
CODES = (
    "layout",
    "memory",
    "channel-split",
    "act-block-h",
    "act-block-w-div",
    "in0-block-w",
    "math-fidelity",
    "accumulation",
    "dst-capacity",
    "subblock-divides",
    "subblock-shape",
    "l1-paper",
    "l1-capacity",
)

#: per-layout fields `evaluate` gathers by layout index (see `tenstorrent.resolve.layout_table`)
LAYOUT_FIELDS = (
    "valid", "split_ok", "pm_t", "pn_t", "k_t", "kblocks", "buf", "max_remote", "tot_remote", "stick_ch", "kind",
    "r", "c", "reshard", "reshard_bytes",
)  # fmt: skip


@dataclass
class Evaluation:
    """Every per-point quantity of the model (numpy arrays, broadcast over the points)."""

    ok: dict[str, np.ndarray]  # constraint code -> satisfied
    a: dict[str, np.ndarray]  # named quantities (cycles, bytes, per-core sizes)

    @property
    def feasible(self) -> np.ndarray:
        out: np.ndarray | None = None
        for v in self.ok.values():
            out = v if out is None else out & v
        assert out is not None
        return out


def _over(ufunc: np.ufunc, a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    """``ufunc(a, b)``, written over `a` (a temporary of `_evaluate`) when it has the result's shape and type.

    The whole-space grid's last steps are its largest arrays: reusing them saves allocating (and
    first touching) a fresh one per step. The values are the same either way.
    """
    if np.broadcast(a, b).shape == a.shape and a.dtype == np.result_type(a, b):
        return ufunc(a, b, out=a)
    return ufunc(a, b)


def _placement(hw: TensixHardware, dram: np.ndarray, resident: np.ndarray) -> dict[str, np.ndarray] | None:
    """Which of the input and output stay in L1 (issue #13), or None for a lone problem (DRAM in and out).

    A tensor asked to stay in L1 (`TensixHardware.input_in_l1` / ``output_in_l1``) stays there when the
    mapping is L1-sharded and its resident set fits: its own buffers (`resident`: halo buffer, CBs and
    output shard, plus the input shard it receives) and the other live tensors of the network
    (``l1_live_bytes``, the residual branches) within the free L1 (hardware-facts.md §4.1, L1 per
    core row; §4.2 step 3). Otherwise it spills to DRAM: a DRAM-interleaved mapping streams from and to
    DRAM by definition, and a sharded one that does not fit cannot keep the tensor resident.
    """
    if not (hw.input_in_l1 or hw.output_in_l1):
        return None
    fits = ~dram & (resident + hw.l1_live_bytes <= hw.l1_free_bytes)
    return {
        "in_keep": fits & hw.input_in_l1,
        "in_spill": ~fits & hw.input_in_l1,
        "out_keep": fits & hw.output_in_l1,
        "out_spill": ~fits & hw.output_in_l1,
    }


def dram_k_tiles(shape: TTShape) -> int:
    """K of a core's GEMM on the DRAM path: Kh blocks of round_up(Cin*Kw, 32) (hardware-facts.md §4.2 step 5).

    Cin is ttnn's padded count (`tenstorrent.shape.padded_in_channels`, the DRAM-sliced conv's alignment).
    """
    return shape.kh * cdiv(padded_in_channels(shape, "dram", 1) * shape.kw, shape.tile)


def evaluate(shape: TTShape, hw: TensixHardware, lt: dict[str, np.ndarray], x: dict[str, np.ndarray]) -> Evaluation:
    """Evaluate the points given as numeric inputs `x` (broadcastable arrays, see `tenstorrent.resolve`).

    Args:
        shape: the problem's GEMM view.
        hw: the chip.
        lt: per-layout fields (``lt["fields"]``: one column per `LAYOUT_FIELDS` entry), indexed by ``x["lay"]``.
        x: ``lay`` (layout index), ``dram`` and ``mem_ok`` (memory placement, known), ``abh_rows``,
            ``div``, ``kb`` (in0_block_w tiles), ``sb_h``/``sb_w`` (NaN if unknown), ``adb``, ``wdb``,
            ``split``, ``fp32`` (bools), ``tile_cyc`` (NaN if unknown) and ``fid_ok`` (allowed by policy).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return _evaluate(shape, hw, lt, x)


def _evaluate(shape: TTShape, hw: TensixHardware, lt: dict[str, np.ndarray], x: dict[str, np.ndarray]) -> Evaluation:
    t = shape.tile
    rows = lt["fields"][x["lay"]]  # every field at once: one gather
    g = {k: rows[..., j] for j, k in enumerate(LAYOUT_FIELDS)}
    dram = x["dram"]
    height, block, width = (g["kind"] == 0), (g["kind"] == 1), (g["kind"] == 2)
    r, c, pm_t, pn_t = g["r"], g["c"], g["pm_t"], g["pn_t"]
    abh_rows, kb, sb_h, sb_w, fp32, tile_cyc = x["abh_rows"], x["kb"], x["sb_h"], x["sb_w"], x["fp32"], x["tile_cyc"]
    abh_t = abh_rows / t
    nbh = pm_t / abh_t
    # K of the core's GEMM: the core's channel slices (sharded) or all of K, streamed in in0_block_w blocks (DRAM)
    k_dram = float(dram_k_tiles(shape))
    # act_block_w_div is ignored for height and block sharding (tenstorrent-conv2d.md, Conv2dConfig)
    div = np.where(width & ~dram, x["div"], 1.0)
    k_t = np.where(dram, k_dram, g["k_t"])
    kblocks = np.where(dram, k_dram / kb, g["kblocks"] * div)
    abw_t = np.where(dram, kb, k_t / kblocks)

    ok: dict[str, np.ndarray] = {}
    ok["layout"] = g["valid"] == 1
    ok["memory"] = x["mem_ok"]
    ok["channel-split"] = np.where(dram, c <= shape.n_t, g["split_ok"] == 1)
    # act_block_h must be a multiple of 32 that divides the per-core height (tenstorrent-conv2d.md, L1 constraint;
    # hardware-facts.md §4.2 step 5). A width-sharded conv takes the whole per-core height: ttnn ignores
    # act_block_h_override under WIDTH_SHARDED (tenstorrent-conv2d.md, Conv2dConfig). A sharded 1x1 conv runs as
    # a matmul whose in0 block is the core's whole M under every sharding (tt-metal conv2d_utils.cpp @002a3f41,
    # determine_matmul_op_config_from_conv_op_config: out_block_h = per_core_M = per_core_out_matrix_height_ntile
    # in both the height-sharded 1D and the block/width 2D program config); a plain einsum keeps its blocks
    whole = ~((width | shape.mm_conv) & ~dram) | (abh_t == pm_t)
    ok["act-block-h"] = (abh_rows % t == 0) & (abh_rows >= t) & (np.mod(pm_t, np.maximum(abh_t, 1)) == 0) & whole
    ok["act-block-w-div"] = (div >= 1) & (np.mod(g["k_t"] / g["kblocks"], div) == 0)
    # the streamed K block must divide K (ttnn matmul: in0_block_w divides K_t)
    ok["in0-block-w"] = ~dram | ((kb >= 1) & (np.mod(k_dram, kb) == 0))
    ok["math-fidelity"] = ~np.isnan(tile_cyc) & x["fid_ok"]
    ok["accumulation"] = fp32 | bool(hw.bf16_accumulation)
    dst = np.where(fp32, hw.dst_tiles_fp32, hw.dst_tiles)
    ok["dst-capacity"] = (sb_h * sb_w <= dst) & ~np.isnan(sb_h)
    ok["subblock-divides"] = (np.mod(abh_t, sb_h) == 0) & (np.mod(pn_t, sb_w) == 0)
    ok["subblock-shape"] = (sb_h == 1) | (sb_w == pn_t)

    # ---- L1 (per core) -----------------------------------------------------------------------
    bi, bw, bo = shape.in_bytes, shape.w_bytes, shape.out_bytes
    b_ho, b_wo, k_full = abh_rows, pn_t * t, k_t * t
    # the paper's single-core inequality over the K its input blocks cover: all of K for height
    # sharding (weights resident), the core's channel slice for block/width ([ASSUMPTION]: K is streamed),
    # one in0_block_w block on the DRAM path
    k_paper = np.where(dram, kb * t, np.where(height, k_full, k_full / c))
    paper = (b_ho * b_wo + k_paper * (b_ho + b_wo)) * bi
    # the halo buffer holds row-major sticks: bf16 for a block-float input (`shape.halo_stick_bytes`)
    sb = shape.stick_bytes
    halo_buf = np.where(dram, 0.0, g["buf"] * g["stick_ch"] * sb)
    # one act_block_h x act_block_w block; none beside the shard for a height-sharded matmul (an einsum, or a 1x1 conv
    # on ttnn's matmul path), which reads its blocks in place: tt-metal's 1D matmul sizes in0's CB as the whole shard
    # (in0_CB_tiles = num_blocks * per_core_M * in0_block_w * B) and places it on the shard's own memory
    # (set_globally_allocated_address(*in0_buffer)) (tt-metal ttnn/.../matmul/device/factory/
    # matmul_multicore_reuse_mcast_1d_program_factory.cpp)
    in_place = height & ~dram & (shape.conv is None)
    act_block = np.where(in_place, 0.0, b_ho * abw_t * t * bi)
    # weights double buffering applies to block sharding (tenstorrent-conv2d.md, Conv2dConfig) and to the
    # streamed weight blocks of the DRAM path
    wdb = x["wdb"] & (block | dram)
    w_cb = np.where(height & ~dram, k_full * b_wo * bw, abw_t * t * b_wo * bw * np.where(wdb, 2, 1))
    # the whole output shard stays in L1 when sharded; one output block when streamed to DRAM
    out_shard = np.where(dram, b_ho * b_wo * bo, pm_t * t * b_wo * bo * shape.batches)
    # partial sums across K blocks: tt-metal keeps them at partial_dtype = packer_l1_acc ? (fp32_dest_acc_en ?
    # FLOAT32 : BFLOAT16) : the output's dtype, in the output's own buffer when that is the output's dtype and in a
    # CB of their own otherwise (conv: `get_cb_info`, MATMUL_PARTIALS `is_globally_allocated` when partial_dtype ==
    # output_datatype, conv2d_op_program_factory_common.cpp @003324fc; matmul: interm0_df, "Share buffer if same
    # data format"). The model keeps the partials of several K blocks in its accumulator (packer L1 accumulation:
    # f32, or bf16 where bf16 accumulation is allowed), so they take L1 of their own only beside an output of
    # another format (the supported formats differ in size: bf16 2, f32 4, bfloat8_b 1.0625, bfloat4_b 0.5625 B)
    part = np.where(fp32, 4.0, 2.0)
    interm = np.where((kblocks > 1) & (part != bo), b_ho * b_wo * part, 0.0)
    # act_block_h sets the activation CB; double buffering keeps two blocks (tenstorrent-conv2d.md,
    # enable_act_double_buffer: "if enough memory is available"). A requested double buffer that does
    # not fit beside the other buffers is dropped (one block, the reader no longer overlaps compute),
    # so a smaller act_block_h can buy the overlap back: the choice of act_block_h has a price.
    others = halo_buf + w_cb + out_shard + interm
    adb = x["adb"] & (others + 2 * act_block <= hw.l1_free_bytes)
    act_cb = act_block * np.where(adb, 2, 1)
    l1_total = others + act_cb
    ok["l1-paper"] = paper < hw.l1_free_bytes
    ok["l1-capacity"] = l1_total <= hw.l1_free_bytes

    # ---- time (per core, slowest core) -------------------------------------------------------
    B = shape.batches
    small_rows = max(1.0, 8.0 / shape.rows)  # < 8 valid rows run at 1/8 rate (hardware-facts.md §4.2 step 1)
    t_mac = B * pm_t * k_t * pn_t * tile_cyc * small_rows
    n_sub = B * nbh * kblocks * (abh_t / sb_h) * (pn_t / sb_w)
    t_comp = t_mac + n_sub * hw.subblock_overhead_cycles
    # reader: im2col gather from the local halo buffer (sharded conv path only), one or two reader kernels
    act_core = B * pm_t * t * k_full * bi  # im2col activation bytes of one core (full K)
    # the reader gathers the halo buffer's sticks, so it reads them in the halo's format (bf16 for block floats)
    reader_bytes = np.where(dram | (shape.conv is None), 0.0, act_core / c * (sb / bi))
    t_reader = reader_bytes / (hw.l1_port_bytes_per_cycle * np.where(x["split"], 2, 1))
    # activations a core receives (tenstorrent-conv2d.md, "Sharded Input Data Movement Across Cores"): block and
    # width sharding split the input channels, "each core fetches a subset of the weights matrix corresponding to
    # its assigned output", computes a partial output from its own slice, then "each core broadcast[s] its input
    # in turn" to the cores that need it (block: its core row; width: every core), which add partial outputs. So
    # a core receives the other c-1 slices of every activation row it computes: (c-1)/c of its im2col rows at
    # full K. DRAM: its rows, all of K, once.
    act_recv = np.where(dram, act_core, (c - 1) * act_core / c)
    # weights: height replicates the full weights; block/width (the core's output-channel slice) and DRAM
    # stream them once per act block (nbh; 1 for width, which takes the whole height)
    w_core = B * k_full * b_wo * bw * np.where(height & ~dram, 1, nbh)
    link = hw.noc_link_bytes_per_cycle
    hop = hw.noc_hop_cycles * (hw.grid_x + hw.grid_y)
    # each broadcast is one multicast (one NoC traversal plus the route's hop latency, hardware-facts.md §4.2
    # step 4), and the c-1 remote ones of each act block come one after the other ("in turn"): the receiver
    # waits the latency once per turn. The DRAM path streams its rows in one pass (one latency).
    turns = np.where(dram, 1.0, B * nbh * np.maximum(c - 1, 0))
    t_act = act_recv / link + turns * hop
    t_w = w_core / link + hop
    act_path = t_reader + t_act
    main = np.where(adb, np.maximum(t_comp, act_path), t_comp + act_path)  # [ASSUMPTION: else sum] §4.2 step 6
    overlapped = np.maximum(main, t_w)
    main = np.where(wdb, overlapped, _over(np.add, main, t_w))
    # DRAM path: the writer sends each output block back while the next one computes ([ASSUMPTION] overlapped)
    t_out = np.where(dram, B * pm_t * t * b_wo * bo / link, 0.0)
    main = _over(np.maximum, main, t_out)
    # DRAM bytes. Sharded: input shards in, unique weights (one multicast per column, re-read per act block).
    # Interleaved: every row of the activation matrix once (padded to tiles; a matmul's is its input), each
    # column's weights once per row block (§4.2 step 4: multicast = one traversal). Output written once.
    dram_in_sh = shape.in_sticks * shape.stored_channels * bi  # a tiled input's sticks are whole tiles
    act_matrix = B * shape.m_t * t * k_dram * t * bi
    dram_in_d = max(act_matrix, dram_in_sh)
    dram_w_d = B * k_dram * t * shape.n_t * t * bw * nbh
    dram_out = B * shape.m_t * t * shape.n_t * t * bo
    cores_used = r * c
    placed = _placement(hw, dram, l1_total + np.where(hw.input_in_l1, dram_in_sh / cores_used, 0.0))
    in_read = dram_in_sh if placed is None else np.where(placed["in_keep"], 0.0, dram_in_sh)
    dram_bytes = np.where(dram, dram_in_d + dram_w_d, in_read + c * w_core) + dram_out
    t_reshard: np.ndarray | float = 0.0
    if placed is not None:
        # spilled: the L1 copy the producer kept goes to DRAM and is read back (input), the output goes to
        # DRAM and is read back by the next layer (output); kept: no DRAM traffic for that tensor
        dram_bytes = (
            dram_bytes
            + np.where(placed["in_spill"], dram_in_sh, 0.0)
            + np.where(placed["out_keep"], -dram_out, np.where(placed["out_spill"], dram_out, 0.0))
        )
        # a sharded conv whose input arrives in another layout reshards it first (ttnn's
        # reshard_if_not_optimal, tenstorrent-conv2d.md Conv2dConfig; priced in `tenstorrent.reshard`)
        t_reshard = np.where(dram | (not hw.input_in_l1), 0.0, g["reshard"])
    t_dram = dram_bytes / hw.dram_bytes_per_cycle
    kernel = _over(np.maximum, main, t_dram)
    # the interleaved conv's step 1, "Transform the input tensor into the activation matrix", is a step of its
    # own before the block loop (tenstorrent-conv2d.md, "Implementation of Convolution Operation on a Single
    # Tensix Core": steps 2-7 then load activation blocks of that matrix from global memory, which L1 cannot
    # hold). So it runs first, not overlapped: read the input once, write the Kh*Kw-expanded matrix to DRAM
    # ([ASSUMPTION] at the chip's DRAM bandwidth, interleaved over every bank). A matmul's matrix is its input.
    im2col = np.where(dram, dram_in_sh + act_matrix, 0.0) if shape.conv is not None else np.zeros(1)
    t_im2col = im2col / hw.dram_bytes_per_cycle
    dram_bytes = dram_bytes + im2col
    # halo op before a sharded conv: remote sticks over the NoC, then the local buffer copy. A block-float
    # input is untilized to bf16 sticks first, inside the halo op (`shape.halo_stick_bytes`): each core reads
    # its input shard's tiles and writes its bf16 rows, one pass through L1 ([ASSUMPTION] at the L1 port
    # rate, a lower estimate of the unpack/pack work). Its sticks then move as bf16.
    stick = g["stick_ch"] * sb
    shard_in = shard_sticks(shape.in_sticks, r, t)  # the core's input shard, as the halo splits it
    t_untilize = shard_in * g["stick_ch"] * (bi + sb) / hw.l1_port_bytes_per_cycle if shape.untilize else 0.0
    t_halo = np.where(
        (shape.conv is not None) & ~dram,
        g["max_remote"] * stick / link
        + np.where(g["max_remote"] > 0, hop, 0)
        + g["buf"] * stick / hw.l1_port_bytes_per_cycle
        + t_untilize,
        0.0,
    )
    # the halo op runs before the conv micro-op: "The input to the convolution micro-op is the output of the
    # halo operation" (tenstorrent-conv2d.md, "Implementation"), a separate op, so it adds; nothing in the
    # document overlaps it with compute. The DRAM path has no halo and adds its transform step instead.
    cycles = _over(np.add, kernel, t_halo) + t_im2col
    if placed is not None:
        cycles = cycles + t_reshard
    a = {
        "cycles": cycles,
        "t_comp": t_comp,
        "t_reader": t_reader,
        "t_act": t_act,
        "act_turns": turns,
        "t_w": t_w,
        "t_out": t_out,
        "t_dram": t_dram,
        "t_halo": t_halo,
        "t_im2col": t_im2col,
        "t_reshard": np.zeros(1) if placed is None else np.asarray(t_reshard, dtype=np.float64),
        "reshard_bytes": np.where(dram | (not hw.input_in_l1), 0.0, g["reshard_bytes"]),
        "in_kept": np.zeros(1, dtype=bool) if placed is None else placed["in_keep"],
        "out_kept": np.zeros(1, dtype=bool) if placed is None else placed["out_keep"],
        "spilled": np.zeros(1, dtype=bool) if placed is None else placed["in_spill"] | placed["out_spill"],
        "dram_bytes": dram_bytes,
        "noc_w_bytes": cores_used * w_core,
        "noc_act_bytes": cores_used * act_recv,
        "l1_bytes": cores_used * reader_bytes,
        "halo_bytes": np.where(dram, 0.0, g["tot_remote"] * g["stick_ch"] * c * sb),
        "footprint": l1_total,
        "paper_bytes": paper,
        "halo_buf": halo_buf,
        "act_cb": act_cb,
        "act_db": adb,
        "act_db_lost": x["adb"] & ~adb,
        "w_cb": w_cb,
        "out_shard": out_shard,
        "interm": interm,
        "pm_t": pm_t,
        "pn_t": pn_t,
        "k_t": k_t,
        "abw_t": abw_t,
        "kblocks": kblocks,
        "nbh": nbh,
        "cores": cores_used,
        "r": r,
        "c": c,
        "sb_h": sb_h,
        "sb_w": sb_w,
        "dst": dst,
        # what the energy breakdowns read (costmodels/tenstorrent/energy.py): DRAM bytes per operand, overlaps
        "dram_act_bytes": np.where(dram, dram_in_d, dram_in_sh) + im2col,
        "dram_out_bytes": np.atleast_1d(np.asarray(dram_out, dtype=np.float64)),
        "adb": x["adb"],
        "wdb": wdb,
    }
    return Evaluation(ok=ok, a=a)
