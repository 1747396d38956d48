"""RNGD energy and breakdowns: bytes per level and operand, and the latency as a stall stack.

The energy model itself is `costmodels.energy` (the preset's ``energy:`` table). Here are what the
RNGD formulas (`rngd.cost.combine`) give it: the chip's bytes at each level (HBM: the DMA traffic;
DM: the packets the Stream Adapter fetches plus the weight bytes loaded into the TRF; TRF: the
weight bits the rows read per packet), the split of those bytes over the operands, and the
stall stack of hardware-facts.md §1.2 step 6's total.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from costmodels.rngd.factors import Arrays, factors
from costmodels.rngd.hardware import RngdHardware
from costmodels.rngd.space import Cols, roles_of
from costmodels.rngd.terms import shard_quantities
from workload.problem import Problem


def level_bytes(res: Arrays) -> dict[str, Any]:
    """Bytes of the whole chip at each energy level, from `combine`'s terms (one point or many)."""
    return {"hbm": res["offchip"], "dm": res["dm_chip"], "trf": res["trf_chip"]}


def operand_bytes(problem: Problem, hw: RngdHardware, cols: Cols, res: Arrays) -> dict[str, dict[str, float]]:
    """Bytes per level and operand of the first point of `res` (the terms the formulas add up).

    HBM: the moving input (re-read per N chunk when it does not stay in DM, and per N shard), the
    weight (per M shard) and the output (hardware-facts.md §1.2 step 4); DM: the moving input's
    fetched packets and the weight's TRF loads, the output written to DM is not counted by the
    model; TRF: the weight.
    """
    w = problem.weight if problem.weight is not None else 1
    mv = 1 - w
    names = (problem.inputs[mv].name, problem.inputs[w].name, problem.output.name)
    qs = shard_quantities(problem, hw, roles_of(problem), factors(problem, hw, cols))
    hbm = float(res["offchip"][0])
    weight_hbm = float(qs["off_m"][0])
    moving = hbm - weight_hbm - float(problem.output_bytes)
    dm = float(res["dm_chip"][0])
    streamed = float(res["stream_bytes"][0] * res["slices_used"][0])
    return {
        "hbm": {names[0]: moving, names[1]: weight_hbm, names[2]: hbm - moving - weight_hbm},
        "dm": {names[0]: streamed, names[1]: dm - streamed, names[2]: 0.0},
        "trf": {names[0]: 0.0, names[1]: float(res["trf_chip"][0]), names[2]: 0.0},
    }


def stall_stack(hw: RngdHardware, res: Arrays, double_buffer: bool) -> dict[str, float]:
    """hardware-facts.md §1.2 step 6's total of the first point, as stages that add up to it.

    ``compute``: packets per row; ``dm``: what streaming from DM adds above compute; ``drain``: what
    the output drain adds above both, plus the last group's drain; ``fill``: the first TRF load;
    ``trf``: the further TRF loads (double-buffered: what they add beyond the engine's time);
    ``hbm``: DMA beyond both; ``reduction``: the Packet Reducer tree and the inter-slice tail.
    """
    keys = ("compute", "stream", "vector", "fill", "dma", "reduction", "tree", "drain_last", "trf_tile")
    v = {k: float(np.asarray(res[k]).reshape(-1)[0]) for k in keys}
    fill_one = v["trf_tile"] / hw.trf_fill_bytes_per_cycle
    m1 = max(v["compute"], v["stream"])
    m2 = max(m1, v["vector"])
    ce = m2 + v["tree"] + v["drain_last"]
    stack = {"compute": v["compute"], "dm": m1 - v["compute"], "drain": m2 - m1 + v["drain_last"]}
    if double_buffer:
        a = max(ce, v["fill"] - fill_one)
        b = max(a, v["dma"])
        stack |= {"fill": fill_one, "trf": a - ce, "hbm": b - a}
    else:
        stack |= {"fill": fill_one, "trf": v["fill"] - fill_one, "hbm": v["dma"]}
    stack["reduction"] = v["tree"] + v["reduction"]
    return stack
