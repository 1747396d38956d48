"""Admissible lower bounds of a space's structures (the certificate they give a search: `mapper.certificate`).

A large space is searched by *structures*: Optuna fixes the structural parameters, numpy scores
the remaining sub-space exactly. `StructureBounds` gives each structure a latency bound in
seconds that no feasible point of its sub-space beats:

- the target's own `costmodels.structure_bound.StructureBounded.structure_bound` when it has one (a
  family tightens the bound with its fixed choices applied);
- otherwise the generic bound ``target.lower_bound(problem).cycles / clock_hz``: the whole
  problem's roofline. It is admissible for every structure without any family code, because
  every feasible point of the space is a point of the whole problem, and a target's cost never
  beats its roofline (``cost.cycles >= lower_bound.cycles``, held by the conformance suite for
  every preset: `tests/costmodels/test_conformance.py`); the cycles are turned into seconds at
  the clock the target prices its mappings with (`CostReport.clock_hz`, one per target), so
  ``seconds = cycles / clock_hz >= lower_bound.cycles / clock_hz``. Loose: it prunes a structure
  only once the best found reaches the roofline, which then bounds out every structure at once.

Only latency has per-structure bounds; for any other objective the bound is 0 (trivially
admissible: no cost is negative), so nothing is pruned. A structure is *bounded out* when ``bound
* (1 + RTOL) >= best``: none of its points can be better than the best by more than the relative
tolerance `RTOL` (the same tolerance the ``lower-bound`` stop uses).

Several objectives (`FrontBounds`): a structure's bound is a vector, its latency bound beside a
floor per other objective that holds for the whole problem (`objective_floor`: ``offchip_bytes``
>= `Problem.min_bytes`, every input read once and the output written once; 0 for the others). A
structure is bounded out when a point of the front found so far is no worse than its bound vector
on every objective (within `RTOL`): each of its points is then dominated by that front point or
has its values, so it adds no value to the front (weak dominance: of equal values the front keeps
the point scored first). When the front dominates the bound vector of the whole space, every
structure is bounded out and the front is the exact front (the ``lower-bound`` stop).

Tighter, when the target has cells (`FrontCellBounded`: RNGD for latency and off-chip bytes,
Trainium for those and energy; `FrontCellBlocks` gives every structure's cells at once): a
structure is cut into cells, each with its own bound vector, every feasible point of the structure
no better on any objective than its cell's vector; the structure is out when the front dominates
every cell's vector (each lifted to at least the structure's vector, both being admissible): each
of its points is then dominated by, or has the values of, a front point. A structure's least
bytes and least latency usually sit in different cells (few slices move few bytes, slowly), so the
cells bound out structures a single vector (its least latency beside its least bytes) cannot. A
target may screen the cells against the front (`FrontCellScreened`: RNGD gives the cells of a row of
them one vector below each when the front dominates it), which changes no test's outcome.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from costmodels.dominance import RTOL, dominated_rows
from costmodels.protocol import Choice, Target
from costmodels.structure_bound import StructureBounded
from mapper.bound_hooks import (  # noqa: F401 (re-exported: the targets' optional hooks)
    CellOfPoints,
    FrontCellBlocks,
    FrontCellBounded,
    FrontCellScreened,
    FrontCellTable,
    PointFloored,
    StructureFloored,
    StructureObjectiveFloors,
    StructureRepeats,
)
from mapper.pareto import pareto_front
from workload.problem import Problem


class StructureBounds:
    """Latency lower bounds (seconds) of structures of one problem's space on one target."""

    def __init__(self, target: Target, problem: Problem, objective: str) -> None:
        self.target, self.problem, self.objective = target, problem, objective
        hook = target.structure_bound if isinstance(target, StructureBounded) else None
        self._hook: Callable[[Problem, dict[str, Choice]], float] | None = hook if objective == "latency" else None
        self._clock: float | None = None
        self._whole: float | None = None

    @property
    def source(self) -> str:
        """Where the bounds come from, as the certificate states it."""
        if self.objective != "latency":
            return f"none for {self.objective} (0: nothing is pruned)"
        return "target.structure_bound" if self._hook else "target.lower_bound (the whole problem's roofline)"

    @property
    def per_structure(self) -> bool:
        """True when structures can have different bounds (a target hook); False: one bound for all."""
        return self._hook is not None

    def learn_clock(self, point: dict[str, Choice]) -> None:
        """Take the target's clock from a feasible point's cost report (the generic bound needs it)."""
        if self._clock is None:
            self._clock = self.target.cost(self.problem, self.target.mapping(self.problem, point)).clock_hz

    def whole(self) -> float:
        """The generic bound of any structure: the roofline in seconds (0 before a clock is known)."""
        if self.objective != "latency" or self._clock is None:
            return 0.0
        if self._whole is None:
            self._whole = self.target.lower_bound(self.problem).cycles / self._clock
        return self._whole

    def __call__(self, fixed: dict[str, Choice]) -> float:
        """The bound of the structure with these fixed choices (never below the generic bound)."""
        return max(self.whole(), self.own(fixed))

    def own(self, fixed: dict[str, Choice]) -> float:
        """The target's bound of the structure alone (0 without a hook: the caller lifts it to `whole`)."""
        return 0.0 if self._hook is None else float(self._hook(self.problem, dict(fixed)))

    @staticmethod
    def bounded_out(bound: float, best: float | None) -> bool:
        """True when no point under `bound` can beat `best` (beyond `RTOL`)."""
        return best is not None and bound * (1 + RTOL) >= best


