"""RNGD cost and constraint formulas over numpy columns (one code path for batch and single points).

The recipe is hardware-facts.md §1.2; each term cites its step. Per slice (all slices run the
same loop nest, so the slowest is any of them):

- compute ``C_mac`` = packets per row: the product of the H/time loop factors (step 2);
- stream ``C_stream`` = fetched flits at ``fetch_bytes_per_cycle`` (32 B/cycle, step 2); a
  packet reused by a time broadcast (N/rows groups innermost) or by shift-reuse is fetched once;
- drain ``C_out`` = accumulated outputs / 8 per cycle (Lane Folder, §1.1) [ASSUMPTION: the drain
  overlaps compute except for the last accumulation group, step 2];
- ``C_CE = max(C_mac, C_stream, C_out) + D_tree + last drain``, ``D_tree`` = 5/6/7 (step 2);
- TRF fill ``C_trf`` = weight bytes loaded / 8 B per cycle [ASSUMPTION, step 3];
- DMA ``C_dma`` = 500 + HBM bytes / min(256 x engines, 1500) (step 4) [ASSUMPTION: the three
  operand commands start together, so one startup is exposed];
- reduction tail when K is split over slices: r + outputs / 8 (step 5) [ASSUMPTION: the
  Vector Engine inter-slice reducer streams each slice's partial outputs at 8 per cycle];
- total (step 6): double-buffered TRF overlaps fill, stream and DMA except the first TRF load;
  otherwise the stages add up.
"""

from __future__ import annotations

import math

import numpy as np

from costmodels.rngd_hardware import ROW_CHOICES, RngdHardware
from costmodels.rngd_space import Cols, factors, roles_of, shift_possible
from workload import dtypes
from workload.problem import Problem

#: [ASSUMPTION] DM staging area of a slice streaming its operands from HBM (two 32 KiB buffers)
DM_STAGING_BYTES = 65536

#: constraint code -> short description (every one has a test that trips it)
CONSTRAINTS: dict[str, str] = {
    "alignment": "Stream Adapter and TRF Sequencer computation mappings must match",
    "packet": "packet K part must fit the packet",
    "rows": "rows used must be 1, 2, 4 or 8 and exist on the part",
    "shards": "clusters and slices used must exist on the part",
    "feed-flits": "feed_flits must fit the flit buffer (<= 3 flits; 3 only for shift-reuse)",
    "trf-capacity": "the weight tile must fit the TRF (half of it when double-buffered)",
    "accumulator": "accumulated outputs must fit the Time Reducer (128 cells per row)",
    "dm-capacity": "a slice's operand share, or its streaming working set, must fit its DM (512 KiB)",
    "shift-window": "the shift window must fit the shift buffer",
    "shift-range": "shifts must stay within the shift-buffer range",
    "shift-unsupported": "shift-reuse needs a conv whose width stride and dilation it can express",
}


def _prod(arrs: list[np.ndarray], n: int) -> np.ndarray:
    out = np.ones(n, dtype=np.int64)
    for a in arrs:
        out = out * a
    return out


