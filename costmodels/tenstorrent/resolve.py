"""Turning Tensix mapping points into the numeric inputs of `tenstorrent.cost.evaluate`.

Two kinds of points: space points carry ranks (``act_block_h_rank``, ``subblock_rank``) that
resolve against the layout; knob points (what a `Mapping` stores) carry ``act_block_h`` rows and
an ``out_subblock`` "HxW" string. Both become broadcastable numeric arrays, so the one-point
path of check/cost and the whole-space table of score_batch feed the same formulas.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from math import isqrt

import numpy as np

from costmodels.tenstorrent.cost import LAYOUT_FIELDS, MEMORIES, SUBBLOCKS
from costmodels.tenstorrent.hardware import FIDELITIES, TensixHardware
from costmodels.tenstorrent.reshard import reshard_matrix
from costmodels.tenstorrent.shape import KINDS, TTShape, layout_stats

#: ttnn's sub-block list as arrays over a trailing axis (`resolve_ranks`)
_SB_PAIRS = np.array(SUBBLOCKS, dtype=np.float64)
_SB_H = np.array([h for h, _ in SUBBLOCKS], dtype=np.int64)
_SB_W = np.array([w for _, w in SUBBLOCKS], dtype=np.int64)
_SB_AREA = _SB_H * _SB_W
_SB_H_IS_1 = _SB_H == 1


def layout_table(shape: TTShape, hw: TensixHardware, layouts: Sequence[str]) -> dict[str, np.ndarray]:
    """Per-layout fields (`tenstorrent.cost.LAYOUT_FIELDS`; ``fields``: all of them as columns) plus ``divs``.

    ``divs[i, k]`` is the k-th largest divisor of layout i's per-core height in tiles that is at
    most `block_limit` (the last one, 1, repeated past the end), the act_block_h a rank picks.
    """
    rows = []
    reshard, moved = _reshard_columns(shape, hw, layouts)
    limit = block_limit(shape, hw)
    per = [block_divisors(layout_stats(shape, hw, str(lay)).pm_t, limit) for lay in layouts]
    divs = np.ones((len(layouts), max((len(d) for d in per), default=1)), dtype=np.int64)
    for i, lay in enumerate(layouts):
        s = layout_stats(shape, hw, str(lay))
        kind = KINDS.index(s.kind) if s.kind in KINDS else -1
        rows.append(
            (float(s.valid), float(s.split_ok), s.pm_t, s.pn_t, s.k_t, s.kblocks, s.halo_buffer_sticks,
             s.halo_max_remote_sticks, s.halo_total_remote_sticks, s.stick_channels, kind, s.r, s.c, reshard[i],
             moved[i])
        )  # fmt: skip
        d = per[i]
        divs[i] = d + (d[-1],) * (divs.shape[1] - len(d))
    arr = np.array(rows, dtype=np.float64).reshape(len(layouts), len(LAYOUT_FIELDS))
    out: dict[str, np.ndarray] = {f: arr[:, j] for j, f in enumerate(LAYOUT_FIELDS)}
    out["fields"] = arr
    out["divs"] = divs
    return out


def _reshard_columns(shape: TTShape, hw: TensixHardware, layouts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, bytes) of resharding the input from `TensixHardware.input_layout` to each layout (zeros if unset)."""
    zeros = np.zeros(len(layouts))
    if not (hw.input_in_l1 and hw.input_layout):
        return zeros, zeros
    usable = [i for i, lay in enumerate(layouts) if layout_stats(shape, hw, str(lay)).valid]
    if not usable or not layout_stats(shape, hw, hw.input_layout).valid:
        return zeros, zeros
    cyc, moved = reshard_matrix(
        shape.in_sticks, shape.in_channels, shape.in_bytes, [hw.input_layout], [str(layouts[i]) for i in usable], hw
    )
    out_c, out_b = zeros.copy(), zeros.copy()
    out_c[usable], out_b[usable] = cyc[0], moved[0]
    return out_c, out_b


