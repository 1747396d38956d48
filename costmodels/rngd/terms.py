"""Cost terms of RNGD points that depend on one stage's choices (hardware-facts.md §1.2).

The per-point formula (`rngd.cost.combine`) multiplies and compares a few terms, each fixed by
the choices of one factor stage (`rngd.factors`) and a few more:

- `shard_quantities` (stage 1): a slice's DM share of the operands and the HBM traffic parts;
- `packet_quantities` (stages 1-2 and ``inner``): loop products of the B, M and K axes, the
  fetched stream per N loop, the drained outputs and the TRF lane part;
- `lane_quantities` (stages 1 and 3): loop products of the N axes, HBM bytes and DMA time.

Single points (`check`, `cost`) compute them per point; the batch scorer computes them once
per combination of their choices and gathers. Products of loop factors are exact integers, so
regrouping them never changes a result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodels.rngd.factors import Arrays
from costmodels.rngd.hardware import ROW_CHOICES, RngdHardware
from costmodels.rngd.space import Roles, shift_possible
from workload import dtypes
from workload.problem import Problem


@dataclass(frozen=True)
class Consts:
    """Problem-level numbers of the per-point formulas."""

    d_tree: int  # Packet Reducer latency of the input type (step 2)
    w_bits: int  # bits of a weight (TRF) element
    out_bytes: float
    exact_windows: bool  # shift-reuse windows may not divide the loops: add the remainder term


def consts_of(problem: Problem, hw: RngdHardware, r: Roles, *, exact_windows: bool = True) -> Consts:
    return Consts(
        d_tree=hw.reducer_latency.get(r.in_dtype, max(hw.reducer_latency.values())),
        w_bits=dtypes.info(problem.inputs[problem.weight if problem.weight is not None else 1].dtype).bits,
        out_bytes=problem.output_bytes,
        exact_windows=exact_windows and r.conv is not None,
    )


def _prod(arrs: list[np.ndarray], n: int) -> np.ndarray:
    out = np.ones(n, dtype=np.int64)
    for a in arrs:
        out = out * a
    return out


def shard_quantities(problem: Problem, hw: RngdHardware, r: Roles, f: Arrays) -> Arrays:
    """Stage-1 terms: DM share of a slice, sharding, HBM traffic parts (steps 1, 4)."""
    ax = r.axes
    n = len(f["clusters"])
    share = np.zeros(n)
    for op in problem.operands:
        elems = np.ones(n)
        for d in op.dims:
            elems = elems * (sum(t.coeff * (f[f"e2:{t.axis}"] - 1) for t in d.terms) + 1)
        share = share + elems * dtypes.info(op.dtype).bits / 8
    shard = {role: _prod([f[f"cl:{a}"] * f[f"sl:{a}"] for a in ax[role]], n) for role in ("b", "m", "n", "k")}
    mv = 1 - (problem.weight if problem.weight is not None else 1)
    in_b = problem.input_bytes
    return {
        "share": share,
        # A slice keeps its operand share in DM when it fits; otherwise [ASSUMPTION] DMA streams it from
        # HBM through a double-buffered staging area, re-reading the moving input once per N chunk.
        "resident": share <= hw.dm_bytes_per_slice,
        "off_n": in_b[mv] * shard["n"],
        "off_m": in_b[1 - mv] * shard["m"],
        "ksplit": shard["k"],
        "slices_used": (f["clusters"] * f["slices"]).astype(float),
        # (a grid code naming 0 slices, such as ``a * GRID_BASE`` for ``a x 0``, is no split either)
        "bad:shards": (f["clusters"] > hw.clusters) | (f["slices"] > hw.slices_per_cluster) | (f["slices"] < 1),
    }


def packet_quantities(
    hw: RngdHardware, k: Consts, r: Roles, f: Arrays, role_p: np.ndarray, shift: np.ndarray, inner_n: np.ndarray
) -> Arrays:
    """Stage-1/2 terms: B, M, K loop products, stream per N loop, drain and TRF lane parts (steps 2, 3, 7).

    A point runs ``loops = la * tn * hn`` packets per row (``tn``, ``hn``: N loop products of
    `lane_quantities`). It fetches ``sflb * tn`` bytes when the packet is broadcast over the N
    groups in time, else (``nbc``) ``sflb * tn * hn``; shift-reuse fetches one window per shift
    group, ``floor(loops / sdiv)`` windows of ``fl`` flits (``rem`` is ``la mod sdiv``).
    """
    ax = r.axes
    n = len(f["pk"])
    hb = _prod([f[f"h:{a}"] for a in ax["b"]], n)
    hk = _prod([f[f"h:{a}"] for a in ax["k"]], n)
    lg = hb * _prod([f[f"h:{a}"] for a in ax["m"]], n)
    la = lg * hk
    kpart = _prod([f[f"h:{a}"] * f[f"pkt:{a}"] * f[f"z:{a}"] for a in ax["k"]], n)
    kv = kpart * np.where((role_p == "b") & ~shift, f["pf"], 1)
    full = hw.packet_bytes // hw.flit_bytes
    fl = np.minimum(f["feed"], full)
    og = f["pf"]
    sdiv = np.ones(n, dtype=np.int64)
    bc = inner_n | (hk == 1)  # a packet broadcast over the N groups in time is fetched once
    if "geo:shifts" in f and r.conv is not None:  # shift-reuse windows (step 7)
        span = f["pkt:ow"] * r.conv.stride[1] + f["geo:extra"]
        win_flits = -(-(span * dtypes.info(r.in_dtype).bits) // (8 * hw.flit_bytes))
        fl = np.where(shift, win_flits, fl)
        sdiv = np.where(shift, f["geo:shifts"], 1)
        og = np.where(shift, f["geo:slots"], og)
        bc = bc & ~shift
    q: Arrays = {
        "la": la,
        "lgog": lg * og,
        "og": og,
        "kvw": kv * k.w_bits,  # TRF bits of one row per N group
        "hb": hb,
        "nbc": (~bc).astype(np.int64),  # 1: the packet is fetched again for every N group
        "hld": (inner_n & (hk > 1) & ~shift).astype(np.int64),  # 1: the N groups are held in the accumulator
        "sflb": (la // sdiv) * fl * hw.flit_bytes,
        "rem": la % sdiv,
        "sdiv": sdiv,
        "flb": fl * hw.flit_bytes,
        "shift": shift,
        "pelw": f["p_el"] * k.w_bits,  # TRF bits a row reads per packet (energy: bytes at the TRF level)
    }
    q["bad:packet"] = ~shift & ((f["pk"] > f["p_el"]) | (f["p_el"] % f["pk"] != 0))
    q["bad:feed-flits"] = (f["feed"] < 1) | (f["feed"] > hw.max_feed_flits) | (~shift & (f["feed"] > full))
    lo_hi = hw.shift_range.get(r.in_dtype, (0, 0))
    if "geo:w_v" in f:
        q["bad:shift-window"] = shift & (f["geo:w_v"] < 1)
        q["bad:shift-range"] = shift & ((f["geo:shifts"] - 1) * f["geo:shift_stride"] > lo_hi[1])
    else:
        q["bad:shift-window"] = np.zeros_like(shift)
        q["bad:shift-range"] = np.zeros_like(shift)
    q["bad:shift-unsupported"] = shift & (not shift_possible(r.conv))
    return q


def lane_quantities(hw: RngdHardware, k: Consts, r: Roles, f: Arrays, qs: Arrays) -> Arrays:
    """Stage-1/3 terms: N loop products (H and TRF chunks), rows, HBM bytes and DMA time (steps 2, 4)."""
    n = len(f["rows"])
    hn = _prod([f[f"h:{a}"] for a in r.axes["n"]], n)
    tn = _prod([f[f"t:{a}"] for a in r.axes["n"]], n)
    rows = f["rows"]
    offchip = qs["off_n"] * np.where(qs["resident"], 1, tn) + qs["off_m"] + k.out_bytes
    return {
        "hn": hn,
        "tn": tn,
        "tnhn": tn * hn,
        "rhn": rows * hn,
        "rtnhn": rows * tn * hn,
        "rows": rows,
        "offchip": offchip,
        "dma": hw.dma_startup_cycles + offchip / hw.dma_bytes_per_cycle,
        # footprint = fmax(share_r, working + wpen): the share when it stays in DM, else the working set
        "share_r": np.where(qs["resident"], qs["share"], -np.inf),
        "wpen": np.where(qs["resident"], -np.inf, 0.0),
        # K split over slices adds kval + kflag * C_out (step 5)
        "kval": np.where(qs["ksplit"] > 1, qs["ksplit"], 0),
        "kflag": (qs["ksplit"] > 1).astype(np.int64),
        "slices": qs["slices_used"],  # energy: per-slice bytes times the slices that move them
        "bad:rows": ~np.isin(rows, ROW_CHOICES) | (rows > hw.rows),
        "bad:trf-split": np.asarray(f["trf_padding_only"], dtype=bool),
    }