#: each objective other than latency with a positive floor from the problem alone, and that floor (`objective_floor`)
_PROBLEM_FLOORS: dict[str, Callable[[Problem], float]] = {"offchip_bytes": lambda p: float(p.min_bytes)}
#: the objectives `objective_floor` floors above 0
PROBLEM_FLOORED = frozenset(_PROBLEM_FLOORS)


def objective_floor(problem: Problem, objective: str) -> float:
    """A bound of `objective` that no mapping of the problem beats, from the problem alone.

    ``offchip_bytes``: `Problem.min_bytes` (every input read from off-chip memory once, the output
    written once), held on every preset by ``tests/mapper/test_mapper_bounds.py`` (no feasible
    point of a GEMM's or a convolution's whole space moves fewer off-chip bytes). Latency has its
    own bounds (`StructureBounds`); any other objective: 0.
    """
    floor = _PROBLEM_FLOORS.get(objective)
    return floor(problem) if floor is not None else 0.0


def with_point_floors(rows: np.ndarray, floors: dict[str, np.ndarray], objectives: tuple[str, ...]) -> np.ndarray:
    """Each point's cell row (points x `objectives`) raised, in place, to the target's own floors of the point on the
    objectives it floors (`PointFloored`): both bound the point, so the larger does."""
    for j, o in enumerate(objectives):
        if o in floors:
            rows[:, j] = np.maximum(rows[:, j], floors[o])
    return rows


def bounded_by_cells(objectives: tuple[str, ...], target: Target) -> bool:
    """Whether best-first bounds structures by `FrontBounds` (the front, or the best point, against each structure's
    cells): several objectives, or one other than latency that the target bounds cell by cell."""
    return len(objectives) > 1 or (objectives[0] != "latency" and isinstance(target, FrontCellBounded))


def live_structures(
    blocks: Iterator[tuple[int, np.ndarray]],
    total: int,
    front: np.ndarray,
    stop: Callable[[], bool] | None = None,
    open_floors: np.ndarray | None = None,
    open_rows: Callable[[np.ndarray, np.ndarray], None] | None = None,
) -> np.ndarray | None:
    """Which of `total` structures have a cell that `front` does not dominate (`FrontCellBlocks`' blocks).

    A structure that is not live has every cell dominated by a front point (within `RTOL`): each of
    its points is dominated by, or has the values of, a point of `front`, and of every front that
    grows from it. None when `stop` says so between two blocks (the pass is abandoned). The pass ends
    early once every structure is live. `open_floors` (total x objectives, filled with inf by the caller):
    each structure's least row vector, objective by objective, over the cells the front leaves open (for
    the visit order only: `mapper.strategies.front_pass`; it may be of lower precision). `open_rows`: called with
    each block's rows the front leaves open and their structures' numbers (`front_pass.OpenRows.add`).
    """
    live = np.zeros(total, dtype=bool)
    for first, rows in blocks:
        if stop is not None and stop():
            return None
        open_ = ~dominated_rows(rows, front)
        live[first : first + len(rows)] |= open_
        if open_floors is not None and open_.any():
            at = first + np.flatnonzero(open_)  # (one row per structure in a block: no index twice)
            open_floors[at] = np.minimum(open_floors[at], rows[open_])
        if open_rows is not None and open_.any():
            open_rows(first + np.flatnonzero(open_), rows[open_])
        if live.all() and open_floors is None and open_rows is None:  # the rest of the pass would not change that
            break
    return live


