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

from costmodels.rngd.factors import Arrays, factors
from costmodels.rngd.hardware import RngdHardware
from costmodels.rngd.space import Cols, roles_of
from costmodels.rngd.terms import Consts, consts_of, lane_quantities, packet_quantities, shard_quantities
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
    "trf-split": "a trf_split that only adds padding is pruned: a smaller split gives no more TRF loads, none larger",
    "accumulator": "accumulated outputs must fit the Time Reducer (128 cells per row)",
    "dm-capacity": "a slice's operand share, or its streaming working set, must fit its DM (512 KiB)",
    "shift-window": "the shift window must fit the shift buffer",
    "shift-range": "shifts must stay within the shift-buffer range",
    "shift-unsupported": "shift-reuse needs a conv whose width stride and dilation it can express",
}


def combine(hw: RngdHardware, k: Consts, qa: Arrays, qn: Arrays, dbuf: np.ndarray) -> Arrays:
    """Per-point cost terms and point-level constraint masks (hardware-facts.md §1.2 steps 2-6).

    ``qa``: `packet_quantities` of each point, ``qn``: its `lane_quantities`, ``dbuf``: TRF
    double buffering (bool or 0/1). The integer terms may come as int64 or as float64 (the batch
    scorer's tables, whose products it checks stay below 2**53): every product of loop factors
    is then exact, so both give the same bits. Selections are written without branches:
    ``max(x * flag, 1)`` (x >= 1, flag 0/1) and ``fmax(a + pen_a, b + pen_b)`` (pens 0 / -inf).
    """
    # ---- compute, stream, drain (step 2; conv windows: step 7) ----
    loops = qa["la"] * qn["tnhn"]
    stream_bytes = qa["sflb"] * (qn["tn"] * np.maximum(qn["hn"] * qa["nbc"], 1))
    if k.exact_windows:  # floor(loops / sdiv) windows = (la // sdiv) * tnhn + floor((la % sdiv) * tnhn / sdiv)
        stream_bytes = stream_bytes + (qa["rem"] * qn["tnhn"]) // qa["sdiv"] * qa["flb"]
    c_mac = np.asarray(loops, dtype=float)
    c_stream = stream_bytes / hw.fetch_bytes_per_cycle
    c_out = (qa["lgog"] * qn["rtnhn"]) / hw.drain_elements_per_cycle
    cells = qa["og"] * np.maximum(qn["hn"] * qa["hld"], 1)
    last = cells * qn["rows"] / hw.drain_elements_per_cycle
    c_ce = np.maximum(np.maximum(c_mac, c_stream), c_out) + k.d_tree + last
    # ---- TRF (step 1 capacity, step 3 fill) ----
    trf_tile = qn["rhn"] * qa["kvw"] / 8
    trf_cap = hw.trf_bytes_per_slice - dbuf * (hw.trf_bytes_per_slice - hw.trf_half_bytes_per_slice)
    fill_one = trf_tile / hw.trf_fill_bytes_per_cycle
    c_trf = (qa["hb"] * qn["tn"]) * fill_one
    # ---- DM footprint (step 1) ----
    working = 2 * trf_tile + DM_STAGING_BYTES
    footprint = np.fmax(qn["share_r"], working + qn["wpen"])
    # ---- K split over slices: inter-slice reduction tail (step 5) ----
    tail = qn["kval"] + qn["kflag"] * c_out
    # ---- total (step 6) ----
    c_dma = qn["dma"]
    # ---- bytes per level of the whole chip (energy; the cost report's bytes) ----
    dm_chip = (stream_bytes + c_trf * hw.trf_fill_bytes_per_cycle) * qn["slices"]
    trf_chip = (c_mac * qn["rows"] * qa["pelw"] / 8) * qn["slices"]
    overlapped = fill_one + np.maximum(np.maximum(c_ce, c_trf - fill_one), c_dma)
    total = np.where(dbuf, overlapped, c_ce + c_trf + c_dma) + tail
    return {
        "cycles": total,
        "compute": c_mac,
        "stream": c_stream,
        "vector": c_out,
        "fill": c_trf,
        "dma": c_dma,
        "reduction": tail,
        "ce": c_ce,
        "drain_last": last,
        "trf_tile": trf_tile,
        "trf_cap": trf_cap,
        "cells": cells,
        "footprint": footprint,
        "working": working,
        "offchip": qn["offchip"],
        "stream_bytes": stream_bytes,
        "dm_chip": dm_chip,
        "trf_chip": trf_chip,
    }


def point_violations(hw: RngdHardware, res: Arrays) -> Arrays:
    """Masks of the constraints that depend on the whole point (True = violated)."""
    return {
        "bad:trf-capacity": res["trf_tile"] > res["trf_cap"],
        "bad:accumulator": res["cells"] > hw.accumulator_cells_per_row,
        "bad:dm-capacity": res["footprint"] > hw.dm_bytes_per_slice,
    }


#: constraints fixed by the choices of one stage, and those of the whole point
STATIC_CODES = (
    "packet", "rows", "shards", "feed-flits", "trf-split", "shift-window", "shift-range", "shift-unsupported",
)  # fmt: skip
POINT_CODES = ("trf-capacity", "accumulator", "dm-capacity")


def evaluate(problem: Problem, hw: RngdHardware, cols: Cols) -> dict[str, np.ndarray]:
    """Every stage term, constraint mask and objective of each point (arrays of one length)."""
    r = roles_of(problem)
    k = consts_of(problem, hw, r)
    f = factors(problem, hw, cols)
    n = len(f["rows"])
    shift = f["shift"].astype(bool)
    inner_n = np.asarray(cols["inner"]).reshape(n) == "n"
    qs = shard_quantities(problem, hw, r, f)
    qa = packet_quantities(hw, k, r, f, np.asarray(cols["packet_free"]).reshape(n), shift, inner_n)
    qn = lane_quantities(hw, k, r, f, qs)
    res = combine(hw, k, qa, qn, np.asarray(cols["double_buffer"], dtype=bool).reshape(n))
    res.update(point_violations(hw, res))
    res["tree"] = np.full(n, float(k.d_tree))
    res["trf_cap"] = res["trf_cap"].astype(float)
    res["tiles"] = qa["hb"] * qn["tn"]
    res["share"] = qs["share"]
    res["slices_used"] = qs["slices_used"]
    res["dm_bytes"] = (res["stream_bytes"] + res["fill"] * hw.trf_fill_bytes_per_cycle).astype(float)
    res["trf_bytes"] = (res["compute"] * f["rows"] * f["p_el"] * k.w_bits / 8).astype(float)
    static = {c: q[f"bad:{c}"] for q in (qs, qa, qn) for c in STATIC_CODES if f"bad:{c}" in q}
    any_bad = np.zeros(n, dtype=bool)
    for c in (*STATIC_CODES, *POINT_CODES):
        res[f"bad:{c}"] = static[c] if c in static else res[f"bad:{c}"]
        any_bad = any_bad | res[f"bad:{c}"]
    res["feasible"] = ~any_bad
    return {**f, **res}


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
