"""The joint optimum of a network plan by enumerating every choice sequence: the check on `plan_layouts`.

Each conv is priced by the target itself with the placement options of the sequence (the input's
actual layout given as ``input_layout``, so its reshard is the cost model's own, not the plan's
reshard matrix), at its best mapping of that layout; the max pool and the add by
`tenstorrent.eltwise` with the skip's reshard from `tenstorrent.reshard`. The skip tensor is
carried through the sequence explicitly. A folded conv (`forms`, `mapper.layout_chain.FoldedConv`)
is its folded conv priced by the target with its input in DRAM, plus the fold op; a sequence that
leaves its input (or, for a projection shortcut, the skip) in L1 is not legal. Independent of
`plan_layouts`' tables, DP and state bookkeeping; for small chains only (the number of sequences is
the product of the choices).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from costmodels.protocol import Target
from costmodels.tenstorrent.eltwise import eltwise_cycles
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.reshard import reshard_cycles
from mapper.cache import TargetFactory
from mapper.enumerate import ChunkPlan
from mapper.layout_chain import Forms, build_chain
from mapper.layout_prices import eltwise_op
from mapper.layout_tables import MEMORY, placed_target
from workload.network_ops import NetworkOp
from workload.problem import Problem


def brute_force(
    problems: list[Problem],
    preset: str,
    overrides: dict[str, Any] | None = None,
    factory: TargetFactory | None = None,
    *,
    network_ops: bool = True,
    forms: Forms | None = None,
) -> float:
    """The joint optimum over every (layout, memory, output placement) sequence of the chain.

    `forms`: the strided convs' forms (`mapper.layout_chain.build_chain`); a folded one runs folded.
    """
    from mapper.cache import resolve_factory

    factory = resolve_factory(factory)
    overrides = dict(overrides or {})
    steps = build_chain(problems, network_ops, forms)
    base = factory(preset, overrides)
    hw = cast(TensixHardware, base.hardware)
    cores = hw.cores
    cache: dict[str, Target] = {}
    n = len(steps)
    layouts = [
        [str(c) for c in base.space(s.item).params[0].choices] if isinstance(s.item, Problem) else [] for s in steps
    ]
    memo: dict[tuple[int, str, int], np.ndarray] = {}

    def conv_price(i: int, src: str | None, j: int, m: int, o: int) -> float:
        key = (i, src or "", o)
        if key not in memo:
            item = cast(Problem, steps[i].item)
            live = -(-steps[i].live_bytes // cores)
            ov: dict[str, Any] = {"input_in_l1": src is not None, "output_in_l1": bool(o), "l1_live_bytes": live}
            if src is not None:
                ov["input_layout"] = src
            t = placed_target(factory, preset, overrides, cache, **ov)
            space = t.space(item)
            mem_choices = [str(c) for c in next(p for p in space.params if p.name == "memory").choices]
            arr = np.full((len(layouts[i]), 2), np.inf)
            plan = ChunkPlan(space, 1 << 16)
            for b0, b1 in plan.bounds():
                codes = plan.codes(b0, b1)
                s = t.score_codes(item, codes)
                lat = np.where(s.feasible, s.objectives["latency"], np.inf)
                mem = np.array([MEMORY.index(c) for c in mem_choices])[np.asarray(codes["memory"])]
                np.minimum.at(arr, (np.asarray(codes["layout"]), mem), lat)
            memo[key] = arr
        return float(memo[key][j, m]) + steps[i].fold_seconds

    def elt_price(i: int, run: str | None, edge: str | None, skip: str | None, out_l1: bool) -> float:
        op = eltwise_op(cast(NetworkOp, steps[i].item))
        live = -(-steps[i].live_bytes // cores)
        is_add = op.kind == "add"
        if run is None:  # DRAM-interleaved: operands kept in L1 are written back first
            kept = (edge is not None) + (is_add and skip is not None)
            spill = kept * op.in_sticks * op.channels * op.elem_bytes
            cyc = eltwise_cycles(op, None, hw, in_dram=True, skip_dram=True, out_dram=True)
            cyc += spill / hw.dram_bytes_per_cycle
            return cyc / hw.clock_hz
        in_dram = edge is None
        skip_dram = is_add and skip is None
        cyc = eltwise_cycles(op, run, hw, in_dram=in_dram, skip_dram=skip_dram, out_dram=not out_l1,
                             live_bytes_per_core=live)  # fmt: skip
        if is_add:  # the operand not in the run layout is resharded to it
            other = skip if run == edge else edge
            if other is not None and other != run:
                cyc += reshard_cycles(op.in_sticks, op.channels, op.elem_bytes, other, run, hw)
        return cyc / hw.clock_hz

    best = np.inf

    def walk(i: int, edge: str | None, skip: str | None, total: float) -> None:
        nonlocal best
        if i == n:
            if edge is None:
                best = min(best, total)
            return
        s = steps[i]
        if not s.in_l1 and edge is not None and s.mode != "swap":
            return  # a step not on a chain edge reads DRAM: its predecessor must have written there
        if s.is_conv:
            src = skip if s.mode == "swap" else edge
            if s.fold is not None and src is not None:
                return  # the fold reads its input from DRAM
            new_skip = edge if s.mode in ("open", "swap") else skip
            for j, lay in enumerate(layouts[i]):
                for m in (0, 1):
                    for o in (0, 1) if s.out_l1 and m == 0 else (0,):
                        walk(i + 1, lay if o else None, new_skip, total + conv_price(i, src, j, m, o))
            return
        new_skip = None if s.mode == "close" else skip
        runs: list[str | None] = [None]
        runs += [x for x in dict.fromkeys([edge, skip if s.mode == "close" else None]) if x is not None]
        for run in runs:
            for o in (0, 1) if s.out_l1 and run is not None else (0,):
                walk(i + 1, run if o else None, new_skip, total + elt_price(i, run, edge, skip, bool(o)))

    walk(0, None, None, 0.0)
    return float(best)
