"""Trainium `score_codes`: each point's number in the priced grid, then a look-up of its three objectives.

The whole space of a problem is priced once (costmodels.trainium_grid, with the formulas of
`check`/`cost`) and kept per problem by the target. The grid's axes are in its own order
(`trainium_grid.LAYOUT`), so a point's number is the sum of its code for each parameter times that
parameter's stride in the grid (parameters with one choice add nothing); the three objectives are
gathered at those numbers, and a point is feasible where its latency is finite (the grid holds
``inf`` for infeasible points). `score_batch` reaches the same gather through
`choice_codes.score_values`, which encodes value columns to codes first.
"""

from __future__ import annotations

import math

import numpy as np

from costmodels.protocol import BatchScore
from costmodels.trainium_grid import PricedGrid


class GridScorer:
    """Code columns -> `BatchScore` of those points, gathered from one priced grid."""

    def __init__(self, grid: PricedGrid) -> None:
        strides = [math.prod(grid.shape[i + 1 :]) for i in range(len(grid.shape))]
        # parameters with several choices; the stride-1 one last (added without a multiply)
        terms = [(name, s) for name, s, n in zip(grid.axes, strides, grid.shape, strict=True) if n > 1]
        self.terms = tuple(sorted(terms, key=lambda t: t[1] == 1))
        self.names = grid.axes
        self.tables = (grid.latency, grid.offchip, grid.footprint)

    def flat(self, codes: dict[str, np.ndarray]) -> np.ndarray:
        """The number in the grid of every point of `codes` (``codes[name][i]``: point i's choice index)."""
        out: np.ndarray | None = None
        tmp: np.ndarray | None = None
        for name, stride in self.terms:
            c = np.asarray(codes[name])
            if c.dtype != np.intp:
                c = c.astype(np.intp)
            if out is None:
                out = c * stride
            elif stride == 1:
                out += c
            else:
                if tmp is None:
                    tmp = np.empty_like(out)
                np.multiply(c, stride, out=tmp)
                out += tmp
        if out is None:  # a space of one point
            return np.zeros(len(codes[self.names[0]]), dtype=np.intp)
        return out

    def __call__(self, codes: dict[str, np.ndarray]) -> BatchScore:
        flat = self.flat(codes)
        lat, off, foot = (np.take(t, flat) for t in self.tables)
        return BatchScore(feasible=lat < np.inf, objectives={"latency": lat, "offchip_bytes": off, "footprint": foot})