def block_limit(shape: TTShape, hw: TensixHardware) -> int:
    """The largest act_block_h or in0_block_w (tiles) any mapping can fit in L1 (the space's block-size limit).

    Proof: the paper's single-core inequality (`tenstorrent.cost`, ``l1-paper``) needs
    ``[bHo*bWo + Kp*(bHo + bWo)]*sizeof < L1_free`` with ``bWo >= 32`` (one output tile) and
    ``Kp >= 32`` (height: all of K; block/width: K / c >= one tile; DRAM: in0_block_w tiles), so
    ``bHo * 64 * sizeof < L1_free``: act_block_h tiles ``< L1_free / (2048 * sizeof)``. On the
    DRAM path ``Kp = in0_block_w * 32`` and ``bHo, bWo >= 32`` give the same bound for in0_block_w.
    A larger block fails ``l1-paper`` on every layout, so leaving it out loses no feasible point.
    """
    return max(1, -(-hw.l1_free_bytes // int(2048 * shape.in_bytes)) - 1)


@lru_cache(maxsize=4096)
def block_divisors(n: int, limit: int) -> tuple[int, ...]:
    """Every divisor of ``n >= 1`` that is at most `limit`, largest first (1 always)."""
    small = [d for d in range(1, isqrt(n) + 1) if n % d == 0]
    large = [n // d for d in small if d * d != n]  # the co-divisors, largest first
    return tuple(d for d in large + small[::-1] if d <= limit)


def resolve_ranks(
    lt: dict[str, np.ndarray], hw: TensixHardware, lay: np.ndarray, rank_h: np.ndarray, rank_s: np.ndarray,
    fp32: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(act_block_h tiles, sub-block h, sub-block w) of rank points.

    The act_block_h is broadcast over the layout and act_block_h inputs only, the sub-block over all.

    ``act_block_h_rank`` k picks the k-th largest divisor of the layout's per-core height in tiles
    up to `block_limit` (0 = the whole height, ttnn's default, whenever it fits that limit);
    ``subblock_rank`` k picks the k-th feasible pair of
    ttnn's sub-block list (0 = ttnn's own choice; hardware-facts.md §4.2 step 2). Ranks past the
    end take the last entry.
    """
    abh_t = lt["divs"][lay, np.minimum(rank_h, lt["divs"].shape[1] - 1)]
    pn_t = lt["pn_t"][lay][..., None]
    dst = np.where(fp32, hw.dst_tiles_fp32, hw.dst_tiles)[..., None]
    # one trailing axis over ttnn's list: which pairs fit, and how many fit before each
    fits = (dst >= _SB_AREA) & (abh_t[..., None] % _SB_H == 0) & ((pn_t % _SB_W == 0) & (_SB_H_IS_1 | (pn_t == _SB_W)))
    seen = np.cumsum(fits, axis=-1) - fits
    hit = fits & (seen == np.asarray(rank_s)[..., None])
    last_fit = len(SUBBLOCKS) - 1 - np.argmax(fits[..., ::-1], axis=-1)  # none fits: argmax 0, the last pair
    pick = np.where(hit.any(axis=-1), np.argmax(hit, axis=-1), last_fit)
    return abh_t, _SB_PAIRS[pick, 0], _SB_PAIRS[pick, 1]


def subblock_pair(value: object) -> tuple[float, float]:
    """``"HxW"`` -> (H, W); NaNs when it does not parse."""
    h, _, w = str(value).partition("x")
    return (float(h), float(w)) if h.isdigit() and w.isdigit() and int(h) > 0 and int(w) > 0 else (np.nan, np.nan)


def fidelity_inputs(hw: TensixHardware, names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tile cycles, allowed by the policy) of fidelity names; NaN cycles for unknown names."""
    cyc = np.array([float(hw.tile_cycles[f]) if f in FIDELITIES else np.nan for f in names.tolist()])
    allowed = np.array([f in hw.fidelities for f in names.tolist()], dtype=bool)
    return cyc, allowed


def numeric_inputs(shape: TTShape, hw: TensixHardware, cols: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """Layout table and numeric inputs of 1-D columns of space points (ranks) or knob points.

    This is the general path (any values, unknown ones included); `tenstorrent.scoring` scores the space's own
    choices much faster through a precomputed table.
    """
    lay_s = np.asarray(cols["layout"]).astype(str)
    uniq, lay = np.unique(lay_s, return_inverse=True)
    lt = layout_table(shape, hw, [str(u) for u in uniq])
    lay = lay.reshape(-1)
    n = lay.size
    fp32 = np.asarray(cols["fp32_acc"], dtype=bool)
    mem = np.asarray(cols.get("memory", np.full(n, MEMORIES[0]))).astype(str)
    fid = np.asarray(cols["math_fidelity"]).astype(str)
    tile_cyc, fid_ok = fidelity_inputs(hw, fid)
    x: dict[str, np.ndarray] = {
        "lay": lay,
        "dram": mem == MEMORIES[1],
        "mem_ok": np.isin(mem, MEMORIES),
        "div": np.asarray(cols["act_block_w_div"], dtype=np.float64),
        "kb": np.asarray(cols.get("in0_block_w", np.ones(n)), dtype=np.float64),
        "adb": np.asarray(cols["act_double_buffer"], dtype=bool),
        "wdb": np.asarray(cols["weights_double_buffer"], dtype=bool),
        "split": np.asarray(cols["split_reader"], dtype=bool),
        "fp32": fp32,
        "tile_cyc": tile_cyc,
        "fid_ok": fid_ok,
    }
    if "act_block_h_rank" in cols:
        rank_h = np.asarray(cols["act_block_h_rank"], dtype=np.int64)
        rank_s = np.asarray(cols["subblock_rank"], dtype=np.int64)
        abh_t, x["sb_h"], x["sb_w"] = resolve_ranks(lt, hw, lay, rank_h, rank_s, fp32)
        x["abh_rows"] = (abh_t * shape.tile).astype(np.float64)
    else:
        x["abh_rows"] = np.asarray(cols["act_block_h"], dtype=np.float64)
        pairs = np.array([subblock_pair(v) for v in np.asarray(cols["out_subblock"]).tolist()]).reshape(-1, 2)
        x["sb_h"], x["sb_w"] = pairs[:, 0], pairs[:, 1]
    return lt, x
