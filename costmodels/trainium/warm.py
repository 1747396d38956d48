"""Trainium warm starts: the NKI tiling guidance (hardware-facts.md §2.1 Tiling guidance)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from costmodels.choice_codes import row_point
from costmodels.protocol import BatchScore, Choice, Param, SearchSpace
from costmodels.trainium.space import STATIONARY
from workload.problem import Problem


def warm_points(
    problem: Problem, space: SearchSpace, score_batch: Callable[[Problem, dict[str, np.ndarray]], BatchScore]
) -> list[dict[str, Choice]]:
    """The NKI tiling guidance first: 128/128/512 tiles (hardware-facts.md §2.1 Tiling guidance), blocked.

    Among the points with the largest tile caps and all cores, the blockings are scored and the
    best feasible few returned, weight-stationary first; then the same with the other input
    stationary (the short operand belongs on moving, nki perf guide).
    """
    ch = {p.name: p.choices for p in space.params}
    fixed = {"tile_stat": ch["tile_stat"][0], "tile_mov": ch["tile_mov"][0], "tile_k": ch["tile_k"][0],
             "cores": ch["cores"][-1]}  # fmt: skip
    sub = SearchSpace(params=tuple(Param(name=p.name, choices=(fixed[p.name],)) if p.name in fixed else p
                                   for p in space.params))  # fmt: skip
    cols = sub.columns()
    score = score_batch(problem, cols)
    lat = np.asarray(score.objectives["latency"], dtype=float)
    out: list[dict[str, Choice]] = []
    for st in STATIONARY:
        mask = np.asarray(cols["stationary"], dtype=object) == st
        cand = np.flatnonzero(mask & np.isfinite(lat))
        for i in cand[np.argsort(lat[cand], kind="stable")][:3]:
            out.append(row_point(cols, i))
    if not out:
        out.append(row_point(cols, 0))
    return out