def evaluate(problem: Problem, hw: RngdHardware, cols: Cols) -> dict[str, np.ndarray]:
    """Every stage term, constraint mask and objective of each point (arrays of one length)."""
    r = roles_of(problem)
    f = factors(problem, hw, cols)
    n = len(f["rows"])
    ax = r.axes
    shift = f["shift"].astype(bool)
    inner_n = np.asarray(cols["inner"]).reshape(n) == "n"
    role_p = np.asarray(cols["packet_free"]).reshape(n)
    dbuf = np.asarray(cols["double_buffer"], dtype=bool).reshape(n)
    rows = f["rows"]
    loops = _prod([f[f"t:{a}"] * f[f"h:{a}"] for a in problem.axes], n)
    hk = _prod([f[f"h:{a}"] for a in ax["k"]], n)
    nn = _prod([f[f"h:{a}"] for a in ax["n"]], n)
    in_bits = dtypes.info(r.in_dtype).bits
    w_bits = dtypes.info(problem.inputs[problem.weight if problem.weight is not None else 1].dtype).bits
    # ---- stream (hardware-facts.md §1.2 step 2; conv: step 7) ----
    bcast = np.where(inner_n | (hk == 1), nn, 1)
    flits_pkt = np.minimum(f["feed"], hw.packet_bytes // hw.flit_bytes)
    stream_flits = (loops // bcast) * flits_pkt
    out_group = f["pf"].copy()
    if "geo:shifts" in f:
        shifts, w_pkt = f["geo:shifts"], f["pkt:ow"]
        span = w_pkt * r.conv.stride[1] + f["geo:extra"] if r.conv else w_pkt
        win_flits = -(-(span * in_bits) // (8 * hw.flit_bytes))
        windows = loops // shifts
        stream_flits = np.where(shift, windows * win_flits, stream_flits)
        out_group = np.where(shift, f["geo:slots"], out_group)
    c_mac = loops.astype(float)
    c_stream = stream_flits * hw.flit_bytes / hw.fetch_bytes_per_cycle
    groups = loops // hk
    held = np.where(inner_n & (hk > 1) & ~shift, nn, 1)
    drained = rows * groups * out_group
    c_out = drained / hw.drain_elements_per_cycle
    last = rows * out_group * held / hw.drain_elements_per_cycle
    d_tree = hw.reducer_latency.get(r.in_dtype, max(hw.reducer_latency.values()))
    c_ce = np.maximum(np.maximum(c_mac, c_stream), c_out) + d_tree + last
    # ---- TRF (step 1 capacity, step 3 fill) ----
    kpart = _prod([f[f"h:{a}"] * f[f"pkt:{a}"] * f[f"z:{a}"] for a in ax["k"]], n)
    vec_b = np.where((role_p == "b") & ~shift, f["pf"], 1)
    lane_elems = nn * kpart * vec_b
    trf_tile = rows * lane_elems * w_bits / 8
    trf_cap = np.where(dbuf, hw.trf_half_bytes_per_slice, hw.trf_bytes_per_slice)
    tiles = _prod([f[f"h:{a}"] for a in ax["b"]] + [f[f"t:{a}"] for a in ax["n"]], n)
    fill_one = trf_tile / hw.trf_fill_bytes_per_cycle
    c_trf = tiles * fill_one
    # ---- DM share and HBM traffic (steps 1, 4) ----
    share = np.zeros(n)
    for op in problem.operands:
        elems = np.ones(n)
        for d in op.dims:
            elems = elems * (sum(t.coeff * (f[f"e2:{t.axis}"] - 1) for t in d.terms) + 1)
        share = share + elems * dtypes.info(op.dtype).bits / 8
    shard = {role: _prod([f[f"cl:{a}"] * f[f"sl:{a}"] for a in ax[role]], n) for role in ("b", "m", "n", "k")}
    mv = 1 - (problem.weight if problem.weight is not None else 1)
    in_b = problem.input_bytes
    # A slice keeps its operand share in DM when it fits; otherwise [ASSUMPTION] DMA streams it from
    # HBM through a double-buffered staging area, re-reading the moving input once per N chunk.
    resident = share <= hw.dm_bytes_per_slice
    n_chunks = _prod([f[f"t:{a}"] for a in ax["n"]], n)
    refetch = np.where(resident, 1, n_chunks)
    offchip = in_b[mv] * shard["n"] * refetch + in_b[1 - mv] * shard["m"] + problem.output_bytes
    working = 2 * trf_tile + DM_STAGING_BYTES
    footprint = np.where(resident, share, working)
    c_dma = hw.dma_startup_cycles + offchip / hw.dma_bytes_per_cycle
    # ---- K split over slices: inter-slice reduction tail (step 5) ----
    ksplit = shard["k"]
    tail = np.where(ksplit > 1, ksplit + c_out, 0.0)
    # ---- total (step 6) ----
    overlapped = fill_one + np.maximum(np.maximum(c_ce, c_trf - fill_one), c_dma)
    total = np.where(dbuf, overlapped, c_ce + c_trf + c_dma) + tail
    res: dict[str, np.ndarray] = {
        "cycles": total,
        "compute": c_mac,
        "stream": c_stream,
        "vector": c_out,
        "fill": c_trf,
        "dma": c_dma,
        "reduction": tail,
        "ce": c_ce,
        "tree": np.full(n, float(d_tree)),
        "drain_last": last,
        "trf_tile": trf_tile,
        "trf_cap": trf_cap.astype(float),
        "tiles": tiles,
        "cells": out_group * held,
        "share": share,
        "footprint": footprint.astype(float),
        "working": working.astype(float),
        "offchip": offchip.astype(float),
        "dm_bytes": (stream_flits * hw.flit_bytes + c_trf * hw.trf_fill_bytes_per_cycle).astype(float),
        "trf_bytes": (c_mac * rows * f["p_el"] * w_bits / 8).astype(float),
        "slices_used": (f["clusters"] * f["slices"]).astype(float),
    }
    res.update(_violations(problem, hw, cols, f, res, shift))
    return {**f, **res}


def _violations(
    problem: Problem,
    hw: RngdHardware,
    cols: Cols,
    f: dict[str, np.ndarray],
    res: dict[str, np.ndarray],
    shift: np.ndarray,
) -> dict[str, np.ndarray]:
    """Boolean mask per constraint code (True = violated)."""
    r = roles_of(problem)
    full = hw.packet_bytes // hw.flit_bytes
    v: dict[str, np.ndarray] = {}
    v["bad:packet"] = ~shift & ((f["pk"] > f["p_el"]) | (f["p_el"] % f["pk"] != 0))
    v["bad:rows"] = ~np.isin(f["rows"], ROW_CHOICES) | (f["rows"] > hw.rows)
    v["bad:shards"] = (f["clusters"] > hw.clusters) | (f["slices"] > hw.slices_per_cluster)
    v["bad:feed-flits"] = (f["feed"] < 1) | (f["feed"] > hw.max_feed_flits) | (~shift & (f["feed"] > full))
    v["bad:trf-capacity"] = res["trf_tile"] > res["trf_cap"]
    v["bad:accumulator"] = res["cells"] > hw.accumulator_cells_per_row
    v["bad:dm-capacity"] = res["footprint"] > hw.dm_bytes_per_slice
    lo_hi = hw.shift_range.get(r.in_dtype, (0, 0))
    if "geo:w_v" in f:
        v["bad:shift-window"] = shift & (f["geo:w_v"] < 1)
        v["bad:shift-range"] = shift & ((f["geo:shifts"] - 1) * f["geo:shift_stride"] > lo_hi[1])
    else:
        v["bad:shift-window"] = np.zeros_like(shift)
        v["bad:shift-range"] = np.zeros_like(shift)
    v["bad:shift-unsupported"] = shift & (not shift_possible(r.conv))
    any_bad = np.zeros_like(shift)
    for m in v.values():
        any_bad = any_bad | m
    v["feasible"] = ~any_bad
    return v


def lower_bound_cycles(problem: Problem, hw: RngdHardware) -> tuple[float, float]:
    """Roofline: (compute cycles at chip peak, HBM cycles for min_bytes) (hardware-facts.md §1.2)."""
    r = roles_of(problem)
    compute = problem.macs / hw.peak_macs_per_cycle(r.in_dtype)
    memory = problem.min_bytes / hw.hbm_bytes_per_cycle
    return float(compute), float(memory)


def utilization(problem: Problem, hw: RngdHardware, cycles: np.ndarray) -> np.ndarray:
    """Useful MACs over chip peak MACs in the time taken."""
    peak = hw.peak_macs_per_cycle(roles_of(problem).in_dtype)
    return np.minimum(1.0, problem.macs / (peak * np.maximum(cycles, 1e-30)))


def bound_of(res: dict[str, np.ndarray], i: int = 0) -> str:
    """The stage with the largest term (the one the time is bound by)."""
    terms = {k: float(res[k][i]) for k in ("compute", "stream", "vector", "fill", "dma", "reduction")}
    return max(terms, key=lambda k: terms[k])


def kib(x: float) -> str:
    """Bytes as KiB with at most one decimal."""
    v = x / 1024
    return f"{v:.0f}" if math.isclose(v, round(v)) else f"{v:.1f}"
