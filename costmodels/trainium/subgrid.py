"""Scoring a Trainium space too large to price whole: the points asked for, priced by sub-grids.

With every tile count offered (`costmodels.trainium.tiles`, rule T1) a space has up to ~5e10
points, far past what `scoring.price_grid` can hold (32 bytes per point). `SubgridScorer` prices
only what a call asks for: the product of the choices the code columns use (a sub-space of the
space, priced by `scoring.price_grid` with the same formulas), and reads the points back from it.
A search asks for structured sets (a structure's sub-space: the tile choices fixed, the rest
whole), whose product is the set itself. Scattered codes whose product would pass
`SUBGRID_LIMIT` points are grouped by their tile choices (`STRUCTURAL`) first, each group priced
as its own product. A point's price does not depend on which other points are priced with it (each
formula input is a function of the point's own choices), so the values equal the whole grid's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from costmodels.protocol import BatchScore, Param, SearchSpace
from costmodels.trainium.cost import ProblemConsts
from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.nest import Roles
from costmodels.trainium.scoring import GridScorer, price_grid
from workload.problem import Problem

#: spaces up to this many points are priced whole when a problem is prepared (the enumeration limit)
GRID_LIMIT = 2_000_000
#: most points of one sub-grid priced in a call
SUBGRID_LIMIT = 1 << 20
#: the parameters that group scattered codes (a structure of best-first search: `TrainiumTarget.structural_params`)
STRUCTURAL: tuple[str, ...] = ("stationary", "tile_stat", "tile_mov", "tile_k")


def _distinct(col: np.ndarray) -> np.ndarray:
    """The sorted distinct codes of a column (a broadcast constant without a pass over it)."""
    col = np.asarray(col)
    if col.size and col.strides and col.strides[0] == 0:
        return col[:1].astype(np.intp)
    return np.flatnonzero(np.bincount(col.astype(np.intp, copy=False)))


def _local(col: np.ndarray, used: np.ndarray) -> np.ndarray:
    """Codes of the space as codes of the sub-space of the `used` choices."""
    col = np.asarray(col)
    if used[-1] + 1 == len(used):  # every choice up to the largest: the same codes
        return col
    lut = np.zeros(int(used[-1]) + 1, dtype=np.intp)
    lut[used] = np.arange(len(used))
    return lut[col]


class SubgridScorer:
    """Code columns -> `BatchScore`, pricing the product of the choices the columns use."""

    def __init__(
        self, problem: Problem, hw: TrainiumHardware, space: SearchSpace, consts: Callable[[Roles], ProblemConsts]
    ) -> None:
        self.problem, self.hw, self.space, self.consts = problem, hw, space, consts
        self.objectives = ("latency", "offchip_bytes", "footprint", "energy")
        self.choices = {p.name: p.choices for p in space.params}

    def __call__(self, codes: dict[str, np.ndarray]) -> BatchScore:
        n = len(np.asarray(codes[self.space.params[0].name]))
        if n == 0:
            return BatchScore.infeasible(0, self.objectives)
        used = {p.name: _distinct(codes[p.name]) for p in self.space.params}
        if int(np.prod([len(u) for u in used.values()], dtype=np.float64)) <= SUBGRID_LIMIT:
            return self._product(codes, used)
        key = np.ravel_multi_index(
            tuple(np.asarray(codes[name], dtype=np.intp) for name in STRUCTURAL),
            tuple(len(self.choices[name]) for name in STRUCTURAL),
        )
        groups, inverse = np.unique(key, return_inverse=True)
        out = {o: np.empty(n) for o in self.objectives}
        feasible = np.empty(n, dtype=bool)
        for g in range(len(groups)):
            rows = np.flatnonzero(inverse == g)
            part = {name: np.asarray(col)[rows] for name, col in codes.items()}
            score = self._product(part, {p.name: _distinct(part[p.name]) for p in self.space.params})
            feasible[rows] = score.feasible
            for o in self.objectives:
                out[o][rows] = score.objectives[o]
        return BatchScore(feasible=feasible, objectives=out)

    def _product(self, codes: dict[str, np.ndarray], used: dict[str, np.ndarray]) -> BatchScore:
        """Price the product of the `used` choices and gather the points of `codes` from it."""
        sub = SearchSpace(
            params=tuple(
                Param(name=p.name, choices=tuple(p.choices[int(i)] for i in used[p.name]), doc=p.doc)
                for p in self.space.params
            )
        )
        grid = price_grid(self.problem, self.hw, sub, self.consts)
        local = {name: _local(codes[name], used[name]) for name in used}
        return GridScorer(grid)(local)
