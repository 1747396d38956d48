"""Ascend energy and breakdowns: bytes per level and operand, and the latency as a stall stack.

The energy model is `costmodels.energy` (the preset's ``energy:`` table) over the levels the cost
reports count: for TMATMUL (cube) HBM, GM reads through L2 (``gm``) and the L1 writes they feed
(``l1``), the L0A/L0B tiles loaded per TMATMUL and the L0C accumulators drained per block; for
the row reductions (vector) HBM and the UB traffic. `cube_level_bytes` is written once for the
per-point formulas (`cost.cube_scores`), the whole-space grid (`cube_grid.tabulate_cube`) and the
report, so the three give the same bits.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from costmodels.gemm_view import gemm_view
from workload.problem import Problem

#: the levels of a TMATMUL cost report and of a row reduction's, in the reports' order
CUBE_LEVELS: tuple[str, ...] = ("hbm", "gm", "l1", "l0a", "l0b", "l0c")
VECTOR_LEVELS: tuple[str, ...] = ("hbm", "ub")


def cube_level_bytes(f: Any, tiles: Any, blocks: Any, gm_core: Any, cores_used: Any, offchip: Any) -> dict[str, Any]:
    """Bytes of all cores at each cube level: GM and L1 ``cores x gm_core``; L0A/L0B ``cores x tiles x
    tile bytes``; L0C ``cores x blocks x accumulator bytes``; HBM the off-chip bytes (hardware-facts.md §3.2)."""
    gm = cores_used * gm_core
    ct = cores_used * tiles
    return {
        "hbm": offchip,
        "gm": gm,
        "l1": gm,
        "l0a": ct * f["l0a"],
        "l0b": ct * f["l0b"],
        "l0c": cores_used * blocks * (f["acc_m"] * f["acc_n"]),
    }


def cube_operand_bytes(problem: Problem, f: Any, pick: dict[str, float], levels: dict[str, float]) -> dict[str, Any]:
    """Bytes per cube level and operand of the first point of the fields `f` (hardware-facts.md §3.2).

    The left (moving) input's GM chunks are ``a_loads x ach`` per core, the right's ``steps x bch``
    when A stays resident, ``steps x ach`` and ``b_loads x bch`` when B does (`cost._pipes` takes the
    order with fewer GM bytes); L1 receives what GM sends; L0A holds the left tiles, L0B the right, L0C the
    output. HBM: the same chunks and the output when the traffic exceeds the minimum, else each
    operand once (inputs kept in L2, or the minimum bound).
    """
    view = gemm_view(problem)
    left, right = problem.inputs[view.moving], problem.inputs[view.stationary]
    a, b, y = left.name, right.name, problem.output.name
    x = {k: float(np.asarray(f[k]).reshape(-1)[0]) for k in ("nk", "kmulti", "blocks_m", "bnb", "ach", "bch")}
    cores, blocks = pick["cores_used"], pick["blocks"]
    steps = blocks * x["nk"]
    refetch = steps * x["kmulti"]
    a_kept = max(refetch, x["blocks_m"]) * x["ach"]  # A resident across N blocks: its chunks, B's every step
    b_kept = steps * x["ach"]  # B resident across M blocks: A's chunks every step
    a_resident = a_kept + steps * x["bch"] <= b_kept + max(refetch, x["bnb"]) * x["bch"]  # `cost._pipes`' choice
    a_gm = cores * (a_kept if a_resident else b_kept)
    gm = levels["gm"]
    hbm = levels["hbm"]
    traffic = cores * (pick["gm_core"] + pick["out_bytes"])
    if not math.isclose(hbm, traffic, rel_tol=1e-12):  # the inputs stay in L2, or the minimum bound: every operand once
        a_hbm, b_hbm = float(problem.operand_bytes(left)), float(problem.operand_bytes(right))
    else:
        a_hbm, b_hbm = a_gm, gm - a_gm
    return {
        "hbm": {a: a_hbm, b: b_hbm, y: hbm - a_hbm - b_hbm},
        "gm": {a: a_gm, b: gm - a_gm, y: 0.0},
        "l1": {a: a_gm, b: levels["l1"] - a_gm, y: 0.0},
        "l0a": {a: levels["l0a"], b: 0.0, y: 0.0},
        "l0b": {a: 0.0, b: levels["l0b"], y: 0.0},
        "l0c": {a: 0.0, b: 0.0, y: levels["l0c"]},
    }


def vector_operand_bytes(problem: Problem, t: dict[str, float]) -> dict[str, dict[str, float]]:
    """Bytes per vector level and operand (`vector.vector_terms`): UB reads the input's tiles in and
    writes the results out; HBM moves the same bytes when they exceed the minimum, else each operand once."""
    x, y = problem.inputs[0].name, problem.output.name
    hbm, ub_in, ub_out = t["offchip"], t["ub_in"], t["ub_out"]
    traffic = math.isclose(hbm, ub_in + ub_out, rel_tol=1e-12)
    x_hbm = ub_in if traffic else min(hbm, float(problem.operand_bytes(problem.inputs[0])))
    return {"hbm": {x: x_hbm, y: hbm - x_hbm}, "ub": {x: ub_in, y: ub_out}}


def cube_stall_stack(pick: dict[str, float], steps: float, double_buffer: bool) -> dict[str, float]:
    """The cycles of a TMATMUL point (hardware-facts.md §3.2 steps 5-6) as stages that add up to them.

    ``compute``: the cube's TMATMULs; ``l1``: MTE1 (L1 -> L0) beyond it; ``gm``: MTE2 (GM -> L1)
    beyond both (serial: each pipe in full); ``fill``: the pipeline's fill (double-buffered: one step
    of the other pipes); ``drain``: the FIX drain of L0C beyond the pipe; ``hbm``: the aggregate HBM
    time beyond the busiest core.
    """
    cube, mte1, mte2, core, cycles = (pick[k] for k in ("cube", "mte1", "mte2", "core", "cycles"))
    if double_buffer:
        top = max(mte2, mte1, cube)
        pipe = top + (mte2 + mte1 + cube - top) / steps
        stack = {"compute": cube, "l1": max(mte1, cube) - cube, "gm": top - max(mte1, cube), "fill": pipe - top}
        stack["drain"] = core - pipe
    else:
        stack = {"compute": cube, "l1": mte1, "gm": mte2, "fill": 0.0, "drain": core - (cube + mte1 + mte2)}
    stack["hbm"] = cycles - core
    return stack


def vector_stall_stack(pick: dict[str, float], double_buffer: bool) -> dict[str, float]:
    """A row reduction's cycles (`vector.vector_terms`) as stages that add up to them: ``compute`` the
    vector pipe, ``ub`` the MTE2/MTE3 transfers beyond it, ``fill`` the pipeline's fill, ``hbm`` the
    aggregate HBM time beyond the busiest core."""
    vec, mte2, mte3, core, cycles = (pick[k] for k in ("vector", "mte2", "mte3", "core", "cycles"))
    if double_buffer:
        top = max(mte2, vec, mte3)
        stack = {"compute": vec, "ub": top - vec, "fill": core - top}
    else:
        stack = {"compute": vec, "ub": mte2 + mte3, "fill": core - (mte2 + vec + mte3)}
    stack["hbm"] = cycles - core
    return stack
