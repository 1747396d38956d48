"""The Tensix conv2d/matmul cost and constraint formulas, over numpy arrays of mapping points.

One implementation serves `check`, `cost` (one-point arrays) and `score_batch` (all points), so
they cannot drift. Formulas follow hardware-facts.md §4.2 (Tenstorrent recipe) and
tenstorrent-conv2d.md; assumptions are marked [ASSUMPTION].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodels.tt_hardware import FIDELITIES, TensixHardware
from costmodels.tt_shape import KINDS, TTShape, layout_stats

#: what check/cost read from a mapping's knobs (act_block_h in rows, out_subblock "HxW")
PARAMS = (
    "layout",
    "act_block_h",
    "act_block_w_div",
    "out_subblock",
    "act_double_buffer",
    "weights_double_buffer",
    "split_reader",
    "math_fidelity",
    "fp32_acc",
)

#: ttnn's sub-block preference order (hardware-facts.md §4.2 step 2)
SUBBLOCKS: tuple[tuple[int, int], ...] = (
    (2, 4), (4, 2), (1, 8), (8, 1), (1, 7), (7, 1), (2, 3), (3, 2), (1, 6), (6, 1),
    (1, 5), (5, 1), (2, 2), (1, 4), (4, 1), (1, 3), (3, 1), (1, 2), (2, 1), (1, 1),
)  # fmt: skip

#: constraint codes, in the order check() reports them
CODES = (
    "layout",
    "channel-split",
    "act-block-h",
    "act-block-w-div",
    "math-fidelity",
    "dst-capacity",
    "subblock-divides",
    "subblock-shape",
    "l1-paper",
    "l1-capacity",
)


@dataclass
class Evaluation:
    """Every per-point quantity of the model (numpy arrays, one entry per point)."""

    ok: dict[str, np.ndarray]  # constraint code -> satisfied
    a: dict[str, np.ndarray]  # named quantities (cycles, bytes, per-core sizes)

    @property
    def feasible(self) -> np.ndarray:
        out = np.ones_like(next(iter(self.ok.values())), dtype=bool)
        for v in self.ok.values():
            out &= v
        return out


def _gather(values: np.ndarray, table: dict[str, tuple[float, ...]], width: int) -> np.ndarray:
    """Look up each distinct string once and broadcast: returns [width, n] float array."""
    uniq, inv = np.unique(values.astype(str), return_inverse=True)
    rows = np.array([table[u] if u in table else (np.nan,) * width for u in uniq], dtype=np.float64).reshape(-1, width)
    return rows[inv.reshape(-1)].T


def evaluate(shape: TTShape, hw: TensixHardware, cols: dict[str, np.ndarray]) -> Evaluation:
    """Evaluate the points given as columns (see `PARAMS`)."""
    t = shape.tile
    lay = np.asarray(cols["layout"]).astype(str)
    fields: tuple[str, ...] = ("valid", "split_ok", "pm_t", "pn_t", "k_t", "kblocks", "buf", "max_remote")
    fields += ("tot_remote", "stick_ch", "kind", "r", "c")
    table: dict[str, tuple[float, ...]] = {}
    for u in np.unique(lay):
        s = layout_stats(shape, hw, str(u))
        table[str(u)] = (
            float(s.valid), float(s.split_ok), s.pm_t, s.pn_t, s.k_t, s.kblocks, s.halo_buffer_sticks,
            s.halo_max_remote_sticks, s.halo_total_remote_sticks, s.stick_channels, KINDS.index(s.kind)
            if s.kind in KINDS else -1, s.r, s.c,
        )  # fmt: skip
    g = dict(zip(fields, _gather(lay, table, len(fields)), strict=True))
    height, block, width = (g["kind"] == 0), (g["kind"] == 1), (g["kind"] == 2)
    r, c, pm_t, pn_t, k_t = g["r"], g["c"], g["pm_t"], g["pn_t"], g["k_t"]

    abh_rows = np.asarray(cols["act_block_h"], dtype=np.float64)
    abh_t = abh_rows / t
    div = np.asarray(cols["act_block_w_div"], dtype=np.float64)
    sb = _gather(np.asarray(cols["out_subblock"]), {f"{h}x{w}": (h, w) for h in range(1, 9) for w in range(1, 9)}, 2)
    sb_h, sb_w = sb[0], sb[1]
    adb = np.asarray(cols["act_double_buffer"], dtype=bool)
    wdb = np.asarray(cols["weights_double_buffer"], dtype=bool)
    split = np.asarray(cols["split_reader"], dtype=bool)
    fid = np.asarray(cols["math_fidelity"]).astype(str)
    fp32 = np.asarray(cols["fp32_acc"], dtype=bool)
    tile_cyc = _gather(fid, {f: (float(hw.tile_cycles[f]),) for f in FIDELITIES}, 1)[0]  # type: ignore[index]

    ok: dict[str, np.ndarray] = {}
    ok["layout"] = g["valid"] == 1
    ok["channel-split"] = g["split_ok"] == 1
    nbh = pm_t / abh_t
    # act_block_h must be a multiple of 32 that divides the per-core height (tenstorrent-conv2d.md, L1 constraint;
    # hardware-facts.md §4.2 step 5)
    ok["act-block-h"] = (abh_rows % t == 0) & (abh_rows >= t) & (np.mod(pm_t, np.maximum(abh_t, 1)) == 0)
    # act_block_w_div is ignored for height and block sharding (tenstorrent-conv2d.md, Conv2dConfig)
    div = np.where(width, div, 1.0)
    kblocks = g["kblocks"] * div
    abw_t = k_t / kblocks
    ok["act-block-w-div"] = (div >= 1) & (np.mod(k_t / g["kblocks"], div) == 0)
    # weights double buffering only applies to block sharding (tenstorrent-conv2d.md, Conv2dConfig)
    wdb = wdb & block
    ok["math-fidelity"] = ~np.isnan(tile_cyc)
    dst = np.where(fp32, hw.dst_tiles_fp32, hw.dst_tiles)
    ok["dst-capacity"] = (sb_h * sb_w <= dst) & ~np.isnan(sb_h)
    ok["subblock-divides"] = (np.mod(abh_t, sb_h) == 0) & (np.mod(pn_t, sb_w) == 0)
    ok["subblock-shape"] = (sb_h == 1) | (sb_w == pn_t)

    # ---- L1 (per core) -----------------------------------------------------------------------
    bi, bw, bo = shape.in_bytes, shape.w_bytes, shape.out_bytes
    b_ho, b_wo, k_full = abh_rows, pn_t * t, k_t * t
    # the paper's single-core inequality, with the K the core's blocks cover: all of K for height
    # sharding (weights resident), the core's channel slice for block/width ([ASSUMPTION]: K is streamed)
    k_paper = np.where(height, k_full, k_full / c)
    paper = (b_ho * b_wo + k_paper * (b_ho + b_wo)) * bi
    halo_buf = g["buf"] * g["stick_ch"] * bi
    act_cb = b_ho * abw_t * t * bi * np.where(adb, 2, 1)
    w_cb = np.where(height, k_full * b_wo * bw, abw_t * t * b_wo * bw * np.where(wdb, 2, 1))
    out_shard = pm_t * t * b_wo * bo * shape.batches
    interm = np.where(kblocks > 1, b_ho * b_wo * np.where(fp32, 4.0, bo), 0.0)
    l1_total = halo_buf + act_cb + w_cb + out_shard + interm
    ok["l1-paper"] = paper < hw.l1_free_bytes
    ok["l1-capacity"] = l1_total <= hw.l1_free_bytes

    # ---- time (per core, slowest core) -------------------------------------------------------
    B = shape.batches
    small_rows = max(1.0, 8.0 / shape.rows)  # < 8 valid rows run at 1/8 rate (hardware-facts.md §4.2 step 1)
    t_mac = B * pm_t * k_t * pn_t * tile_cyc * small_rows
    n_sub = B * nbh * kblocks * (abh_t / sb_h) * (pn_t / sb_w)
    t_comp = t_mac + n_sub * hw.subblock_overhead_cycles
    # reader: im2col gather from the local halo buffer (conv path only), one or two reader kernels
    act_core = B * pm_t * t * k_full * bi  # im2col activation block bytes of one core (full K)
    reader_bytes = np.where(shape.conv is not None, act_core / c, 0.0)
    t_reader = reader_bytes / (hw.l1_port_bytes_per_cycle * np.where(split, 2, 1))
    # activation broadcast: block along the core row, width to all cores (tenstorrent-conv2d.md,
    # "Sharded Input Data Movement Across Cores"); each core receives the other c-1 slices
    act_recv = (c - 1) * act_core / c
    # weights: every core holds its K x per-core-N slice; height replicates the full weights,
    # block/width stream them per act block (nbh re-reads)
    w_core = B * k_full * b_wo * bw * np.where(height, 1, nbh)
    link = hw.noc_link_bytes_per_cycle
    hop = hw.noc_hop_cycles * (hw.grid_x + hw.grid_y)
    t_act = act_recv / link + np.where(c > 1, hop, 0)
    t_w = w_core / link + hop
    act_path = t_reader + t_act
    main = np.where(adb, np.maximum(t_comp, act_path), t_comp + act_path)  # [ASSUMPTION: else sum] §4.2 step 6
    main = np.where(wdb, np.maximum(main, t_w), main + t_w)
    # DRAM: input shards in, unique weights (one multicast per column, re-read per act block), output out
    dram_in = shape.in_sticks * shape.in_channels * bi
    dram_w = c * w_core
    dram_out = B * shape.m_t * t * shape.n_t * t * bo
    dram = dram_in + dram_w + dram_out
    t_dram = dram / hw.dram_bytes_per_cycle
    kernel = np.maximum(main, t_dram)
    # halo op before the conv: remote sticks over the NoC, then the local buffer copy
    stick = g["stick_ch"] * bi
    t_halo = np.where(
        shape.conv is not None,
        g["max_remote"] * stick / link
        + np.where(g["max_remote"] > 0, hop, 0)
        + g["buf"] * stick / hw.l1_port_bytes_per_cycle,
        0.0,
    )
    cycles = kernel + t_halo
    cores_used = r * c
    a = {
        "cycles": cycles,
        "t_comp": t_comp,
        "t_reader": t_reader,
        "t_act": t_act,
        "t_w": t_w,
        "t_dram": t_dram,
        "t_halo": t_halo,
        "dram_bytes": dram,
        "noc_w_bytes": cores_used * w_core,
        "noc_act_bytes": cores_used * act_recv,
        "l1_bytes": cores_used * reader_bytes,
        "halo_bytes": g["tot_remote"] * shape.in_channels * bi,
        "footprint": l1_total,
        "paper_bytes": paper,
        "halo_buf": halo_buf,
        "act_cb": act_cb,
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
    }
    return Evaluation(ok=ok, a=a)


def resolve(shape: TTShape, hw: TensixHardware, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Turn the space's rank parameters into the knobs check/cost read.

    ``act_block_h_rank`` k picks the k-th largest multiple of 32 dividing the layout's per-core
    height (0 = the whole height, ttnn's default); ``subblock_rank`` k picks the k-th feasible pair
    of ttnn's sub-block list (0 = ttnn's own choice). Ranks past the end take the last entry.
    """
    out = {k: v for k, v in cols.items() if k not in ("act_block_h_rank", "subblock_rank")}
    lay = np.asarray(cols["layout"]).astype(str)
    n = lay.size
    rank_h = np.asarray(cols["act_block_h_rank"], dtype=np.int64)
    abh_t = np.ones(n, dtype=np.int64)
    pn_t = np.ones(n, dtype=np.int64)
    for u in np.unique(lay):
        s = layout_stats(shape, hw, str(u))
        sel = lay == u
        divs = np.array([d for d in range(s.pm_t, 0, -1) if s.pm_t % d == 0], dtype=np.int64)
        abh_t[sel] = divs[np.minimum(rank_h[sel], divs.size - 1)]
        pn_t[sel] = s.pn_t
    out["act_block_h"] = abh_t * shape.tile
    dst = np.where(np.asarray(cols["fp32_acc"], dtype=bool), hw.dst_tiles_fp32, hw.dst_tiles)
    rank_s = np.asarray(cols["subblock_rank"], dtype=np.int64)
    seen = np.zeros(n, dtype=np.int64)
    pick = np.full(n, len(SUBBLOCKS) - 1, dtype=np.int64)
    done = np.zeros(n, dtype=bool)
    last = np.full(n, len(SUBBLOCKS) - 1, dtype=np.int64)
    for i, (h, w) in enumerate(SUBBLOCKS):
        fits = (h * w <= dst) & (abh_t % h == 0) & (pn_t % w == 0) & ((h == 1) | (pn_t == w))
        hit = fits & ~done & (seen == rank_s)
        pick[hit] = i
        done |= hit
        last = np.where(fits & ~done, i, last)
        seen += fits
    pick = np.where(done, pick, last)
    names = np.array([f"{h}x{w}" for h, w in SUBBLOCKS])
    out["out_subblock"] = names[pick]
    return out