#: structures whose cells `FrontBounds` keeps (the look-ahead of `mapper.strategies.front_pass.AHEAD` and more)
KEPT_CELLS = 256


def grown_from(front: np.ndarray, earlier: np.ndarray) -> bool:
    """True when `front` dominates (within `RTOL`) every point of `earlier`, so whatever `earlier` dominates.

    A search's front only grows, so a cell an earlier front dominated need not be tested again
    (`FrontBounds` keeps such answers; a front that did not grow from the kept one is tested afresh)."""
    return front is earlier or len(earlier) == 0 or bool(dominated_rows(earlier, front).all())


class _Cells(NamedTuple):
    """A structure's cells as `FrontBounds` keeps them: the rows (cells x objectives), which are the cells' own
    vectors (None: all; else the others hold vectors `screened_by` dominates) and the front they were screened by."""

    rows: np.ndarray
    own: np.ndarray | None
    screened_by: np.ndarray


class FrontBounds:
    """Bound vectors of structures for several objectives, and the dominance test that bounds them out.

    Also one objective other than latency that the target bounds cell by cell (best-first): the front is then
    the best point found, and a structure is out when each of its cells' floors is no lower.
    `cells` False: the structure's single vector only, as before the cells (for comparisons).
    """

    def __init__(
        self,
        target: Target,
        problem: Problem,
        objectives: tuple[str, ...],
        *,
        cells: bool = True,
        latency: StructureBounds | None = None,
    ) -> None:
        self.objectives = objectives
        if latency is not None and latency.objective != "latency":
            raise ValueError(f"the latency bounds of a front are latency's, not {latency.objective!r}'s")
        # `latency`: the search's own latency bounds, shared (the clock they learn costs a cost report)
        self.latency = (latency or StructureBounds(target, problem, "latency")) if "latency" in objectives else None
        self.floor = np.array([objective_floor(problem, o) for o in objectives], dtype=np.float64)
        self._at = objectives.index("latency") if "latency" in objectives else -1
        self._problem = problem
        self._cells = target if cells and isinstance(target, FrontCellBounded) else None
        # (a runtime protocol check costs tens of microseconds: asked once, not per structure)
        self._screened = self._cells if isinstance(self._cells, FrontCellScreened) else None
        self._placed = self._cells if isinstance(self._cells, CellOfPoints) else None
        # floors of each point, beside its cell's (`PointFloored`: a point the front dominates on them is not scored);
        # two objectives only: with more, the test compares each point with every front point (`dominated_rows`),
        # which cost more than scoring them (a 3x13x31x31 conv on ascend-910b with latency, energy and footprint:
        # 11.4 s against 2.4 s without it, once by hand outside `bench/`)
        two = len(objectives) == 2
        self._floored = self._placed if two and isinstance(self._placed, PointFloored) else None
        # a target that floors its structures in one array (`StructureFloored`: Ascend) bounds one exactly only by
        # pricing its points, more than scoring its open cells costs: its cells, which carry their own latency
        # floors, are then lifted to the whole space's vector instead of the structure's (`cheap`)
        self._lift = not isinstance(target, StructureFloored)
        # each structure's cells: (the rows, which are the cells' own (None: all), the front they were screened by)
        self._kept: OrderedDict[tuple[tuple[str, Choice], ...], _Cells | None] = OrderedDict()
        # each structure's open cells: (the front, the structure's vector, which cells they leave open)
        self._live: OrderedDict[tuple[tuple[str, Choice], ...], tuple[np.ndarray, np.ndarray, np.ndarray]] = (
            OrderedDict()
        )

    @property
    def per_structure(self) -> bool:
        return self._cells is not None or (self.latency is not None and self.latency.per_structure)

    def out(self, fixed: dict[str, Choice], front: np.ndarray | None, vector: np.ndarray | None = None) -> bool:
        """True when `front` dominates every point of the structure: its vector, else each of its cells'.

        `vector`: the structure's bound vector when the caller has it already.
        """
        if front is None or len(front) == 0:
            return False
        vec = self(fixed) if vector is None else vector
        if FrontBounds.dominated(vec, front):
            return True
        if self._cells is None:
            return False
        if self._screened is not None and self._screened.structure_front_dominated(
            self._problem, dict(fixed), self.objectives, front
        ):
            return True  # every cell dominated (so lifted to `vec` too), told without the cells
        cells = self._cells_of(fixed, front)
        return cells is not None and not self._live_cells(fixed, cells, vec, front).any()

    @staticmethod
    def _key(fixed: dict[str, Choice]) -> tuple[tuple[str, Choice], ...]:
        """A structure's key in what is kept of it (`_cells_of`, `_live_cells`): its fixed choices by name."""
        return tuple(sorted(fixed.items(), key=lambda kv: kv[0]))

    def _cells_of(self, fixed: dict[str, Choice], front: np.ndarray) -> _Cells | None:
        """The target's cells of the structure (screened against `front` where the target can,
        `FrontCellScreened`), the last `KEPT_CELLS` structures' kept (`out` then `live_points` ask for them,
        and a visit after `Evaluator.score_ahead` asked for them too): cells screened against an earlier
        front are tested against a later one, which dominates each point of it (the front only grows)."""
        assert self._cells is not None
        key = self._key(fixed)
        if key in self._kept:
            return self._kept[key]
        cells: _Cells | None = None
        if self._screened is not None:
            got = self._screened.structure_front_cells_screened(self._problem, dict(fixed), self.objectives, front)
            cells = None if got is None else _Cells(got.cells, None if got.own.all() else got.own, front)
        else:
            rows = self._cells.structure_front_cells(self._problem, dict(fixed), self.objectives)
            cells = None if rows is None else _Cells(rows, None, front)
        self._kept[key] = cells
        if len(self._kept) > KEPT_CELLS:
            self._kept.popitem(last=False)
        return cells

    def _live_cells(self, fixed: dict[str, Choice], got: _Cells, vec: np.ndarray, front: np.ndarray) -> np.ndarray:
        """Which cells of `got` (lifted to the structure's vector `vec`) `front` leaves open, kept per structure like
        its cells. Every vector asked with is a bound of the structure's points, so the larger of two is one too;
        and a cell a front dominated stays dominated by every later front (the front only grows). So against a
        front grown from the kept one, only the cells left open are tested again, lifted to the larger of the
        two vectors; with the same front (object) and no higher vector, none. Otherwise the cells' own rows
        (`FrontCellScreened`: the others hold row vectors the screening front dominated) when `front` grew from
        the screening front, else all."""
        key = self._key(fixed)
        kept = self._live.get(key)
        cells = got.rows
        if kept is None or not grown_from(front, kept[0]):
            if got.own is not None and grown_from(front, got.screened_by):
                live = got.own.copy()
                at = np.flatnonzero(live)
                live[at] = ~dominated_rows(np.maximum(cells[at], vec), front)
            else:
                live = ~dominated_rows(np.maximum(cells, vec), front)
        else:
            if kept[0] is front and (vec <= kept[1]).all():
                return kept[2]
            vec = np.maximum(vec, kept[1])
            live = kept[2].copy()
            at = np.flatnonzero(live)
            live[at] = ~dominated_rows(np.maximum(cells[at], vec), front)
        self._live[key] = (front, np.array(vec, dtype=np.float64), live)
        if len(self._live) > KEPT_CELLS:
            self._live.popitem(last=False)
        return live

    def live_points(
        self, fixed: dict[str, Choice], front: np.ndarray | None, codes: dict[str, np.ndarray]
    ) -> np.ndarray | None:
        """Which points of the structure (`codes`) lie in a cell `front` does not dominate, and where the target
        floors points (`PointFloored`) are not dominated by it on those floors either; None: all of them.

        The others are each dominated by, or have the values of, a point of `front` (their cell's
        vector, or their own floors, bound them: `FrontCellBounded`), and so of every front that grows from it:
        scoring them cannot change the search's front. None when the target does not place points in cells.
        """
        if front is None or len(front) == 0 or self._placed is None:
            return None
        cells = self._cells_of(fixed, front)
        if cells is None:
            return None
        live = self._live_cells(fixed, cells, self.cheap(fixed), front)
        if live.all() and self._floored is None:
            return None
        if not live.any():  # (no point's cell needed)
            return np.zeros(len(next(iter(codes.values()))), dtype=bool)
        at = self._placed.structure_cell_of_points(self._problem, dict(fixed), codes, self.objectives)
        if at is None:
            return None
        points = live[at]
        if self._floored is not None:  # and of those, the points the front dominates on their own floors
            sel = np.flatnonzero(points)
            got = self._floored.point_floors(self._problem, {n: c[sel] for n, c in codes.items()}, self.objectives)
            if got:
                rows = with_point_floors(np.maximum(cells.rows[at[sel]], self.cheap(fixed)), got, self.objectives)
                points[sel] = ~dominated_rows(rows, front)
        return points

    def staircase_points(self, fixed: dict[str, Choice], codes: dict[str, np.ndarray]) -> np.ndarray | None:
        """Which points of the structure (`codes`) lie in its cells on the staircase of their rows: no other cell's
        row is at most theirs on every objective (one cell per distinct row). Where a structure's best points are
        likeliest: a visit with no front yet prices them first (`mapper.strategies.first_visit`). None when the
        target does not place points in cells or has no cells for the structure."""
        if self._placed is None or self._cells is None:
            return None
        rows = self._cells.structure_front_cells(self._problem, dict(fixed), self.objectives)
        if rows is None:
            return None
        at = self._placed.structure_cell_of_points(self._problem, dict(fixed), codes, self.objectives)
        if at is None:
            return None
        rows = np.maximum(rows, self.cheap(fixed))
        stairs = np.zeros(len(rows), dtype=bool)
        stairs[pareto_front(rows)] = True  # (rows with a non-finite entry hold no feasible point: never on it)
        return stairs[at]

    @property
    def source(self) -> str:
        lat = f"latency: {self.latency.source}; " if self.latency is not None else ""
        cells = "; within a structure, the target's cells (structure_front_cells)" if self._cells is not None else ""
        return f"{lat}offchip_bytes: the problem's compulsory bytes; other objectives: 0{cells}"

    def learn_clock(self, point: dict[str, Choice]) -> None:
        if self.latency is not None:
            self.latency.learn_clock(point)

    def whole(self) -> np.ndarray:
        """The bound vector of any structure (the whole space's)."""
        return self.with_latency(self.latency.whole() if self.latency is not None else 0.0)

    def __call__(self, fixed: dict[str, Choice]) -> np.ndarray:
        """The bound vector of the structure with these fixed choices."""
        return self.with_latency(self.latency(fixed) if self.latency is not None else 0.0)

    def cheap(self, fixed: dict[str, Choice]) -> np.ndarray:
        """A bound vector of the structure that costs no pricing of its points: its own (`__call__`), or the whole
        space's where the target bounds a structure exactly only by pricing it (`StructureFloored`)."""
        return self(fixed) if self._lift else self.whole()

    def with_latency(self, latency: float) -> np.ndarray:
        out = self.floor.copy()
        if self._at >= 0:
            out[self._at] = latency
        return out

    @staticmethod
    def dominated(bound: np.ndarray, front: np.ndarray | None) -> bool:
        """True when a row of `front` (points x objectives) is no worse than `bound` everywhere (beyond `RTOL`)."""
        return front is not None and len(front) > 0 and bool(np.any(np.all(front <= bound * (1 + RTOL), axis=1)))
