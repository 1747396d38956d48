"""Scoring a Trainium space too large to price whole: the points asked for, priced by sub-grids.

With every tile count offered (`costmodels.trainium.tiles`, rule T1) a space has up to ~5e10
points, far past what `scoring.price_grid` can hold (32 bytes per point). `SubgridScorer` prices
only what a call asks for: the product of the choices the code columns use (a sub-space of the
space, priced by `scoring.price_grid` with the same formulas), and reads the points back from it.
A search asks for structured sets (a structure's sub-space: the tile choices fixed, the rest
whole), whose product is the set itself. Scattered codes whose product would pass
`SUBGRID_LIMIT` points are grouped by their tile choices (`STRUCTURAL`) first; the groups that use
the same choices of every parameter but `MERGED` are priced as one product over their `MERGED`
choices (a search that prices the coming structures together,
`mapper.strategies.objective.Evaluator.score_ahead`, pays numpy's per-call cost once per such set
instead of once per structure). A point's price does not depend on which other points are priced
with it (each formula input is a function of the point's own choices), so the values equal the
whole grid's.
"""

from __future__ import annotations

import math
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
#: structures that use the same choices of every other parameter are priced as one product over this one's
MERGED = "tile_mov"


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
        order = np.argsort(key, kind="stable")
        runs = np.split(order, np.flatnonzero(np.diff(key[order])) + 1)  # each structure's rows
        # structures that differ only in MERGED and use the same other choices: one product over their MERGED choices
        alike: dict[tuple[object, ...], list[np.ndarray]] = {}
        tiles = [np.asarray(codes[name]) for name in STRUCTURAL if name != MERGED]  # one choice per structure
        others = [np.asarray(codes[p.name]) for p in self.space.params if p.name not in STRUCTURAL]
        for rows in runs:
            pattern = (
                tuple(int(col[rows[0]]) for col in tiles),
                *(_distinct(col[rows]).tobytes() for col in others),
            )
            alike.setdefault(pattern, []).append(rows)
        out = {o: np.empty(n) for o in self.objectives}
        feasible = np.empty(n, dtype=bool)
        for group in alike.values():
            first = {p.name: _distinct(np.asarray(codes[p.name])[group[0]]) for p in self.space.params}
            per = max(1, SUBGRID_LIMIT // max(1, math.prod(len(u) for k, u in first.items() if k != MERGED)))
            for start in range(0, len(group), per):
                rows = np.concatenate(group[start : start + per])
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
