"""Best-first's order by the target's floors: a structure is bounded exactly only when its floor comes first.

A family whose exact structure bound is costly (Ascend: a structure's optimum, about as costly as
scoring it) also floors every structure in one array (`mapper.bounds.StructureFloored`). Best-first
search (`mapper.strategies.bestfirst`) then uses the floors twice without changing what it does:

- a warm start is skipped when its bound is not below the best found; `FloorTable.out` asks the
  exact bound only when the floor does not already rule the structure out (the floor being at most
  the exact bound, a floor that rules it out means the exact bound does too: the same decision);
- the ordered pass takes the structures from `Floored`: the order of the exact bounds, with only
  the structures whose floor comes first bounded exactly (proof in `Floored`). With several
  objectives best-first takes a structure when its floor comes first (`Floored.drop`): left out
  when the front dominates its floors (the front only grows), else visited at once, without an
  exact bound (which prices every point of the structure, at least what the visit scores: the
  points of the cells the front leaves open). The order of the visits is then the floors'; the
  front does not depend on it, and the stop at a floor's key holds as before (every key left is
  at least as high). Where the target gives every structure's cells in one array
  (`mapper.bounds.FrontCellTable`), only the first structure is visited so: unless the stop comes
  next, the rest is priced cell by cell in rounds (`mapper.strategies.cell_rounds`).

The floors are computed once, on first use: a search that a warm start proves at the roofline
needs none, and the warm starts ask `EXACT_FIRST` exact bounds before the floors are computed.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Iterator
from functools import cached_property

import numpy as np

from costmodels.protocol import Choice, Param, Target
from mapper.bounds import StructureBounds, StructureFloored
from workload.problem import Problem

#: warm starts bounded exactly before the floors are computed: a search a few warm starts prove (most Ascend
#: layers) asks a few exact bounds, cheaper than the floors of hundreds of structures (either gives the same
#: decision, so this only moves time)
EXACT_FIRST = 4


def floor_params(problem: Problem, target: Target, bounds: StructureBounds) -> bool:
    """True when the target floors every structure in one array (`StructureFloored`) and has its own bounds."""
    return isinstance(target, StructureFloored) and bounds.per_structure and not target.supports(problem)


class FloorTable:
    """The target's floors of every structure of the `structural` parameters, computed on first use."""

    def __init__(self, target: Target, problem: Problem, structural: tuple[Param, ...], bounds: StructureBounds):
        assert isinstance(target, StructureFloored)
        self.target, self.problem, self.bounds = target, problem, bounds
        self.names = tuple(p.name for p in structural)
        self.keys = list(itertools.product(*(p.choices for p in structural)))
        self.seconds = 0.0  # time spent computing the floors and the exact bounds asked through `out`
        self.asked = 0  # exact bounds asked through `out`

    @cached_property
    def floors(self) -> np.ndarray:
        """Every structure's floor (seconds, at least 0), in the order of `keys` (C order)."""
        t0 = time.perf_counter()
        raw = self.target.structure_floors(self.problem, self.names)
        out = np.maximum(np.asarray(raw, dtype=np.float64).reshape(-1), 0.0)
        self.seconds += time.perf_counter() - t0
        return out

    @cached_property
    def index(self) -> dict[tuple[Choice, ...], int]:
        return {k: i for i, k in enumerate(self.keys)}

    def out(self, key: tuple[Choice, ...], best: float) -> bool:
        """Whether ``bounds(structure)`` rules the structure out: after `EXACT_FIRST` exact bounds, the exact bound
        is asked only when the floor does not rule it out."""
        floors_first = "floors" in self.__dict__ or self.asked >= EXACT_FIRST  # computed, or worth computing
        if floors_first and StructureBounds.bounded_out(
            max(self.bounds.whole(), float(self.floors[self.index[key]])), best
        ):
            return True
        self.asked += 1
        t0 = time.perf_counter()
        bound = self.bounds(dict(zip(self.names, key, strict=True)))
        self.seconds += time.perf_counter() - t0
        return StructureBounds.bounded_out(bound, best)


class Floored:
    """Structures in ascending order of their bounds, each bounded exactly only when its floor comes first.

    Every structure starts with the key ``max(whole, floor)`` (`FloorTable`; `whole` the generic
    bound when the ordered pass starts), tier 0. Popped at tier 0 it is yielded with ``exact`` False
    (the caller may stop on its key: every key left is at least as high, and each structure's exact
    bound at least its key), then bounded by the target (``max(whole, own)``, `StructureBounds.own`)
    and pushed back at tier 1; popped at tier 1 it is yielded with ``exact`` True, to be scored.

    The tier-1 pops come in the order of ``np.argsort(exact bounds, kind="stable")`` (the order of
    `bestfirst.structure_order`), provided every floor is at most its exact bound: when ``(e, 1, i)`` is
    the least entry of the heap, every entry ``(f, 0, j)`` left has ``f > e``, so ``e_j >= f > e``; every
    ``(e_j, 1, j)`` left has ``(e_j, j) > (e, i)``; and a structure with ``(e_j, j) < (e, i)`` had its
    ``(f_j, 0, j) < (e, 1, i)`` popped, refined and its ``(e_j, 1, j)`` popped before. Structures in
    `seen` (scored by the warm starts) are passed over, as the ordered pass skips them. `exact_count`
    counts the exact bounds computed here, `table.seconds` the time spent bounding (floors included).
    """

    def __init__(self, table: FloorTable, seen: set[tuple[Choice, ...]]) -> None:
        self.table, self.seen = table, seen
        self.whole = table.bounds.whole()
        self.heap = [(max(self.whole, f), 0, i) for i, f in enumerate(table.floors.tolist())]
        heapq.heapify(self.heap)
        self.exact_count = 0
        self.dropped: set[tuple[Choice, ...]] = set()

    def drop(self, key: tuple[Choice, ...]) -> None:
        """Never yield the structure just yielded again (several objectives: the front dominates its floors,
        `mapper.bounds.FrontBounds.out`, and the front only grows; or the caller bounds it now, `exact`)."""
        self.dropped.add(key)

    def exact(self, key: tuple[Choice, ...]) -> float:
        """The structure's exact bound (``max(whole, own)``), counted in `exact_count` and the table's time."""
        t0 = time.perf_counter()
        own = self.table.bounds.own(dict(zip(self.table.names, key, strict=True)))
        self.exact_count += 1
        self.table.seconds += time.perf_counter() - t0
        return max(self.whole, own)

    def __iter__(self) -> Iterator[tuple[tuple[Choice, ...], float, bool]]:
        keys = self.table.keys
        while self.heap:
            key, tier, i = heapq.heappop(self.heap)
            if keys[i] in self.seen or keys[i] in self.dropped:
                continue
            yield keys[i], key, bool(tier)
            if not tier and keys[i] not in self.dropped:
                heapq.heappush(self.heap, (self.exact(keys[i]), 1, i))
