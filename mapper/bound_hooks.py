"""The optional target hooks that bounds and best-first search use (`mapper.bounds`, `mapper.strategies`).

Each is a protocol a target may implement; the mapper asks `isinstance` once and uses it where it
helps. Kept apart from `costmodels.structure_bound` so that adding one changes no family's cost-model
version (`mapper.keys.cost_model_version`), and re-exported by `mapper.bounds`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

import numpy as np

from costmodels.dominance import ScreenedCells
from costmodels.protocol import Choice
from workload.problem import Problem


@runtime_checkable
class StructureFloored(Protocol):
    """Optional: a target that floors the latency of every structure of some parameters in one array.

    Best-first search (`mapper.strategies.bestfirst`) orders the structures by these floors and
    asks for a structure's own bound (`StructureBounded.structure_bound`) only when its floor is the
    lowest key left, so a family whose exact bound is costly (Ascend: a structure's optimum) bounds
    few structures exactly. Kept here rather than in `costmodels.structure_bound` so that adding it
    changes no family's cost-model version (`mapper.keys.cost_model_version`).

    Contract: `structure_floors(problem, names)` has the shape of the named parameters' choices (C
    order, the choices in the space's order); its entry for a combination is at most the target's
    `structure_bound` of those fixed choices (so no feasible point with them has a lower latency, in
    seconds). That it is at most the exact bound, and not merely admissible, is what keeps
    best-first's visit order the order of the exact bounds.
    """

    def structure_floors(self, problem: Problem, names: tuple[str, ...]) -> np.ndarray: ...


@runtime_checkable
class FrontCellBounded(Protocol):
    """Optional: a target that bounds several objectives over the cells of one structure of its space.

    Contract: every feasible point of the structure (its choices agree with `fixed_choices`) is, on
    every objective of `objectives`, no better than the vector of at least one returned row (cells x
    objectives, in the order of `objectives`). None: no cells for these objectives.
    """

    def structure_front_cells(
        self, problem: Problem, fixed_choices: dict[str, Choice], objectives: tuple[str, ...]
    ) -> np.ndarray | None: ...


@runtime_checkable
class FrontCellScreened(Protocol):
    """Optional beside `FrontCellBounded`: a structure's cells screened against a front, for less work.

    Contract: `structure_front_cells_screened` gives the rows of `structure_front_cells` for the same
    arguments, in the same order, except that a row `front` dominates (within `RTOL`) may hold a lower
    vector that `front` still dominates. Each row still bounds its cell's points, and a dominance test
    of the rows against `front`, or against a front that dominates each of its points (the search's
    front only grows), has the outcome of the cells' own. `front` None or empty: the cells themselves.
    Beside the rows (`ScreenedCells.own`): which of them are the cells' own vectors; every other row
    `front` dominates, so a test against `front` or a front grown from it need not look at it.
    `structure_front_dominated` is True only when `front` dominates every cell of the structure (it may
    say False of some such structures: the cells are then tested).
    """

    def structure_front_cells_screened(
        self, problem: Problem, fixed_choices: dict[str, Choice], objectives: tuple[str, ...], front: np.ndarray | None
    ) -> ScreenedCells | None: ...

    def structure_front_dominated(
        self, problem: Problem, fixed_choices: dict[str, Choice], objectives: tuple[str, ...], front: np.ndarray
    ) -> bool: ...


@runtime_checkable
class CellOfPoints(Protocol):
    """Optional, beside `FrontCellBounded`: which of a structure's cells each of its points is in.

    Contract: for the points of a structure (code columns, every point's choices agreeing with
    `fixed_choices`), the row of `structure_front_cells(problem, fixed_choices, objectives)` whose
    vector bounds that point. None: not known for this structure or these objectives (its points are
    then all scored).
    """

    def structure_cell_of_points(
        self,
        problem: Problem,
        fixed_choices: dict[str, Choice],
        codes: dict[str, np.ndarray],
        objectives: tuple[str, ...] = (),
    ) -> np.ndarray | None: ...


@runtime_checkable
class PointFloored(Protocol):
    """Optional: floors of some objectives point by point, far cheaper than pricing the points.

    Contract: for points given as code columns (every parameter of the problem's space), a dict from some of
    `objectives` to one entry per point, no greater than that point's value of the objective when it is
    feasible (an infeasible point's value is ``inf``, above any entry). Objectives the target cannot floor
    cheaply are absent; None: none. Best-first's cell rounds leave out the points of an open cell that the
    front dominates with these entries in place of the cell's (`mapper.strategies.cell_rounds`).
    """

    def point_floors(
        self, problem: Problem, codes: dict[str, np.ndarray], objectives: tuple[str, ...]
    ) -> dict[str, np.ndarray] | None: ...

    def point_floor_names(self, problem: Problem, objectives: tuple[str, ...]) -> tuple[str, ...] | None:
        """The parameters whose codes `point_floors` reads (None: it may read every one): it takes columns of those
        alone, and points that agree on them have the same floors (the cell rounds then floor each structure's
        sub-space once, where those are all inner parameters)."""
        ...


@runtime_checkable
class FrontCellTable(Protocol):
    """Optional, beside `FrontCellBounded` and `CellOfPoints`: the cells of every structure in one array.

    Contract: an array (structures x cells x objectives), structures numbered in C order over the choices
    of `names`, whose entry ``[s]`` is `structure_front_cells` of structure ``s`` (every name fixed) for
    `objectives` (``inf`` rows: cells with no feasible point). None: not available for these names or
    objectives. Best-first prices cells rather than structures with it (`mapper.strategies.cell_rounds`).
    """

    def structure_front_cell_table(
        self, problem: Problem, names: tuple[str, ...], objectives: tuple[str, ...]
    ) -> np.ndarray | None: ...


@runtime_checkable
class FrontCellBlocks(Protocol):
    """Optional: a target that gives the cells (`FrontCellBounded`) of every structure, a run at a time.

    Contract: structures are numbered in C order over the choices of `names`; each yielded
    ``(first, rows)`` holds, for structures ``first .. first + len(rows) - 1``, one cell's bound
    vector each (rows x objectives, in the order of `objectives`), and every feasible point of a
    structure is, on every objective, no better than the row of at least one of its cells (a row
    with ``inf``: a cell the structure does not have) or, when `front` is given, dominated by (or
    equal to) a point of `front` (within `RTOL`): the target may leave out the rows of cells the
    front dominates, and every row of a structure that repeats another point for point (`StructureRepeats`:
    the pass bounds the structure it repeats, which has each of its points' values). With `live` (a mask
    over the structures, with `front`), only the live structures' outcome is asked: the target may leave
    out the rows of the others, and a live structure's rows need only show whether it is live (one row
    the front does not dominate suffices: Trainium gives its first open case). A block may have no row: a target
    yields one where a long stretch of its work leaves no row open, so that the pass may stop between blocks.
    The rows of a pass without `live` are kept as floors of the live structures' points
    (`mapper.strategies.front_pass.OpenRows`).
    None: no cells for these names or objectives.
    """

    def structure_front_cell_blocks(
        self,
        problem: Problem,
        names: tuple[str, ...],
        objectives: tuple[str, ...],
        front: np.ndarray | None = None,
        live: np.ndarray | None = None,
    ) -> Iterator[tuple[int, np.ndarray]] | None: ...


@runtime_checkable
class StructureRepeats(Protocol):
    """Optional beside `FrontCellBlocks`: which structures repeat another one point for point.

    Contract: a flat mask over the structures (C order over `names`' choices, as `FrontCellBlocks` numbers them;
    None: not known); a structure marked has, for every choice of the other parameters, a point with every
    objective's value equal to the point with the same choices of a structure not marked (Trainium: a tile
    cap that gives an earlier cap's tile). `FrontCellBlocks` may leave such a structure's rows out of a pass
    given a front: whatever the front does to the structure it repeats, it does to its points.
    """

    def structure_repeats(self, problem: Problem, names: tuple[str, ...]) -> np.ndarray | None: ...


@runtime_checkable
class StructureObjectiveFloors(Protocol):
    """Optional: a target that floors an objective other than latency for every structure in one array.

    Contract: the shape of `names`' choices (C order, as `FrontCellBlocks` numbers the structures);
    no feasible point of a structure has a lower value of `objective` than its entry. None: not known.
    Best-first visits a few structures along the front's likely course by these floors before its
    first dominance pass (`mapper.strategies.front_pass.seed_structures`).
    """

    def structure_objective_floors(
        self, problem: Problem, names: tuple[str, ...], objective: str
    ) -> np.ndarray | None: ...
