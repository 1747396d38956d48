"""Ties between Tenstorrent strategies, reported and broken by a documented rule (issue #13).

A strategy is a layout on its core grid (``height/R``, ``block/RxC``, ``width/C``) with a memory
placement (L1-sharded or DRAM-interleaved). Several strategies often price within a hair of each
other (a DRAM-bound layer reaches the same DRAM floor on many grids), and then the first in the
candidate list used to win. Instead, after a whole-space enumeration:

1. every strategy's best mapping is found (the whole space, through the target's scorer);
2. the strategies whose best is within `TIE_TOLERANCE` (0.5%) of the fastest form the tie;
3. the tie is ordered by **less data moved** (DRAM + NoC + halo bytes of `Target.cost`), then
   **fewer cores**, then latency, then the layout's name (only to make the order total);
4. the first is the reported mapping; the result lists them all (`TuneResult.ties`).

So the reported mapping can be up to 0.5% slower than the proven optimum, which the list shows
(its fastest entry); a strategy that moves less data frees the NoC and DRAM for the layers around
it, and one on fewer cores leaves cores free.
"""

from __future__ import annotations

import numpy as np

from costmodels.protocol import Choice, SearchSpace, Target
from costmodels.tenstorrent.shape import parse_layout
from mapper.enumerate import ChunkPlan
from mapper.result import StrategyTie
from workload.problem import Problem

TIE_TOLERANCE = 0.005


def best_per_strategy(
    problem: Problem, target: Target, space: SearchSpace
) -> dict[tuple[str, str], tuple[float, dict[str, Choice]]]:
    """(layout, memory) -> (latency, point) of each strategy's fastest feasible mapping (whole space)."""
    names = [p.name for p in space.params]
    lay_p, mem_p = space.params[names.index("layout")], space.params[names.index("memory")]
    n_mem = len(mem_p.choices)
    best = np.full(len(lay_p.choices) * n_mem, np.inf)
    points: dict[int, dict[str, Choice]] = {}
    plan = ChunkPlan(space, 1 << 16)
    for b0, b1 in plan.bounds():
        codes = plan.codes(b0, b1)
        s = target.score_codes(problem, codes)
        lat = np.where(s.feasible, s.objectives["latency"], np.inf)
        group = np.asarray(codes["layout"]) * n_mem + np.asarray(codes["memory"])
        order = np.lexsort((lat, group))
        g = group[order]
        for i in order[np.r_[True, g[1:] != g[:-1]]]:
            k = int(group[i])
            if lat[i] < best[k]:
                best[k] = lat[i]
                points[k] = {p.name: p.choices[int(codes[p.name][i])] for p in space.params}
    return {
        (str(lay_p.choices[k // n_mem]), str(mem_p.choices[k % n_mem])): (float(best[k]), points[k]) for k in points
    }


def _cores(layout: str) -> int:
    parsed = parse_layout(layout)
    return parsed[1] * parsed[2] if parsed else 0


def strategy_ties(problem: Problem, target: Target, space: SearchSpace) -> list[StrategyTie]:
    """The tie (see the module docstring), in tie-break order; the first entry is the winner."""
    per = best_per_strategy(problem, target, space)
    if not per:
        return []
    fastest = min(v for v, _ in per.values())
    rows = []
    for (layout, memory), (lat, point) in per.items():
        if lat > fastest * (1 + TIE_TOLERANCE):
            continue
        c = target.cost(problem, target.mapping(problem, point))
        moved = c.bytes.get("dram", 0.0) + c.bytes.get("noc", 0.0) + c.bytes.get("halo", 0.0)
        rows.append((moved, _cores(layout), lat, layout, memory, point))
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[3], r[4]))
    return [
        StrategyTie(layout=lay, memory=mem, cores=cores, latency=lat, data_moved=moved, chosen=i == 0, point=point)
        for i, (moved, cores, lat, lay, mem, point) in enumerate(rows)
    ]
