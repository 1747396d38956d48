"""Ties between Tenstorrent strategies, reported and broken by a documented rule (issue #13).

A strategy is a layout on its core grid (``height/R``, ``block/RxC``, ``width/C``) with a memory
placement (L1-sharded or DRAM-interleaved). Several strategies often price within a hair of each
other (a DRAM-bound layer reaches the same DRAM floor on many grids), and then the first in the
candidate list used to win. Instead, after a whole-space enumeration:

1. every strategy's best mapping is found (the whole space, through the target's scorer), in the
   same pass as the enumeration (`tie_groups`: the enumeration keeps each strategy's best as it
   scores its chunks), so the space is scored once;
2. the strategies whose best is within `TIE_TOLERANCE` (0.5%) of the fastest form the tie;
3. the tie is ordered by **less data moved** (DRAM + NoC + halo bytes of `Target.cost`), then
   **fewer cores**, then latency, then the layout's name (only to make the order total);
4. the first is the reported mapping; the result lists them all (`TuneResult.ties`).

So the reported mapping can be up to 0.5% slower than the proven optimum, which the list shows
(its fastest entry); a strategy that moves less data frees the NoC and DRAM for the layers around
it, and one on fewer cores leaves cores free.
"""

from __future__ import annotations

from costmodels.protocol import Choice, SearchSpace, Target
from costmodels.tenstorrent.shape import parse_layout
from mapper.enumerate import ChunkPlan, GroupBest
from mapper.result import StrategyTie
from workload.problem import Problem

TIE_TOLERANCE = 0.005


#: the parameters whose values make a strategy: a layout on its grid, a memory placement
TIE_PARAMS = ("layout", "memory")

#: (layout, memory) -> (latency, point) of each strategy's fastest feasible mapping
PerStrategy = dict[tuple[str, str], tuple[float, dict[str, Choice]]]


def tie_groups(target: Target, space: SearchSpace) -> GroupBest | None:
    """The per-strategy table to keep while enumerating this space, or None when no tie is reported.

    Only Tenstorrent spaces have strategies (`TIE_PARAMS`); the enumeration feeds the table every
    chunk it scores (`mapper.enumerate.Enumeration.groups`), so the ties cost no second pass.
    """
    names = {p.name for p in space.params}
    if target.family != "tenstorrent" or not set(TIE_PARAMS) <= names:
        return None
    return GroupBest(space, TIE_PARAMS, "latency")


def per_strategy(groups: GroupBest, space: SearchSpace) -> PerStrategy:
    """The table of a `GroupBest` over `TIE_PARAMS`, keyed by the layout's and memory's names."""
    return {(str(lay), str(mem)): best for (lay, mem), best in groups.table(space).items()}


def best_per_strategy(problem: Problem, target: Target, space: SearchSpace) -> PerStrategy:
    """Each strategy's fastest feasible mapping, by enumerating the whole space (when no search kept the table)."""
    groups = GroupBest(space, TIE_PARAMS, "latency")
    plan = ChunkPlan(space, 1 << 16)
    for b0, b1 in plan.bounds():
        codes = plan.codes(b0, b1)
        groups.absorb(space, codes, target.score_codes(problem, codes))
    return per_strategy(groups, space)


def _cores(layout: str) -> int:
    parsed = parse_layout(layout)
    return parsed[1] * parsed[2] if parsed else 0


def strategy_ties(
    problem: Problem, target: Target, space: SearchSpace, per: PerStrategy | None = None
) -> list[StrategyTie]:
    """The tie (see the module docstring), in tie-break order; the first entry is the winner.

    `per`: each strategy's best as the search's enumeration kept it (`tie_groups`); None enumerates
    the space for it (`best_per_strategy`).
    """
    if per is None:
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
