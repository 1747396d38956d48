"""Admissible latency bounds of structures of the Trainium space (issue #12, branch and bound).

The mapper searches a large space by *structures* (some parameters fixed, `mapper.bounds`) and skips
a structure whose bound is not below the best latency found. `EngineBound` bounds one by the
smallest ``fill + max(tensor engine, steady DMA)`` of its points: `cost.traffic`'s ``prologue +
busy``, with ``te = n_inst x ii`` per core (``max(min(64, N_stationary), N_moving)``, 4x for fp32:
nki-nc_matmul.txt, "Estimated instruction cost") and the blocked schedule's DMA
(hardware-facts.md §2.2 step 5), read from the priced grid (`scoring.price_grid` keeps it as
``PricedGrid.floor``, over every parameter but the accumulator, which it does not depend on).

Admissibility: `cost.accumulation` prices a point at ``prologue + max(busy, evict)`` cycles, the
same float operations on the same ``prologue`` and ``busy`` arrays; a maximum is never below an
operand and rounding an addition is monotone, so every point's latency is at least its
``prologue + busy`` over the clock, and the minimum over the structure's points (feasible or not)
is below each feasible point's latency. The HBM roofline of the whole problem is not added here:
`mapper.bounds.StructureBounds` already takes the larger of this bound and `lower_bound`. The
bound is tight where the fixed choices set the tiles and cores (padding, idle cores and the
64-cycle floor show) or the blocks and loop order (the DMA shows);
`tests/costmodels/test_structure_bounds.py` checks it against the best point of many structures
of random problems.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodels.protocol import Choice, SearchSpace
from costmodels.trainium.scoring import LAYOUT


@dataclass(frozen=True)
class EngineBound:
    """``fill + max(tensor engine, steady DMA)`` cycles of every point, over the `LAYOUT` axes (``acc`` of size 1)."""

    space: SearchSpace
    floor: np.ndarray
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
            if name not in fixed or self.floor.shape[axis] == 1:
                index.append(slice(None))
            else:
                code = choices[name].index(fixed[name])
                index.append(slice(code, code + 1))
        return float(self.floor[tuple(index)].min()) / self.clock_hz
