"""Best-first branch and bound over structures: the lowest bound first, stop when the next cannot win.

The space is split into structures as an Optuna study splits it (`split_params`: the structural
parameters' choices fixed, the inner sub-space scored whole with numpy). Every structure's
admissible latency bound (`mapper.bounds.StructureBounds`, the family's ``structure_bound``) is
computed first, one call per structure (the families bound one structure per call); the
structures are then visited in ascending bound order, ties in the space's numbering (the
structural choices in C order), so the order depends on the space alone. A target that also floors
every structure in one array (`mapper.bounds.StructureFloored`: Ascend, whose exact bound costs
about what scoring the structure does) gets the same order with an exact bound only for the
structures whose floor comes first (`mapper.strategies.floored`; with several objectives the visits
follow the floors: a structure whose cells' floors the front dominates when its floor comes first,
`FrontBounds.out`, is left out without its exact bound, Ascend flooring every objective,
`structure_front_cells`, and any other is visited at once, without its exact bound: that prices
every point of the structure, and the visit scores only those of the cells the front leaves open,
`FrontBounds.live_points`; with two objectives, where the target gives every structure's cells in one
array, `FrontCellTable`, the structures after the first are priced cell by cell in rounds instead,
`mapper.strategies.cell_rounds`). Each visited structure's sub-space is scored exactly (`Evaluator.visit`).
The search stops when the next structure's bound
is not below the best found (``bound * (1 + RTOL) >= best``, `StructureBounds.bounded_out`): the
bounds are sorted, so no structure left can hold a better point and the best is optimal over the
target's space (stop reason ``lower-bound``; every structure left is pruned by bound). Every
structure is visited with its bound below the best found at that moment, by construction.

When the budget or a cancel ends the search first, the certificate is exact without another sweep: the
structures left are unexplored and the lowest of their bounds is the next one in the order, so the best is within
``best / next_bound - 1`` of the optimum. The bounding pass itself checks the budget and the cancel every
`BOUND_BATCH` structures: cut short, the structures not yet bounded keep the generic bound (the roofline,
admissible for all), one structure is scored and the certificate's remaining bound is that generic bound.

Several objectives: the structure's bound vector is its latency bound beside floors that hold for the whole
problem (`mapper.bounds.FrontBounds`, and the target's cells); once the merged front dominates the next
structure's vector it dominates every later one, and the front is the exact Pareto front over the space (weak
dominance); cut short, the certificate's ``front_gap`` says how close it is (`LivePass.front_gap`,
`CellRounds.front_gap`). One objective other than latency that the target bounds cell by cell goes the same way,
the best point its one-point front.

Warm starts (one objective, latency): the target's rule-of-thumb structures are scored first, each only while its
bound is below the best found (a target's extra warm structures end at the deadline, `cancel.past_deadline`). When
the best then reaches the whole problem's roofline (`StructureBounds.whole`, admissible for every structure) the
search stops proven (``lower-bound``) without bounding the other structures: on Ascend that is most layers, where
the bounds of every structure cost more than the search. Otherwise the ordered pass follows, skipping the
structures already scored (an incumbent prunes no structure whose bound is below the optimum: those are scored
whatever the start). No clock decides anything but the deadline: the same request gives the same answer on any
machine when it stops for a reason other than its budget.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator

import numpy as np

from costmodels.cancel import Cancelled, cancellable
from costmodels.protocol import Choice, SearchSpace, Target
from costmodels.structure_bound import StructureBulkBounded
from mapper.bounds import RTOL, FrontBounds, FrontCellBlocks, StructureBounds, bounded_by_cells
from mapper.certificate import least_front_gap, space_text
from mapper.planning import inner_size
from mapper.result import Certificate, TrialCounts, ViolationCount
from mapper.settings import SearchSettings, StopReason
from mapper.strategies.base import Searched, Strategy, certificate_notes
from mapper.strategies.cell_rounds import CellRounds
from mapper.strategies.encoding import Encoding, split_params
from mapper.strategies.floored import Floored, FloorTable, floor_params
from mapper.strategies.front_pass import LivePass, ascending, bulk_visits, objective_floors, repeated
from mapper.strategies.objective import CHECKED, Evaluator
from mapper.watch import Watch
from workload.problem import Problem

BOUND_BATCH = 64  #: structures bounded between two checks of the deadline and the cancel


def structure_order(
    bounds: StructureBounds,
    names: tuple[str, ...],
    keys: list[tuple[Choice, ...]],
    stop: Callable[[], bool] | None = None,
) -> tuple[np.ndarray, int]:
    """Every structure's bound (seconds) in the order of `keys`, and how many were bounded.

    `stop` is asked every `BOUND_BATCH` structures; once it says so the rest keep bound 0, which the
    search lifts to the generic bound (`StructureBounds.whole`, admissible for every structure).
    The visit order is ``np.argsort(bounds, kind="stable")``: ties in the space's numbering.
    """
    out = np.zeros(len(keys), dtype=np.float64)
    for i, k in enumerate(keys):
        if stop is not None and i % BOUND_BATCH == 0 and i and stop():
            return out, i
        out[i] = bounds(dict(zip(names, k, strict=True)))
    return out, len(keys)


def bulk_params(problem: Problem, target: Target, space: SearchSpace) -> tuple[str, ...] | None:
    """The target's structural parameters when it bounds all their structures at once, else None.

    None also when the names are not a proper, non-empty subset of the space's parameters (a space
    of one parameter, or a problem the target cannot run): the per-structure path then splits it.
    """
    if not isinstance(target, StructureBulkBounded) or target.supports(problem):
        return None
    names = tuple(target.structural_params(problem))
    have = {p.name for p in space.params}
    if not names or not set(names) < have:
        return None
    return names


class BestFirst(Strategy):
    """Best-first branch and bound over the structures of the space (see the module docstring).

    `inner_points`: the sub-space scored per structure (None: the settings', else `mapper.planning.inner_size`'s).
    `floors`: order by the target's latency floors (`StructureFloored`) and bound a structure
    exactly only when its floor comes first (`Floored`); False: every structure bounded exactly first.
    """

    name = "bestfirst"

    def __init__(self, inner_points: int | None = None, *, floors: bool = True) -> None:
        self.inner_points = inner_points
        self.floors = floors
        #: seconds spent computing every structure's bound in the last run (the cost of the ordering)
        self.bound_seconds = 0.0

    def run(
        self,
        problem: Problem,
        target: Target,
        space: SearchSpace,
        settings: SearchSettings,
        *,
        deadline: float,
        watch: Watch | None = None,
    ) -> Searched:
        """Visit the structures by ascending bound until the next bound cannot beat the best, the budget or a cancel."""
        inner_points = self.inner_points if self.inner_points is not None else inner_size(settings, target)
        # the visit order: latency bounds when latency is asked (the only objective with per-structure bounds)
        objective = "latency" if "latency" in settings.objectives else settings.objectives[0]
        # (one objective but latency bounded by cells: as several; the bulk order where cells make a pass, `front_pass`)
        by_cells = bounded_by_cells(settings.objectives, target)
        bulk = objective == "latency" or (by_cells and isinstance(target, FrontCellBlocks))
        preferred = bulk_params(problem, target, space) if bulk else None
        if preferred is not None:
            structural = tuple(p for p in space.params if p.name in preferred)
            inner = tuple(p for p in space.params if p.name not in preferred)
        else:
            structural, inner = split_params(space, inner_points)
        names = tuple(p.name for p in structural)
        bounds = StructureBounds(target, problem, objective)
        shared = bounds if objective == "latency" else None  # (one clock learnt, `StructureBounds.learn_clock`)
        front_bounds = FrontBounds(target, problem, settings.objectives, latency=shared) if by_cells else None
        ev = Evaluator(
            target, problem, space, settings.objectives, Encoding.of(structural), tuple(p.name for p in inner),
            front_bounds=front_bounds,
        )  # fmt: skip
        total = math.prod(len(p.choices) for p in structural)
        done: list[tuple[Choice, ...]] = []  # the structures scored, in order
        seen: set[tuple[Choice, ...]] = set()

        def stop_between() -> StopReason | None:
            if done and watch is not None and watch.cancelled():  # between structures
                return "cancelled"
            if done and time.perf_counter() > deadline:  # one structure whatever the clock says
                return "seconds"
            return None

        def visit(key: tuple[Choice, ...]) -> None:
            ev.visit(dict(zip(names, key, strict=True)))
            done.append(key)
            seen.add(key)
            if ev.best_point is not None:
                bounds.learn_clock(ev.best_point)
                if front_bounds is not None:
                    front_bounds.learn_clock(ev.best_point)
            if watch is not None:
                watch.report(len(done), total, ev.trace[-1], unit="structures")

        def stop_rounds() -> StopReason | None:  # (`cell_rounds` prices one round whatever the clock says)
            cancelled = watch is not None and watch.cancelled()
            return "cancelled" if cancelled else "seconds" if time.perf_counter() > deadline else None

        table: FloorTable | None = None  # the target's floors, computed when first asked for
        # where the cell rounds take over after the first visit: every structure's least latency over its cells (a
        # floor from the rounds' own table) orders the visits instead (`CellRounds.latency_floors`)
        cell_floors = (
            CellRounds.latency_floors(target, problem, structural, settings.objectives)
            if self.floors and front_bounds is not None and preferred is None
            else None
        )
        if self.floors and objective == "latency" and cell_floors is None and floor_params(problem, target, bounds):
            table = FloorTable(target, problem, structural, bounds)
        reason: StopReason | None = None
        warmed = settings.warm_start and objective == "latency" and not settings.multi_objective
        if warmed:
            reason = self._warm(problem, target, space, names, bounds, ev, seen, visit, stop_between, watch, table,
                                deadline)  # fmt: skip
        if reason is None and watch is not None and watch.cancelled():  # before bounding every structure
            reason = "cancelled"
        next_bound: float | None = None
        ordered = reason is None
        self.bound_seconds, bounded, skipped = 0.0, 0, 0  # the ordered pass's, then the floors' (`table`)
        dropped: set[tuple[Choice, ...]] = set()  # structures out one by one: every cell dominated (`front_bounds`)
        floored: Floored | None = None
        rounds: CellRounds | None = None
        live: LivePass | None = None
        if ordered:
            t0 = time.perf_counter()
            visits: Iterator[tuple[tuple[Choice, ...], float, bool]]
            if preferred is not None:  # every structure's bound in one array (`StructureBulkBounded`)
                assert isinstance(target, StructureBulkBounded)
                flat = np.maximum(np.asarray(target.structure_bounds(problem, names), dtype=np.float64), 0.0).ravel()
                reps = repeated(target, problem, names)  # (structures that repeat another point for point: left out)
                order = bulk_visits(flat, structural, reps, dropped)
                if front_bounds is not None and isinstance(target, FrontCellBlocks):  # (`front_pass`)
                    cells, objs = target, settings.objectives
                    live = LivePass(
                        flat, structural, ev,
                        settings.objectives.index("latency") if "latency" in settings.objectives else -1,
                        lambda front, ask: cells.structure_front_cell_blocks(problem, names, objs, front, ask),
                        seen,
                        lambda: time.perf_counter() > deadline or (watch is not None and watch.cancelled()),
                        (lambda: objective_floors(target, problem, names, settings.objectives),
                         visit),
                        dropped,
                        reps,
                    )  # fmt: skip
                    order = live.visits(order)
                visits, bounded = ((k, b, True) for k, b in order), total
            elif cell_floors is not None:  # the cells' floors, ascending: the rounds follow the first visit
                shape = tuple(len(p.choices) for p in structural)
                visits = (
                    (tuple(p.choices[int(c)] for p, c in zip(structural, np.unravel_index(i, shape), strict=True)),
                     float(cell_floors[i]), False)
                    for i in ascending(cell_floors)
                )  # fmt: skip
                bounded = total
            elif table is not None:  # the floors first, an exact bound only when a floor comes first
                floored = Floored(table, seen)
                visits, bounded = iter(floored), total
            else:
                keys = list(itertools.product(*(p.choices for p in structural)))
                stop = lambda: time.perf_counter() > deadline or (watch is not None and watch.cancelled())  # noqa: E731
                # before a clock is known: the family's bounds alone; cut by the budget, the rest keep the generic bound
                raw, bounded = structure_order(bounds, names, keys, stop)
                visits = (
                    (keys[i], float(raw[i]), True) for i in np.argsort(raw, kind="stable").tolist()
                )  # ties: numbering
            self.bound_seconds = time.perf_counter() - t0 if floored is None else 0.0  # floors: `table.seconds`
            for key, raw_bound, exact in visits:
                if key in seen:
                    continue
                fixed = dict(zip(names, key, strict=True))
                if self._out(bounds, front_bounds, ev, fixed, raw_bound):
                    reason = "lower-bound"  # a floor's key too: every structure left has an exact bound above it
                reason = reason or stop_between()
                if reason is not None:
                    next_bound = max(raw_bound, bounds.whole())
                    break
                if not exact:  # a floor: `Floored` bounds the structure exactly before it comes again (or the cells')
                    assert floored is not None or cell_floors is not None
                    if front_bounds is None:
                        continue
                    if (
                        done
                        and rounds is None
                        and (rounds := CellRounds.of(target, problem, ev, structural, front_bounds, seen))
                    ):  # after the first visit, the open cells of every structure in rounds (`cell_rounds`)
                        report = None if watch is None else rounds.reporter(watch)
                        finished, out, reason, next_bound = rounds.run(stop_rounds, report)
                        done.extend(finished)
                        seen.update(finished)
                        dropped.update(out)
                        break
                    # several objectives: out if the front dominates its floors (its cells': FrontCellBounded), else
                    # visited now (the front does not depend on the order). Not bounded exactly first: that prices
                    # the whole structure, which is at least what its visit scores (only its open cells, where the
                    # target places points in cells), so it could never save the visit's pricing
                    if floored is not None:
                        floored.drop(key)
                    if front_bounds.out(
                        fixed, ev.front_values, front_bounds.with_latency(max(raw_bound, bounds.whole()))
                    ):
                        dropped.add(key)
                    else:
                        visit(key)
                    continue
                vec = front_bounds.with_latency(max(raw_bound, bounds.whole())) if front_bounds else None
                if front_bounds is not None and front_bounds.out(fixed, ev.front_values, vec):
                    dropped.add(key)  # every cell dominated: out, but a later structure's cells may not be
                    continue
                visit(key)
            else:
                reason = reason or "space-exhausted"
            skipped = len(dropped)
            if live is not None:
                skipped += live.pruned  # dominated cell by cell in the pass: out for good
                self.bound_seconds += live.seconds
        elif reason != "lower-bound":  # the budget ended among the warm starts: the generic bound holds for the rest
            next_bound = bounds.whole()
        if table is not None:
            self.bound_seconds += table.seconds  # the warm starts' bounds too
        visited = len(done)
        assert reason is not None  # the ordered pass always ends with a reason
        cert = self._certificate(space, bounds, front_bounds, ev, total, visited, reason, next_bound, skipped)
        if settings.objectives[0] != cert.objective:
            cert = cert.model_copy(update={"objective": settings.objectives[0]})
        if settings.multi_objective and not cert.complete and front_bounds is not None:  # (`front_gap`)
            gap = proof.front_gap(ev.front_values, seen | dropped) if (proof := live or rounds) is not None else None
            cert = cert.model_copy(update={"front_gap": least_front_gap(front_bounds, ev.front_values, gap)})
        front = ev.merged_front() if settings.multi_objective else []
        point, values = ev.best_point, ev.best_values
        if front:  # several objectives: the front's first point (the best first objective)
            point, values = front[0]
        top = tuple(
            ViolationCount(
                code=c, count=n, unit="trials", examined=min(CHECKED, max(1, ev.inner_size)),
                message=f"{ev.messages.get(c, '')} ({n} structures whose whole sub-space was infeasible; "
                f"up to {CHECKED} points of each checked)",
            )
            for c, n in ev.violations.most_common(5)
        )  # fmt: skip
        # a trial is a structure scored; those bounded out never became trials (the certificate counts them)
        scored = visited - ev.pruned  # (visits with every cell dominated by then scored nothing: pruned)
        counts = TrialCounts(
            trials=scored, complete=scored - ev.infeasible, infeasible=ev.infeasible, points_scored=ev.scored,
            top_violations=top,
        )  # fmt: skip
        bounding = (
            f"bounding every structure took {self.bound_seconds:.3f} s"
            if floored is None
            else f"the target's floors of every structure, then the exact bounds of {floored.exact_count:,} "
            f"whose floor came first, took {self.bound_seconds:.3f} s"
        )
        how = (
            f"{visited:,} scored ({'warm starts first, then ' if warmed else ''}by ascending "
            f"{'floor' if floored is not None and front_bounds is not None else 'bound'}; "
            f"{bounding})"
            if ordered and not rounds
            else f"{visited:,} scored ({rounds.note()})"
            if rounds
            else f"{visited:,} scored (warm starts only, stopped by {reason}: no structure bounded one by one)"
        )
        if ordered and bounded < total:
            how += f"; the budget ended after bounding {bounded:,} structures: the rest have the generic bound"
        split = f"structures of {target.name}'s structural parameters {names}" if preferred else "structures"
        notes = [f"best-first over {total:,} {split}, {cert.inner_points:,} points each: {how}"]
        if live is not None and live.live is not None:
            notes.append(live.note(several=len(settings.objectives) > 1))
        notes.extend(certificate_notes(cert, point is not None))
        return Searched(
            self.name, point, values, cert.complete, reason, ev.trace, counts, front, notes, ev.trace_points,
            certificate=cert,
        )  # fmt: skip

    @staticmethod
    def _warm(
        problem: Problem,
        target: Target,
        space: SearchSpace,
        names: tuple[str, ...],
        bounds: StructureBounds,
        ev: Evaluator,
        seen: set[tuple[Choice, ...]],
        visit: Callable[[tuple[Choice, ...]], None],
        stop_between: Callable[[], StopReason | None],
        watch: Watch | None = None,
        table: FloorTable | None = None,
        deadline: float | None = None,
    ) -> StopReason | None:
        """Score the target's warm-start structures first; ``lower-bound`` when the best reaches the roofline.

        Each is scored only while its bound is below the best found. A best at the whole problem's roofline (the
        generic bound, admissible for all) bounds out every structure left. With the target's floors (`table`), an
        exact bound is asked only when a floor does not rule it out. The target's extras end at `deadline`.
        """
        try:  # the target's preparation of its warm starts stops at its checkpoints on a cancel
            with cancellable(watch.cancelled if watch is not None else None, deadline):
                warms = target.warm_starts(problem)
        except Cancelled:
            return "cancelled"
        for warm in warms:
            if not all(p.name in warm and warm[p.name] in p.choices for p in space.params):
                continue
            key = tuple(warm[n] for n in names)
            if key in seen:
                continue
            reason = stop_between()  # (before a bound: a family's first exact bound can cost a visit)
            if reason is not None:
                return reason
            if ev.best_values is not None and (
                table.out(key, ev.best_values[0])
                if table is not None
                else StructureBounds.bounded_out(bounds(dict(zip(names, key, strict=True))), ev.best_values[0])
            ):
                continue  # left to the ordered pass, which will bound it out
            visit(key)
            if ev.best_values is not None and StructureBounds.bounded_out(bounds.whole(), ev.best_values[0]):
                return "lower-bound"
        return None

    @staticmethod
    def _out(
        bounds: StructureBounds, fb: FrontBounds | None, ev: Evaluator, fixed: dict[str, Choice], raw: float
    ) -> bool:
        """True when the structure (and so every later one) cannot improve the answer."""
        if fb is not None:
            return FrontBounds.dominated(fb.with_latency(max(raw, bounds.whole())), ev.front_values)  # its order key
        if bounds.objective != "latency" or ev.best_values is None:
            return False
        return StructureBounds.bounded_out(max(raw, bounds.whole()), ev.best_values[0])

    @staticmethod
    def _certificate(
        space: SearchSpace,
        bounds: StructureBounds,
        fb: FrontBounds | None,
        ev: Evaluator,
        total: int,
        visited: int,
        reason: StopReason,
        next_bound: float | None,
        skipped: int = 0,
    ) -> Certificate:
        """Scored: the structures visited, less those whose every cell their visit's front dominated (`Evaluator`);
        pruned: those, and the rest if the bound stopped the search, else those `skipped`; the rest unexplored."""
        left = total - visited
        pruned = left if reason == "lower-bound" else skipped
        unexplored = left - pruned
        emptied = ev.pruned  # (best-first visits outside Optuna: only `Evaluator.visit` counts these)
        visited, pruned = visited - emptied, pruned + emptied
        best = ev.best_values[0] if ev.best_values is not None else None
        remaining = next_bound if unexplored and next_bound is not None and next_bound > 0 else None
        gap: float | None = None
        if best is not None and fb is None:
            gap = 0.0 if unexplored == 0 else (max(0.0, best / remaining - 1) if remaining is not None else None)
        elif best is not None and unexplored == 0:
            gap = 0.0
        return Certificate(
            space=space_text(space), space_points=space.size, objective=bounds.objective,
            structures_total=total, inner_points=space.size // max(total, 1), scored=visited,
            pruned_by_bound=pruned, unexplored=unexplored, best=best, best_remaining_bound=remaining, gap_bound=gap,
            bound_source=(fb.source if fb is not None else bounds.source) + f"; visited in ascending bound order "
            f"(a structure is out when bound x (1 + {RTOL:g}) >= best)" + (
                f"; of the structures scored, {ev.cells_left_out:,} points in cells the front dominated were left "
                "out" if ev.cells_left_out else ""
            ),
        )  # fmt: skip
