"""Best-first over cells: every structure's open cells priced a round at a time (several objectives, issue #12).

Where a target gives the cells of every structure in one array (`mapper.bounds.FrontCellTable`: Ascend)
and says which cell each point lies in (`CellOfPoints`), best-first with two objectives need not
visit the structures one by one. A visit prices the points of one structure's open cells: a few thousand
points and a few dozen numpy calls, so a search that must look into hundreds of structures spent most of
its time on the calls (ascend-a5, Llama-7B attn.scores, latency + footprint: 188 visits, one
`score_codes` call each, about a third of the search; profiled once outside `bench/`). Here instead,
after best-first's first visit (the structure of least latency over its cells, `latency_floors`, so the target's
structure floors are not asked for: its front may end the search at once):

1. Every cell's row is lifted to the whole space's bound vector (`FrontBounds.whole`); a cell with a
   non-finite entry holds no feasible point and is closed.
2. A round takes the cells not yet priced that the front found so far does not dominate (within
   `RTOL`): first those on the staircase of their rows (no other such cell's row is at most theirs on
   every objective: the front's likeliest places, so it spans its whole length early), then the others
   by ascending latency floor (by the first objective without latency), until `FIRST_ROUND_POINTS`
   points in the first round and twice as many in each next, up to `ROUND_POINTS`; their points are
   priced in one `Target.score_codes` call and the front grows by them. Where the target floors single points
   cheaply (`mapper.bounds.PointFloored`: Ascend's footprint), a point of those cells is priced only when the
   front does not dominate its cell's row with the point's own floors in place of the row's where higher
   (`_point_floored`; on the Llama-7B attn.scores layer with latency + footprint, 94% of the points of the
   open cells, counted once by hand outside `bench/`). Of a round's points, those a
   point of the grown front strictly beats are dropped at once but for each structure's first (and first
   feasible) point: they can join no front (`round_fronts.grown`).
3. The rounds end when every cell is priced or dominated.

Why the result is the exact front over the space: every point lies in one cell of its structure
(`CellOfPoints`), whose row bounds it on every objective (`FrontCellBounded`), as its own floors do
(`PointFloored`). A cell left unpriced was dominated by the front at some round, as was a point left out of a
priced cell (with its floors), and the front only grows, so each such point is dominated by, or has the
values of, a point of the final front. Every other point was priced, and its structure's sub-front
(`Evaluator.priced`) enters the merged front.

A structure with a point priced counts as scored (its other points, in dominated cells, as left out);
one with none as pruned by bound. When the budget or a cancel ends the rounds first, a structure with a
cell still open is unexplored, and the points priced of it are left out of the result: the certificate
covers what was done, and its ``front_gap`` says how close the front left is (`front_gap`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection

import numpy as np

from costmodels.dominance import dominated_columns, dominated_rows, finite_rows
from costmodels.protocol import BatchScore, Choice, Param, Target
from mapper.bounds import CellOfPoints, FrontBounds, FrontCellTable, PointFloored, with_point_floors
from mapper.enumerate import scored_values
from mapper.pareto import pareto_front, row_gaps
from mapper.settings import StopReason
from mapper.strategies.cell_columns import lifted
from mapper.strategies.objective import Evaluator, Outcome
from mapper.strategies.round_fronts import fronts_by_owner, grown
from mapper.watch import Watch
from workload.problem import Problem

#: points priced per round: the calls' cost is then small beside the points' (about 6 ms a round on an Ascend
#: layer), and a round prices few points the next round's front would have left out
ROUND_POINTS = 1 << 16
#: points priced in the first round, twice as many in each next one up to `ROUND_POINTS`: the first rounds' front
#: leaves out most cells where it is narrow (one point with off-chip bytes), so they price little
FIRST_ROUND_POINTS = 1 << 12


class CellRounds:
    """Rounds of pricing over every structure's open cells (see the module docstring).

    `rounds`, `cells`, `points`, `seconds`: what `run` did, for the result's notes; `priced`: which cells (over
    structure x cell) it priced.
    """

    def __init__(
        self,
        ev: Evaluator,
        structural: tuple[Param, ...],
        front_bounds: FrontBounds,
        table: np.ndarray,
        cell_of: np.ndarray,
        visited: Collection[tuple[Choice, ...]] = (),
    ) -> None:
        self.ev, self.structural = ev, structural
        self.shape = tuple(len(p.choices) for p in structural)
        self.cells_per = np.shape(table)[1]
        # each objective's column over structure x cell lifted to the whole space's bound, the cells open (not yet
        # priced nor dominated), every structure's points by cell and where each cell's run starts (`lifted`)
        self.columns, self.open, self.by_cell, self.starts = lifted(table, front_bounds.whole(), cell_of)
        self.priced = np.zeros(self.open.size, dtype=bool)  # the cells whose points were priced
        self.at = ev.objectives.index("latency") if "latency" in ev.objectives else 0
        # every structure's inner code columns (the same pattern, `Evaluator.structure_codes`) and their names
        self.pattern = ev.structure_codes(self.fixed(0))
        self.inner = [p.name for p in ev.space.params if p.name in ev.inner]
        self.rounds = self.cells = self.points = 0
        # points of open cells left out by their own floors (`PointFloored`), and the target's hook for them
        self.floored_out = 0
        self.point_floors = ev.target.point_floors if isinstance(ev.target, PointFloored) else None
        self._inner_floors: dict[str, np.ndarray] | None = None  # (`inner_floors`: {} where there are none)
        self.seconds = 0.0
        self.front: np.ndarray | None = None  # the rounds' own front when they ended (`front_gap`)
        # structures visited before the rounds (settled already): their cells are closed, as priced
        self.visited = np.zeros(self.open.size // self.cells_per, dtype=bool)
        for key in visited:
            codes = [p.choices.index(v) for p, v in zip(structural, key, strict=True)]
            self.visited[int(np.ravel_multi_index(codes, self.shape))] = True
        self.open.reshape(-1, self.cells_per)[self.visited] = False

    @staticmethod
    def of(
        target: Target,
        problem: Problem,
        ev: Evaluator,
        structural: tuple[Param, ...],
        front_bounds: FrontBounds,
        visited: Collection[tuple[Choice, ...]] = (),
    ) -> CellRounds | None:
        """The rounds for this search, after the structures `visited` (their choices in `structural` order; settled
        in `ev` already, and the front of `ev` is theirs); None where the target gives no cell table or cells of
        points, and for other than two objectives: with three, each round tests its points against every
        point of the front (`strictly_dominated`), where two take a sort and two binary searches (a
        3x13x31x31 conv on ascend-910b with latency, energy and footprint: 30 s in rounds against 14 s
        visiting structures, once by hand outside `bench/`)."""
        table = _cell_table(target, problem, structural, ev.objectives)
        if table is None or not isinstance(target, CellOfPoints):
            return None
        fixed = {p.name: p.choices[0] for p in structural}  # (the cells of points are every structure's: the contract)
        first = target.structure_cell_of_points(problem, fixed, ev.structure_codes(fixed), ev.objectives)
        if first is None:
            return None
        return CellRounds(ev, structural, front_bounds, table, np.asarray(first), visited)

    @staticmethod
    def latency_floors(
        target: Target, problem: Problem, structural: tuple[Param, ...], objectives: tuple[str, ...]
    ) -> np.ndarray | None:
        """Each structure's least latency over its cells (seconds, at least 0; structures in C order), from the table
        the rounds read (`FrontCellTable`): a floor of the structure's latency, to pick the first visit by. None where
        the rounds do not apply (`of`: two objectives, a cell table and the cells of points; latency among them)."""
        table = _cell_table(target, problem, structural, objectives) if "latency" in objectives else None
        if table is None or not isinstance(target, CellOfPoints):
            return None
        return np.maximum(np.asarray(table[:, :, objectives.index("latency")], dtype=np.float64).min(axis=1), 0.0)

    def rows(self, cells: np.ndarray) -> np.ndarray:
        """The rows (cells x objectives) of these cells (numbers over structure x cell)."""
        return np.stack([c[cells] for c in self.columns], axis=1)

    @property
    def total_cells(self) -> int:
        return int(self.open.size)

    def reporter(self, watch: Watch) -> Callable[[int], None]:
        """Progress through `watch`: cells priced or dominated, of every cell."""
        return lambda cells: watch.report(cells, self.total_cells, None, unit="cells")

    def fixed(self, s: int) -> dict[str, Choice]:
        codes = np.unravel_index(s, self.shape)
        return {p.name: p.choices[int(c)] for p, c in zip(self.structural, codes, strict=True)}

    def _pick(self, front: np.ndarray | None) -> np.ndarray:
        """The next round's cells (numbers over structure x cell), after closing those `front` dominates."""
        if front is not None and len(front) and not self.rounds:  # most cells open: tested in place, not gathered
            self.open &= ~dominated_columns(self.columns[0], self.columns[1], front)  # (two objectives: `of`)
        cand = np.flatnonzero(self.open)
        if front is not None and len(front) and self.rounds and cand.size:
            out = dominated_columns(self.columns[0][cand], self.columns[1][cand], front)
            self.open[cand[out]] = False
            cand = cand[~out]
        if not cand.size:
            return cand
        rows = self.rows(cand)
        first = np.zeros(cand.size, dtype=bool)
        first[pareto_front(rows)] = True  # the staircase first, then by latency floor
        order = np.lexsort((rows[:, self.at], ~first))
        counts = np.diff(self.starts)[cand[order] % self.cells_per]
        size = min(ROUND_POINTS, FIRST_ROUND_POINTS << self.rounds)
        take = int(np.searchsorted(np.cumsum(counts), size)) + 1
        return cand[order[:take]]

    def run(
        self, stop: Callable[[], StopReason | None], progress: Callable[[int], None] | None = None
    ) -> tuple[list[tuple[Choice, ...]], list[tuple[Choice, ...]], StopReason, float | None]:
        """Price rounds until every cell is priced or dominated, or `stop` says why not.

        Returns the structures scored and those pruned by bound (keys: their choices), why the rounds
        ended (``space-exhausted`` when done) and, when they did not, the least latency row left open.
        """
        ev, per = self.ev, self.cells_per
        pattern, inner = self.pattern, self.inner
        names = [p.name for p in self.structural]
        # what is kept of each round's points: their structure, number in its sub-space, feasibility, values
        kept: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        priced = np.zeros(self.open.size // per, dtype=np.int64)  # points priced per structure
        front = self.ev.front_values  # the visited structures' (`of`)
        reason: StopReason | None = None
        t0 = time.perf_counter()
        while True:
            picked = self._pick(front)
            if not picked.size:
                break
            reason = stop() if self.rounds or self.visited.any() else None  # (a visit or a round first)
            if reason is not None:
                break
            structures, cells = picked // per, picked % per
            lo, hi = self.starts[cells], self.starts[cells + 1]
            idx = np.concatenate([self.by_cell[a:b] for a, b in zip(lo.tolist(), hi.tolist(), strict=True)])
            owner = np.repeat(structures, hi - lo)
            # points the front dominates on their own floors are left out: before their codes are built where the
            # floors read inner parameters alone (`inner_floors`), else from their codes
            floored = front if front is not None and len(front) else None
            early = floored is not None and self.inner_floors() is not None
            if floored is not None and early:
                cut = self._point_floored(None, idx, np.repeat(picked, hi - lo), floored)
                if cut is not None:
                    idx, owner = idx[cut], owner[cut]
            codes = {n: np.take(pattern[n], idx) for n in inner}
            codes.update(zip(names, np.unravel_index(owner, self.shape), strict=True))
            codes = {p.name: codes[p.name] for p in ev.space.params}
            if floored is not None and not early:
                cut = self._point_floored(codes, idx, np.repeat(picked, hi - lo), floored)
                if cut is not None:
                    idx, owner, codes = idx[cut], owner[cut], {n: c[cut] for n, c in codes.items()}
            if idx.size:
                score = ev.target.score_codes(ev.problem, codes)
                feasible = np.asarray(score.feasible, dtype=bool)
                values = scored_values(score, ev.objectives)
                front, keep = grown(front, values, owner, self.at)
                kept.append((owner[keep], idx[keep], feasible[keep], values[keep]))
                priced += np.bincount(owner, minlength=priced.size)
            self.open[picked] = False
            self.priced[picked] = True
            self.rounds, self.cells, self.points = self.rounds + 1, self.cells + picked.size, self.points + idx.size
            if progress is not None:  # cells priced or dominated so far, of `total_cells`
                progress(self.total_cells - int(self.open.sum()))
        self.seconds = time.perf_counter() - t0
        self.front = front
        return self._settle(kept, priced, reason, front)

    def _settle(
        self,
        kept: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
        priced: np.ndarray,
        reason: StopReason | None,
        front: np.ndarray | None,
    ) -> tuple[list[tuple[Choice, ...]], list[tuple[Choice, ...]], StopReason, float | None]:
        """Each structure's outcome from its kept points (`Evaluator.priced`, `settle`), in structure order."""
        ev, per = self.ev, self.cells_per
        # a structure with a cell still open: unexplored (only when stopped)
        left = np.asarray(self.open.reshape(-1, per).any(axis=1), dtype=bool)
        owner, idx, feasible, values = (np.concatenate(col) for col in zip(*kept, strict=True)) if kept else _none(ev)
        if front is not None and len(owner):  # the points the final front beats: only their structures' outcomes
            _, keep = grown(front, values, owner, self.at, grow=False)
            owner, idx, feasible, values = owner[keep], idx[keep], feasible[keep], values[keep]
        order = np.lexsort((idx, owner))
        owner, idx, feasible, values = owner[order], idx[order], feasible[order], values[order]
        runs = np.searchsorted(owner, np.arange(left.size + 1))
        on = fronts_by_owner(owner, values)  # each structure's own front, in its order (`Evaluator.priced`'s)
        on_runs = np.searchsorted(owner[on], np.arange(left.size + 1))
        on_values = values[on].tolist()
        pattern = self.pattern
        choices = {p.name: p.choices for p in ev.space.params}
        scored, pruned = [], []
        for s in range(left.size):
            if left[s] or self.visited[s]:
                continue
            fixed = self.fixed(s)
            key = tuple(fixed.values())
            if not priced[s]:
                pruned.append(key)
                continue
            a, b = int(runs[s]), int(runs[s + 1])
            left_out = ev.inner_size - int(priced[s])
            ev.cells_left_out += left_out
            scored.append(key)
            if on_runs[s + 1] > on_runs[s]:  # a feasible point kept: its front as `priced` finds it, without its calls
                sub = [
                    ({n: fixed[n] if n in fixed else c[int(pattern[n][idx[j]])] for n, c in choices.items()},
                     tuple(on_values[k]))
                    for k, j in enumerate(on[on_runs[s] : on_runs[s + 1]].tolist(), start=int(on_runs[s]))
                ]  # fmt: skip
                ev.scored += int(priced[s])
                ev.settle(fixed, Outcome(sub[0][0], sub[0][1], front=sub), merge=False)
                continue
            codes = ev.structure_codes(fixed)
            cols = {n: np.take(pattern[n], idx[a:b]) if n in ev.inner else codes[n][: b - a] for n in codes}
            objs = {o: values[a:b, j] for j, o in enumerate(ev.objectives)}
            ev.scored += int(priced[s]) - (b - a)  # (`priced` counts the points it is given: the kept ones)
            outcome = ev.priced(fixed, cols, left_out, BatchScore(feasible=feasible[a:b], objectives=objs))
            ev.settle(fixed, outcome, merge=False)
        if front is not None and len(owner):  # the front of every settled outcome's front, merged once
            ev.grow_front(values[finite_rows(values) & ~left[owner]])
        rest = self.columns[self.at][self.open] if reason is not None else np.zeros(0)
        return scored, pruned, reason or "space-exhausted", float(rest.min()) if rest.size else None

    def front_gap(self, result: np.ndarray | None, decided: Collection[tuple[Choice, ...]] = ()) -> float | None:
        """How close `result` (the search's front: the structures finished) is proven to the exact front when the rounds
        ended first (`mapper.pareto.row_gaps`: every point of the space has a point of `result` at most 1 + gap times
        it on both objectives). The larger of two admissible gaps: to the rows of the cells still open (each bounds
        its points), and to the rounds' own front (it holds the points priced of the structures left unexplored,
        which the result leaves out). Every other point is in a cell, or was left out on its own floors, that the
        rounds' front dominated (within `RTOL`) when it was closed, or was priced and is dominated by that front;
        the front only grows, so each is dominated by a point of it. 0 when nothing is open and the result holds
        the rounds' front; None before `run`, with no result front, or where a cell's floor is 0 and the front's
        is not (no bound). `decided` (the structures scored or left out, `LivePass.front_gap`'s) is not read: the
        cells still open are those of the structures undecided."""
        if self.front is None and not self.rounds:
            return None
        if result is None or not len(result):
            return None
        rows = self.rows(np.flatnonzero(self.open))
        if self.front is not None and len(self.front):
            rows = np.concatenate([rows, self.front])
        if not len(rows):
            return 0.0
        gap = float(row_gaps(result, np.maximum(rows, 0.0)).max())
        return gap if np.isfinite(gap) else None

    def inner_floors(self) -> dict[str, np.ndarray] | None:
        """The target's floors of each point of a structure's sub-space (`PointFloored`), where they read inner
        parameters alone (`point_floor_names`): the same in every structure, so found once per search. None
        otherwise (each round's points are then floored with their codes)."""
        target, objectives = self.ev.target, self.ev.objectives
        if self._inner_floors is None and self.point_floors is not None and isinstance(target, PointFloored):
            names = target.point_floor_names(self.ev.problem, objectives)
            got = None
            if names is not None and set(names) <= set(self.inner):
                got = self.point_floors(self.ev.problem, {n: self.pattern[n] for n in names}, objectives)
            self._inner_floors = got or {}
        return self._inner_floors or None

    def _point_floored(
        self, codes: dict[str, np.ndarray] | None, idx: np.ndarray, cell: np.ndarray, front: np.ndarray
    ) -> np.ndarray | None:
        """Which of a round's points (`idx`: their numbers in their structures' sub-spaces; `codes`: their code columns,
        None where `inner_floors` floors them) to price (None: all): those whose cell's row, with the target's own
        floors of each point in place of the row's where higher (`PointFloored`), the front does not dominate (within
        `RTOL`, as the cells are closed: a point left out is dominated by, or has the values of, a front point)."""
        if self.point_floors is None:
            return None
        inner = self.inner_floors()
        got: dict[str, np.ndarray] | None
        if codes is None and inner is not None:
            got = {o: np.take(f, idx) for o, f in inner.items()}
        else:
            got = self.point_floors(self.ev.problem, codes or {}, self.ev.objectives)
        if not got:
            return None
        cut = ~dominated_rows(with_point_floors(self.rows(cell), got, self.ev.objectives), front)
        self.floored_out += int(cut.size - np.count_nonzero(cut))
        return cut

    def note(self) -> str:
        """What the rounds did, for the result's notes."""
        floored = (
            f" ({self.floored_out:,} more points of those cells left out: the front dominated them on their own floors)"
            if self.floored_out
            else ""
        )
        return (
            f"the open cells of every structure priced in {self.rounds:,} rounds: {self.points:,} points of "
            f"{self.cells:,} cells{floored}, the rest of the {self.open.size:,} cells dominated by the front or "
            f"without a feasible point ({self.seconds:.3f} s)"
        )


def _cell_table(
    target: Target, problem: Problem, structural: tuple[Param, ...], objectives: tuple[str, ...]
) -> np.ndarray | None:
    """The target's cells of every structure (`FrontCellTable`) where the rounds apply: two objectives, a table of
    every structure of `structural` (three objectives and more: each round's points against every front point)."""
    if len(objectives) != 2 or not isinstance(target, FrontCellTable):
        return None
    table = target.structure_front_cell_table(problem, tuple(p.name for p in structural), objectives)
    if table is None or table.shape[0] != math.prod(len(p.choices) for p in structural) or not table.size:
        return None
    return table


def _none(ev: Evaluator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    empty = np.zeros(0, dtype=np.intp)
    return empty, empty, empty.astype(bool), np.zeros((0, len(ev.objectives)))
