"""Admissible latency bounds of structures of the Trainium space (issue #12, branch and bound).

The mapper searches a large space by *structures* (some parameters fixed, `mapper.bounds`) and skips
a structure whose bound is not below the best latency found. `EngineBound` bounds one by the
tensor-engine time of its best point: ``te = n_inst x ii`` per core, the instructions of the
busiest core times the cost of one (``max(min(64, N_stationary), N_moving)``, 4x for fp32:
nki-nc_matmul.txt, "Estimated instruction cost"), the same operations as `cost.traffic` on the
same role splits (`scoring.grid_inputs`, which the priced grid uses), over every parameter but the
accumulator and the loop order (``te`` depends on neither).

Admissibility: `cost.accumulation` prices a point at ``fill + max(busy, evict)`` cycles with
``busy = max(te, steady DMA) >= te`` and ``fill >= 0``; adding and taking maxima of non-negative
floats never rounds below an operand, so every point's latency is at least its ``te`` over the
clock, and the minimum over the structure's points (feasible or not) is below each feasible
point's latency. The HBM roofline is not added here: `mapper.bounds.StructureBounds` already takes
the larger of this bound and the whole problem's `lower_bound`. The bound is tightest where the
fixed choices set the tiles and cores (padding, idle cores and the 64-cycle floor all show);
`tests/costmodels/test_structure_bounds.py` checks it against the best point of many
structures of random problems.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from costmodels.protocol import Choice, SearchSpace
from costmodels.trainium.cost import ProblemConsts
from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.nest import Roles, roles_of
from costmodels.trainium.scoring import LAYOUT, grid_inputs
from workload.problem import Problem


@dataclass(frozen=True)
class EngineBound:
    """Tensor-engine cycles of every point, over the `LAYOUT` axes (size 1 along ``acc`` and ``order``)."""

    space: SearchSpace
    te: np.ndarray
    clock_hz: float

    def __call__(self, fixed: dict[str, Choice]) -> float:
        """Seconds no feasible point with these fixed choices can beat.

        Raises:
            ValueError: a fixed choice names no parameter of the space, or a value it does not offer.
        """
        choices = {p.name: p.choices for p in self.space.params}
        unknown = sorted(set(fixed) - set(choices))
        if unknown:
            raise ValueError(f"no parameter {unknown[0]!r} in this space: its parameters are {sorted(choices)}")
        for name, value in fixed.items():
            if value not in choices[name]:
                raise ValueError(f"{name}={value!r} is not a choice of this space: {choices[name]}")
        index: list[slice] = []
        for axis, name in enumerate(LAYOUT):
            if name not in fixed or self.te.shape[axis] == 1:
                index.append(slice(None))
            else:
                code = choices[name].index(fixed[name])
                index.append(slice(code, code + 1))
        return float(self.te[tuple(index)].min()) / self.clock_hz


def engine_bound(
    problem: Problem, hw: TrainiumHardware, space: SearchSpace, consts: Callable[[Roles], ProblemConsts]
) -> EngineBound:
    """The tensor-engine cycles of every point of `space` (one array per stationary choice, stacked)."""
    ch = {p.name: p.choices for p in space.params}
    per_stationary = []
    for st in ch["stationary"]:
        roles = roles_of(problem, str(st))
        g = grid_inputs(problem, space, roles)
        c = consts(roles)
        # cost.traffic's n_out, n_inst, ii and te, on the same arrays
        n_out = (g["s.sbuf"] * g["s.hbm"]) * (g["m.sbuf"] * g["m.hbm"]) * (g["b.sbuf"] * g["b.hbm"])
        n_inst = n_out * (g["k.sbuf"] * g["k.hbm"])
        ii = np.maximum(np.minimum(hw.matmul_floor_cycles, g["s.tile"]), g["m.tile"]) * (
            hw.fp32_cost_factor if c.fp32 else 1.0
        )
        per_stationary.append(n_inst * ii)
    shape = np.broadcast_shapes(*(t.shape for t in per_stationary))
    te = np.stack([np.broadcast_to(t, shape) for t in per_stationary])
    return EngineBound(space=space, te=te, clock_hz=hw.te_clock_hz)
