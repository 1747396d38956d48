"""Tenstorrent energy and breakdowns: bytes per level and operand, and the latency as a stall stack.

The energy model is `costmodels.energy` (the preset's ``energy:`` table) over the levels of the cost
report: DRAM, the NoC (weights and activations sent to the cores), L1 (the im2col reader's gather
from the halo buffer) and the halo op's remote sticks. The breakdowns read the terms
`tenstorrent.cost.evaluate` computes (its ``a`` dict).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from costmodels.gemm_view import gemm_view
from workload.problem import Problem


def level_bytes(a: dict[str, Any]) -> dict[str, Any]:
    """Bytes at each energy level, from `evaluate`'s terms (one point or a grid)."""
    return {
        "dram": a["dram_bytes"],
        "noc": a["noc_w_bytes"] + a["noc_act_bytes"],
        "l1": a["l1_bytes"],
        "halo": a["halo_bytes"],
    }


def _first(x: Any) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def operand_bytes(problem: Problem, a: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bytes per level and operand of the first point: DRAM (activations in, weights, output out), NoC
    (weights, activations), L1 and halo (activations only)."""
    view = gemm_view(problem)
    x, w, y = problem.inputs[view.moving].name, problem.inputs[view.stationary].name, problem.output.name
    dram, act, out = _first(a["dram_bytes"]), _first(a["dram_act_bytes"]), _first(a["dram_out_bytes"])
    noc_w, noc_act = _first(a["noc_w_bytes"]), _first(a["noc_act_bytes"])
    return {
        "dram": {x: act, w: dram - act - out, y: out},
        "noc": {x: noc_act, w: noc_w, y: 0.0},
        "l1": {x: _first(a["l1_bytes"]), w: 0.0, y: 0.0},
        "halo": {x: _first(a["halo_bytes"]), w: 0.0, y: 0.0},
    }


def stall_stack(a: dict[str, Any]) -> dict[str, float]:
    """The cycles of the first point (hardware-facts.md §4.2 step 6, as `evaluate` composes them) as
    stages that add up to them.

    ``compute``: the FPU and sub-block overheads; ``l1`` and ``noc``: what the im2col reader and the
    activations' NoC transfer add beyond compute (in proportion to their times when double-buffered),
    plus the weights' NoC transfer beyond that; ``drain``: the DRAM writer of the outputs beyond
    it; ``dram``: DRAM bandwidth beyond the kernel, plus the DRAM path's im2col transform before it;
    ``halo``: the halo op before the kernel.
    """
    v = {k: _first(a[k]) for k in ("t_comp", "t_reader", "t_act", "t_w", "t_out", "t_dram", "t_halo", "t_im2col")}
    adb, wdb = bool(_first(a["adb"])), bool(_first(a["wdb"]))
    act_path = v["t_reader"] + v["t_act"]
    main1 = max(v["t_comp"], act_path) if adb else v["t_comp"] + act_path
    exposed = main1 - v["t_comp"]
    l1 = exposed * v["t_reader"] / act_path if act_path > 0 else 0.0
    main2 = max(main1, v["t_w"]) if wdb else main1 + v["t_w"]
    main3 = max(main2, v["t_out"])
    kernel = max(main3, v["t_dram"])
    return {
        "compute": v["t_comp"],
        "l1": l1,
        "noc": (exposed - l1) + (main2 - main1),
        "drain": main3 - main2,
        "dram": kernel - main3 + v["t_im2col"],  # the DRAM path's im2col transform runs before the kernel
        "halo": v["t_halo"],
    }
