"""Trainium energy and breakdowns: bytes per level and operand, and the latency as a stall stack.

The energy model is `costmodels.energy` (the preset's ``energy:`` table) over the levels the cost
report counts (`trainium.cost.onchip_bytes` and the HBM traffic of `trainium.cost.traffic`). Here
are the split of those bytes over the operands and the stall stack of
``time = fill + max(tensor engine, steady DMA, eviction)`` (hardware-facts.md §2.2 step 6).
"""

from __future__ import annotations

import numpy as np

from costmodels.trainium.cost import Evaluation, ProblemConsts, Quantities
from costmodels.trainium.nest import Roles
from workload.problem import Problem


def _first(x: object) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def operand_bytes(
    problem: Problem, roles: Roles, c: ProblemConsts, q: Quantities, ev: Evaluation
) -> dict[str, dict[str, float]]:
    """Bytes per level and operand of the first point, from the terms the formulas add up.

    HBM (`traffic`): each input's block fetches over the cores (at least the input once), the
    output once. SBUF (`onchip_bytes`): each input's operand reads by the instructions plus its
    HBM bytes landed; the output's PSUM evictions written. PSUM: results, all the output's.
    """
    stat = problem.inputs[roles.stat_input].name
    mov = problem.inputs[roles.mov_input].name
    out = problem.output.name
    cores = _first(q.cores)
    ts, tm, tk = _first(q.ts), _first(q.tm), _first(q.tk)
    es, em, ek = ts * _first(q.bs), tm * _first(q.bm), tk * _first(q.bk)
    bb = _first(q.bb)
    hbm_stat = max(_first(q.fetch_stat) * es * ek * bb * c.s_stat * cores, c.real_stat_bytes)
    hbm_mov = max(_first(q.fetch_mov) * em * ek * bb * c.s_mov * cores, c.real_mov_bytes)
    hbm = _first(ev.hbm_chip)
    n_inst = _first(ev.n_inst)
    sbuf_stat = n_inst * tk * ts * c.s_stat * cores + hbm_stat
    sbuf_mov = n_inst * tk * tm * c.s_mov * cores + hbm_mov
    sbuf = _first(ev.sbuf_bytes)
    return {
        "hbm": {stat: hbm_stat, mov: hbm_mov, out: hbm - hbm_stat - hbm_mov},
        "sbuf": {stat: sbuf_stat, mov: sbuf_mov, out: sbuf - sbuf_stat - sbuf_mov},
        "psum": {stat: 0.0, mov: 0.0, out: _first(ev.psum_bytes)},
    }


def stall_stack(ev: Evaluation) -> dict[str, float]:
    """``fill + max(te, dma - fill, evict)`` of the first point as stages that add up to it.

    ``fill``: the first blocks' DMA; ``compute``: the tensor engine; ``hbm``: what the steady DMA
    adds beyond it; ``drain``: what PSUM eviction by the vector engine adds beyond both.
    """
    fill, te, dma, evict = (_first(x) for x in (ev.fill, ev.te, ev.dma, ev.evict))
    busy = max(te, max(dma - fill, 0.0))
    top = max(busy, evict)
    return {"fill": fill, "compute": te, "hbm": busy - te, "drain": top - busy}
