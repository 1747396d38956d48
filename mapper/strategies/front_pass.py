"""Best-first's visit order with several objectives where the target bounds every structure's cells.

With several objectives the structures are still visited by ascending latency bound, and the search
may stop only once the front dominates the next structure's vector (its latency bound beside the
whole problem's floors): on a space of millions of structures (Trainium's every tile count) that
stop comes after nearly all of them, because a structure's least latency and its least bytes sit in
different cells (`mapper.bounds.FrontCellBounded`). `LivePass` visits in latency order until the
best latency is proven (the next bound is not below the least latency found: the front's fastest
point is then the optimum's value), visits a few structures along the front's likely course where the
target floors the other objectives per structure (`seed_structures`: the pass's front then spans more
than its fastest end), then runs a dominance pass over every structure's cells
(`mapper.bounds.FrontCellBlocks`, `live_structures`) and goes on with the live structures only: first
a few on the staircase of their latency bounds over their open cells' least values (the pass's own rows,
`OPEN_SEEDS`), then the rest in the same ascending order, running the pass again as the front grows where that pays
(`_live_visits`); a pass again is asked about the live structures left to visit only (`FrontCellBlocks`'
``live``), which a target may then price more finely than a first pass over every structure can afford
(Trainium: footprint's loop-order cases). A structure that is not live has every point dominated by, or
equal in value to, a front point, and the front only grows, so it can be left out for good: it counts as
pruned by bound. The live structures are then visited as before (each checked again against the grown
front by its own cells), so the front is the exact front over the space when they are done. Before a live
structure's cells are priced again (its visit, or the look-ahead's pricing), the rows the first pass left open
for it are tested against the grown front (`OpenRows`): when the front dominates them all, it is
left out unpriced (Llama-7B decode mlp.gate_proj on trn2 with latency + energy: 2,427 of the 2,551 structures
the pass left live; 3.5 s to 2.2 s, once by hand outside `bench/`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator

import numpy as np

from costmodels.dominance import dominated_rows
from costmodels.protocol import Choice, Param, Target
from mapper.bounds import RTOL, StructureObjectiveFloors, StructureRepeats, live_structures
from mapper.pareto import row_gaps
from mapper.strategies.objective import Evaluator
from workload.problem import Problem

#: a pass again only when the live structures left, at the visits' pace since the last pass, would take at
#: least this many times the last pass's time (a pass prices every structure's cells in numpy, a visit checks
#: one structure's cells and may score its points: which pays depends on how many are left)
REPASS_PAYS = 2.0
#: the coming structures (in visit order, live or not) whose points are priced together ahead of their visits
AHEAD = 64
#: structures visited per objective with floors before the first pass (`seed_structures`)
SEEDS = 64
#: live structures visited per objective other than latency right after the first pass, along the staircase of
#: their latency bounds over their open cells' least values (`seed_structures` on the pass's own rows, so no
#: floors are computed for them): the front then spans its whole length before the latency order goes on
#: (`bench.two_objectives`, 2026-11-27: latency + energy on the Llama-7B decode layers scored 125 structures
#: instead of 312, 371 and 1,078 ms instead of 591 and 1,753 on trn1 and trn2; prefill latency + off-chip bytes
#: 5-12% slower, prefill latency + energy within the run-to-run spread)
OPEN_SEEDS = 16
#: without latency among the objectives: structures visited in latency-bound order before the first pass
BEFORE_PASS = 64

#: given the front and the structures whose outcome is asked (None: all)
Blocks = Callable[[np.ndarray, np.ndarray | None], Iterator[tuple[int, np.ndarray]] | None]


def ascending(values: np.ndarray, first: int = 1 << 12) -> Iterator[int]:
    """Indices of `values` by ascending value, ties by index: ``np.argsort(values, kind="stable")``, lazily.

    Sorted a chunk at a time (the `first` lowest values, then four times more each round, every
    value equal to a chunk's largest taken with it), so a search that stops early sorts little of
    a long array; the order is the full stable sort's.
    """
    low, size = -np.inf, max(1, first)
    while True:
        left = np.flatnonzero(values > low)
        if left.size == 0:
            return
        if left.size > size:
            high = np.partition(values[left], size - 1)[size - 1]
            left = left[values[left] <= high]
        else:
            high = np.inf
        yield from left[np.argsort(values[left], kind="stable")].tolist()
        if high == np.inf:
            return
        low, size = high, size * 4


def bulk_visits(
    flat: np.ndarray,
    structural: tuple[Param, ...],
    skip: Callable[[], np.ndarray | None] | None = None,
    skipped: set[tuple[Choice, ...]] | None = None,
) -> Iterator[tuple[tuple[Choice, ...], float]]:
    """(structure's choices, its bound) in ascending bound order, ties by the structures' C-order numbering.

    `skip`: the structures to leave out, asked at the first visit (`repeated`: each repeats, point for point, one
    that is not left out and has its bound, so comes before it); each one the order reaches is added to `skipped`
    (the search's structures left out one by one)."""
    shape = tuple(len(p.choices) for p in structural)
    mask = None if skip is None else skip()
    for i in ascending(flat):
        codes = np.unravel_index(i, shape)
        key = tuple(p.choices[int(c)] for p, c in zip(structural, codes, strict=True))
        if mask is not None and mask[i]:
            if skipped is not None:
                skipped.add(key)
            continue
        yield key, float(flat[i])


def objective_floors(
    target: Target, problem: Problem, names: tuple[str, ...], objectives: tuple[str, ...]
) -> list[np.ndarray]:
    """The target's floors of every structure for each objective but latency it floors (`StructureObjectiveFloors`)."""
    if not isinstance(target, StructureObjectiveFloors):
        return []
    got = (target.structure_objective_floors(problem, names, o) for o in objectives if o != "latency")
    return [f for f in got if f is not None]


def seed_structures(
    flat: np.ndarray, floors: list[np.ndarray], count: int = SEEDS, skip: np.ndarray | None = None
) -> np.ndarray:
    """Structures along the front's likely course, from their latency bounds `flat` and floors of other objectives.

    For each objective's floors, the structures no other beats on both its latency bound and its floor
    (each the fastest that may reach its value), up to `count` of them spread evenly along that
    staircase. Scoring these before the first dominance pass gives the pass a front along its whole
    length, where the fastest structures alone give one end of it. Which structures they are changes
    the work, not the front found (every structure is still visited or left out by its cells). `skip`: a mask of
    structures never picked (those that repeat another point for point: their bounds and floors are its own).
    """
    picked: list[np.ndarray] = []
    for floor in floors:
        f = np.asarray(floor, dtype=np.float64).reshape(-1)
        usable = np.isfinite(flat) & np.isfinite(f)
        ok = np.flatnonzero(usable if skip is None else usable & ~skip)
        order = ok[np.lexsort((flat[ok], f[ok]))]  # by floor, then bound
        before = np.minimum.accumulate(np.concatenate(([np.inf], flat[order][:-1])))
        stairs = order[flat[order] < before]  # a lower bound than every structure of a lower (or equal) floor
        if len(stairs):
            picked.append(
                stairs[np.unique(np.linspace(0, len(stairs) - 1, min(count, len(stairs))).round().astype(int))]
            )
    return np.unique(np.concatenate(picked)) if picked else np.zeros(0, dtype=np.intp)


class OpenRows:
    """The cell rows a dominance pass left open (`mapper.bounds.live_structures`' ``open_rows``), by structure.

    By `FrontCellBlocks`' contract each feasible point of a structure is no better than one of its cells' rows or
    is dominated by the pass's front (a pass without ``live``: a later pass's rows need only tell which structures
    are live, and are not kept); a row that front dominated is then dominated by every later front (it only
    grows). So when a later front dominates every row the pass left open for a structure, each of its points is
    dominated by (or has the values of) a front point: it can be left out without its cells being priced again
    (`out`). Rows are kept up to `limit` (beyond, none are: a pass that leaves that many open leaves the later
    passes to cut the live structures down, and `out` says False).
    """

    def __init__(self, limit: int = 1 << 20) -> None:
        self.limit, self.count = limit, 0
        self._blocks: list[tuple[np.ndarray, np.ndarray]] | None = []
        self.at, self.rows = np.zeros(0, dtype=np.intp), np.zeros((0, 0))

    def add(self, structures: np.ndarray, rows: np.ndarray) -> None:
        """A block's open rows (one per structure of `structures`), while no more than `limit` are kept."""
        if self._blocks is None:
            return
        self.count += len(structures)
        if self.count > self.limit:
            self._blocks = None  # (too many: none kept)
            return
        self._blocks.append((np.asarray(structures, dtype=np.intp), np.array(rows, dtype=np.float64)))

    def close(self) -> OpenRows:
        """The rows added, indexed by structure (after the pass)."""
        if self._blocks:
            at = np.concatenate([a for a, _ in self._blocks])
            order = np.argsort(at, kind="stable")
            self.at, self.rows = at[order], np.concatenate([r for _, r in self._blocks])[order]
        self._blocks = None
        return self

    def _ranges(self, structures: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which of `structures` have rows kept, the positions of those rows (structure by structure) and where each
        structure's rows start among them."""
        lo = np.searchsorted(self.at, structures, side="left")
        hi = np.searchsorted(self.at, structures, side="right")
        has = hi > lo
        if not has.any():
            return has, np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
        idx = np.concatenate([np.arange(a, b) for a, b in zip(lo[has].tolist(), hi[has].tolist(), strict=True)])
        return has, idx, np.concatenate(([0], np.cumsum((hi - lo)[has])[:-1]))

    def out(self, structures: np.ndarray, front: np.ndarray | None) -> np.ndarray:
        """Which of `structures` (numbers) `front` now dominates on every row the pass left open for them (a
        structure with no such row: False, it was not live, or the rows were not kept)."""
        out = np.zeros(len(structures), dtype=bool)
        if not self.at.size or front is None or not len(front) or not len(structures):
            return out
        has, idx, starts = self._ranges(structures)
        if has.any():
            out[has] = np.logical_and.reduceat(dominated_rows(self.rows[idx], front), starts)
        return out

    def gaps(self, structures: np.ndarray, front: np.ndarray) -> np.ndarray:
        """Each of `structures`' largest gap to `front` (`mapper.pareto.row_gaps`) over the rows the pass left open
        for it (inf: no row kept)."""
        out = np.full(len(structures), np.inf)
        if not self.at.size or not len(structures):
            return out
        has, idx, starts = self._ranges(structures)
        if has.any():
            out[has] = np.maximum.reduceat(row_gaps(front, self.rows[idx]), starts)
        return out


def repeated(target: Target, problem: Problem, names: tuple[str, ...]) -> Callable[[], np.ndarray | None]:
    """The target's structures that repeat another point for point (`StructureRepeats`), asked once when first
    wanted (None: none known)."""
    if not isinstance(target, StructureRepeats):
        return lambda: None
    return functools.cache(lambda: target.structure_repeats(problem, names))  # (asked by the order and the pass)


class LivePass:
    """The visits of `bulk_visits` order, cut to the live structures once the best latency is proven.

    `pruned`: structures the passes left out that were not scored before; `live`: the live
    structures the first pass found (None until it ran); `seconds`: the passes' time; `after`: structures
    scored before the first; `passes` / `later`: the passes run as the front grew, and what they left out.
    `seeds`: every structure's floors of the other objectives and the visit of `seed_structures`' picks before
    the first pass; `repeats`: the structures that repeat another point for point (`repeated`), never picked and
    counted apart in the note (`repeated`: how many the first pass left out).
    """

    def __init__(
        self,
        flat: np.ndarray,
        structural: tuple[Param, ...],
        ev: Evaluator,
        latency_at: int,
        blocks: Blocks,
        seen: set[tuple[Choice, ...]],
        stop: Callable[[], bool],
        seeds: tuple[Callable[[], list[np.ndarray]], Callable[[tuple[Choice, ...]], None]] | None = None,
        dropped: set[tuple[Choice, ...]] | None = None,
        repeats: Callable[[], np.ndarray | None] | None = None,
    ) -> None:
        self.flat, self.structural, self.ev, self.at = flat, structural, ev, latency_at
        self.blocks, self.seen, self.stop, self.seeds = blocks, seen, stop, seeds
        # structures the search left out one by one (every cell dominated at their turn): decided, like those seen
        self.dropped = dropped if dropped is not None else set()
        self.seeded = 0  # structures visited by `seeds` before the first pass
        self.open_seeded = 0  # live structures visited first after it, along its open cells' staircase
        self.pruned, self.seconds, self.after = 0, 0.0, 0
        self.live: int | None = None
        self.passes, self.later = 0, 0  # passes after the first, and the structures they left out
        # the cell rows the last pass left open, and the live structures left out on them as the front grew
        self.open_rows = OpenRows().close()
        self.rows_out = 0
        # each structure's least open-cell values after the first pass, and the structures still live (`front_gap`)
        self.open_floors: np.ndarray | None = None
        self.live_mask: np.ndarray | None = None
        # which structures repeat another point for point (`StructureRepeats`), and how many of them the pass left out
        self.repeats, self.repeated = repeats or (lambda: None), 0

    def note(self, several: bool) -> str:
        """What the passes did, for the result's notes (after the first pass ran: `live` set)."""
        again = f"; {self.passes:,} more passes as the front grew left out {self.later:,} of those"
        rows = (
            f"; {self.rows_out:,} more live structures were left out when the front came to dominate every cell row "
            "the last pass left open for them"
        )
        repeats = (
            f" ({self.repeated:,} of them repeat another structure point for point, the same tiles, and were "
            "left out unpriced)"
        )
        first = (
            f"; {self.open_seeded:,} of those on the staircase of their open cells' floors "
            f"{'was' if self.open_seeded == 1 else 'were'} visited first"
        )
        return (
            f"after {self.after - self.seeded:,} structures "
            f"{'proved the least latency' if self.at >= 0 else 'in latency-bound order'}"
            f"{f' and {self.seeded:,} seeds along the front were scored' if self.seeded else ''}, a pass over "
            f"every structure's cells left {self.live:,} whose cells the {'front' if several else 'best'} did not "
            f"dominate; the other {self.pruned - self.later - self.rows_out:,} were pruned by bound"
            f"{repeats if self.repeated else ''}"
            f"{first if self.open_seeded else ''}{again if self.passes else ''}{rows if self.rows_out else ''} "
            f"(passes: {self.seconds:.3f} s)"
        )

    def key(self, i: int) -> tuple[Choice, ...]:
        codes = np.unravel_index(i, tuple(len(p.choices) for p in self.structural))
        return tuple(p.choices[int(c)] for p, c in zip(self.structural, codes, strict=True))

    def index(self, key: tuple[Choice, ...]) -> int:
        codes = tuple(p.choices.index(v) for p, v in zip(self.structural, key, strict=True))
        return int(np.ravel_multi_index(codes, tuple(len(p.choices) for p in self.structural)))

    def visits(self, ordered: Iterator[tuple[tuple[Choice, ...], float]]) -> Iterator[tuple[tuple[Choice, ...], float]]:
        """(structure, latency bound) in ascending bound order; after the pass, the live ones only.

        The pass runs once the best latency is proven, or, when latency is not an objective (`latency_at`
        -1), after the first `BEFORE_PASS` structures (the fastest-bounded ones give the front a start)."""
        for before, (key, bound) in enumerate(ordered):
            front = self.ev.front_values
            if front is not None and len(front):
                if self.at < 0 and before >= BEFORE_PASS:
                    break
                if self.at >= 0 and bound * (1 + RTOL) >= float(front[:, self.at].min()):
                    break  # the best latency is proven: the pass, then the live structures from here on
            yield key, bound
        else:
            return
        if self.seeds is not None:  # (floors, visit): a front along its whole length for the pass
            floors, visit = self.seeds
            for i in seed_structures(self.flat, floors(), skip=self.repeats()).tolist():
                if self.stop():
                    break
                if self.key(i) not in self.seen and self.key(i) not in self.dropped:
                    visit(self.key(i))
                    self.seeded += 1
            front = self.ev.front_values if self.ev.front_values is not None else front
        t0 = time.perf_counter()
        blocks = self.blocks(front, None)
        lows = np.full((self.flat.size, front.shape[1]), np.inf, dtype=np.float32) if OPEN_SEEDS else None
        kept = OpenRows()  # the rows the pass leaves open
        live = None if blocks is None else live_structures(blocks, self.flat.size, front, self.stop, lows, kept.add)
        self.open_rows = kept.close()
        self.seconds = time.perf_counter() - t0
        if live is None:  # no cells, or cut by the budget: the plain order goes on
            yield key, bound
            yield from ordered
            return
        decided = [self.index(k) for k in self.seen | self.dropped]  # counted already: scored or left out
        self.after = len(self.seen)
        self.pruned = int((~live).sum()) - int((~live[decided]).sum()) if decided else int((~live).sum())
        repeated = self.repeats()
        if repeated is not None:  # (never live: `FrontCellBlocks` leaves them out)
            self.repeated = int(repeated.sum()) - (int(repeated[decided].sum()) if decided else 0)
        live[decided] = False
        idx = np.flatnonzero(live)
        self.live = int(idx.size)
        self.live_mask = live  # (`front_gap`)
        self.open_floors = lows if front.shape[1] == 2 else None  # (`front_gap`, two objectives: kept for it only)
        if lows is not None and idx.size:  # the staircase of the live structures' open cells first (`OPEN_SEEDS`)
            others = [lows[idx, j] for j in range(lows.shape[1]) if j != self.at]
            del lows  # (held on only where `front_gap` needs it)
            for i in idx[seed_structures(self.flat[idx], others, OPEN_SEEDS)].tolist():
                if self.stop():
                    break
                live[i] = False  # visited now, not again in the latency order
                yield self.key(i), float(self.flat[i])
                self.open_seeded += 1
        yield from self._live_visits(idx[np.argsort(self.flat[idx], kind="stable")], live, front)

    def front_gap(self, front: np.ndarray | None, decided: set[tuple[Choice, ...]]) -> float | None:
        """How close `front` (the search's) is proven to the exact front when live structures are left unvisited, two
        objectives: the largest of their gaps (`mapper.pareto.row_gaps`), each the lesser of two, both admissible:
        the gap of `front` to the rows the first pass left open for it (`OpenRows.gaps`, where kept) and to its
        least open-cell values after that pass, objective by objective. The front is then within the gap of every
        point those cells hold, and dominates (within `RTOL`) every other point of the space: the first pass's front
        dominated them, and `front` grew from it. Not the later passes' rows: they need only show that a structure
        is live (`mapper.bounds.FrontCellBlocks`; Trainium gives its first open case), not bound all its points.
        `decided`: the structures scored or left out. None before the first pass, or with more objectives."""
        if self.live_mask is None or front is None or front.shape[1] != 2:
            return None
        left = self.live_mask.copy()
        if decided:
            left[[self.index(k) for k in decided]] = False
        if not left.any():
            return 0.0
        at = np.flatnonzero(left)
        gaps = self.open_rows.gaps(at, front)
        if self.open_floors is not None:  # (float32: nudged down, still below every open cell's values)
            floors = np.nextafter(self.open_floors[at], np.float32(-np.inf)).astype(np.float64)
            gaps = np.minimum(gaps, row_gaps(front, np.maximum(floors, 0.0)))
        gap = float(gaps.max())
        return gap if np.isfinite(gap) else None  # (a cell at 0 where the front is not: no bound)

    def _rows_out(self, structures: np.ndarray, live: np.ndarray) -> bool:
        """Leave out the live `structures` whose rows the pass left open the front now dominates, each one (`OpenRows`:
        no cell of theirs is priced again); True when the first of them was."""
        at = structures[live[structures]]
        out = self.open_rows.out(at, self.ev.front_values)
        if out.any():
            live[at[out]] = False
            self.pruned += int(out.sum())
            self.rows_out += int(out.sum())
        return bool(structures.size and not live[structures[0]])

    def _live_visits(
        self, ordered: np.ndarray, live: np.ndarray, front: np.ndarray
    ) -> Iterator[tuple[tuple[Choice, ...], float]]:
        """The live structures in `ordered` order, with a pass again over every structure's cells whenever the
        front has grown, the visits since the last pass took twice its time (so passes take at most about a
        third of the search) and the live structures left would take `REPASS_PAYS` passes at the visits'
        pace (else visiting them one by one costs less). Structures the grown front dominates cell by cell
        are left out for good. Which passes run depends on the clock; the front found does not, once every
        live structure is visited or left out."""
        last, spent, visits, ahead = time.perf_counter(), self.seconds, 0, 0
        names = [p.name for p in self.structural]
        checked = None  # the front the coming structures' open rows were last tested against (`_rows_out`)
        for pos, i in enumerate(ordered.tolist()):
            if not live[i]:
                continue
            if pos >= ahead:  # the next live structures' points priced together (`Evaluator.score_ahead`)
                window = ordered[pos : pos + AHEAD]
                checked = self.ev.front_values
                if self._rows_out(window, live):  # the front grew over every row the pass left open for this one
                    continue
                at = np.flatnonzero(live[window])  # (at[0] == 0: this structure)
                took = self.ev.score_ahead([dict(zip(names, self.key(int(j)), strict=True)) for j in window[at]])
                ahead = pos + (int(at[took - 1]) + 1 if took else 1)
            elif self.ev.front_values is not checked and self._rows_out(ordered[pos : pos + 1], live):
                continue  # (the front changed since the window's test)
            yield self.key(i), float(self.flat[i])
            visits += 1
            grown = self.ev.front_values
            since = time.perf_counter() - last
            if since < 2 * spent or grown is None or np.array_equal(grown, front):
                continue
            if int(live[ordered[pos + 1 :]].sum()) * since / visits < REPASS_PAYS * spent:
                continue
            t0 = time.perf_counter()
            rest = ordered[pos + 1 :]
            asked = np.zeros_like(live)
            asked[rest] = live[rest]  # the live structures left to visit: only their outcome counts
            blocks = self.blocks(grown, asked)
            again = None if blocks is None else live_structures(blocks, self.flat.size, grown, self.stop)
            spent = time.perf_counter() - t0
            self.seconds += spent
            last, front, visits = time.perf_counter(), grown, 0
            if again is None:
                continue
            out = live[rest] & ~again[rest]
            self.pruned += int(out.sum())
            self.later += int(out.sum())
            self.passes += 1
            live[rest[out]] = False
