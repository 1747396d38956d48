"""Exact enumeration of a search space with the target's vectorised scorer.

A `SearchSpace` is a finite product of choices; its points are numbered in C order (last
parameter fastest), the order of `SearchSpace.columns()`. This module builds the code columns
(each point's choice index per parameter, `costmodels.choice_codes`) of any slice of that
numbering without materialising the whole space (`ChunkPlan` builds block-aligned chunks with a
few memory copies, so building stays well ahead of the scorer), scores them in chunks with
`Target.score_codes`, and keeps the best point (or the Pareto front of several objectives) and, when
asked (`GroupBest`), the best point of every combination of a few parameters in the same pass.
Nothing here calls Optuna: enumeration is plain numpy.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from threading import Lock

import numpy as np

from costmodels.protocol import BatchScore, Choice, Param, SearchSpace, Target
from mapper.pareto import pareto_front
from mapper.watch import Watch
from workload.problem import Problem


def code_array(param: Param) -> np.ndarray:
    """The codes of a parameter's choices: ``0 .. len(choices) - 1``."""
    return np.arange(len(param.choices), dtype=np.intp)


#: bytes of code patterns kept for reuse by spaces of the same shape (see `product_codes`)
PATTERN_CACHE_BYTES = 16 << 20
_patterns: OrderedDict[tuple[int, ...], list[np.ndarray]] = OrderedDict()
_patterns_lock = Lock()


def product_codes(shape: tuple[int, ...]) -> list[np.ndarray]:
    """Code columns of every point of a product of `shape` choices, C order (last fastest), read-only.

    Each column is written in one broadcast pass (no division per point); a parameter with a
    single choice is a broadcast of 0. The columns depend on the shape alone, so the most recent
    ones (up to `PATTERN_CACHE_BYTES`) are kept and shared by every space of that shape.
    """
    with _patterns_lock:
        hit = _patterns.get(shape)
        if hit is not None:
            _patterns.move_to_end(shape)
            return hit
    cols = _product_codes(shape)
    size = sum(c.nbytes for c in cols if c.strides != (0,))
    if size <= PATTERN_CACHE_BYTES // 4:
        with _patterns_lock:
            _patterns[shape] = cols
            total = sum(c.nbytes for v in _patterns.values() for c in v if c.strides != (0,))
            while total > PATTERN_CACHE_BYTES and len(_patterns) > 1:
                _, old = _patterns.popitem(last=False)
                total -= sum(c.nbytes for c in old if c.strides != (0,))
    return cols


def _product_codes(shape: tuple[int, ...]) -> list[np.ndarray]:
    n = math.prod(shape)
    out: list[np.ndarray] = []
    outer = 1
    for size in shape:
        inner = n // (outer * size)
        if size == 1:
            out.append(np.broadcast_to(np.intp(0), (n,)))
        else:
            block = np.empty((outer, size, inner), dtype=np.intp)
            block[...] = np.arange(size, dtype=np.intp)[None, :, None]
            col = block.reshape(-1)
            col.flags.writeable = False
            out.append(col)
        outer *= size
    return out


def chunk_codes(space: SearchSpace, start: int, stop: int) -> dict[str, np.ndarray]:
    """Code columns of points ``start..stop-1`` of the space (C order, as `SearchSpace.columns()`)."""
    shape = tuple(len(p.choices) for p in space.params)
    flat = np.arange(start, stop, dtype=np.intp)
    digits = np.unravel_index(flat, shape) if shape else ()  # strided views of one array: each column copied
    return {p.name: np.ascontiguousarray(d, dtype=np.intp) for p, d in zip(space.params, digits, strict=True)}


def subspace_codes(space: SearchSpace, fixed: dict[str, int], inner: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Code columns of every combination of the `inner` parameters, the others held at the codes `fixed`."""
    inner_params = [p for p in space.params if p.name in inner]
    shape = tuple(len(p.choices) for p in inner_params)
    n = math.prod(shape)
    # by repeat and tile: contiguous (unravel_index gives strided columns, 10x slower; a gather copies those whole)
    by_name = {
        p.name: np.tile(np.repeat(np.arange(size, dtype=np.intp), math.prod(shape[i + 1 :])), math.prod(shape[:i]))
        for i, (p, size) in enumerate(zip(inner_params, shape, strict=True))
    }
    return {p.name: by_name[p.name] if p.name in by_name else np.full(n, fixed[p.name], np.intp) for p in space.params}


def scored_values(score: BatchScore, objectives: tuple[str, ...]) -> np.ndarray:
    """A batch's values (points x `objectives`, float64), ``inf`` on every objective of an infeasible point."""
    vals = np.stack([np.asarray(score.objectives[o], dtype=np.float64) for o in objectives], axis=1)
    vals[~np.asarray(score.feasible, dtype=bool)] = np.inf
    return vals


def point_at(space: SearchSpace, codes: dict[str, np.ndarray], i: int) -> dict[str, Choice]:
    """Row `i` of code columns as a point of values (plain Python scalars)."""
    return {p.name: p.choices[int(codes[p.name][i])] for p in space.params}


class ChunkPlan:
    """Chunks of the C-order numbering aligned on the trailing parameters, built cheaply.

    The space is split at a parameter so the trailing parameters span `block` points (at most
    `block_limit`, by default `chunk`); a chunk is a run of whole blocks (``chunk // block`` of
    them). Within a chunk the trailing code columns are one precomputed pattern tiled and the
    leading columns are a few codes repeated (a leading parameter that keeps one choice over the
    chunk is a read-only broadcast of it), so building a chunk costs a few memory copies at most
    instead of a division and a gather per point and parameter. Scorers must not write into code
    columns.
    """

    def __init__(self, space: SearchSpace, chunk: int, block_limit: int | None = None) -> None:
        self.space = space
        self.shape = tuple(len(p.choices) for p in space.params)
        limit = max(1, min(chunk, block_limit or chunk))
        k = len(self.shape)
        while k > 0 and math.prod(self.shape[k - 1 :]) <= limit:
            k -= 1
        self.split = k
        self.block = math.prod(self.shape[k:])
        self.blocks = math.prod(self.shape[:k])
        self.per_chunk = max(1, chunk // self.block)
        self._arrays = [code_array(p) for p in space.params]
        names = [p.name for p in space.params[k:]]
        self._pattern = dict(zip(names, product_codes(self.shape[k:]), strict=True)) if names else {}
        self._tiled: dict[str, np.ndarray] = {}

    def blocks_for(self, points: int) -> int:
        """Whole blocks in `points` points (at least one)."""
        return max(1, points // self.block)

    def bounds(self, first_block: int = 0) -> list[tuple[int, int]]:
        """(first block, end block) of each chunk from `first_block` on."""
        step = self.per_chunk
        return [(b, min(b + step, self.blocks)) for b in range(first_block, self.blocks, step)]

    def codes(self, b0: int, b1: int) -> dict[str, np.ndarray]:
        """Code columns of blocks ``b0..b1-1``, i.e. points ``b0 * block .. b1 * block - 1``."""
        n = (b1 - b0) * self.block
        out: dict[str, np.ndarray] = {}
        lead = np.unravel_index(np.arange(b0, b1, dtype=np.int64), self.shape[: self.split]) if self.split else ()
        for p, arr, digits in zip(self.space.params, self._arrays, lead, strict=False):
            if (digits == digits[0]).all():  # one choice over the whole chunk: a read-only broadcast, no copy
                out[p.name] = np.broadcast_to(arr[digits[0]], (n,))
            else:
                col = out[p.name] = np.repeat(arr[digits], self.block)
                col.flags.writeable = False  # like the shared columns: a scorer must not write into any
        reps = b1 - b0
        for name, col in self._pattern.items():
            if col.strides == (0,):  # a single choice
                out[name] = np.broadcast_to(col[:1], (n,))
                continue
            if reps == 1:
                out[name] = col
                continue
            tiled = self._tiled.get(name)
            if tiled is None or tiled.size < n:
                tiled = self._tiled[name] = np.tile(col, reps)
                tiled.flags.writeable = False  # shared by every chunk: a scorer must not write into it
            out[name] = tiled[:n]
        return {p.name: out[p.name] for p in self.space.params}


class GroupBest:
    """The best point of each combination of the parameters `names` (a *group*), kept while enumerating.

    Minimises the first objective (`objective`) over feasible points; of equal values the earliest
    point in the space's numbering represents the group (chunks arrive in point order and a later
    chunk replaces a group's best only when strictly better), so the table does not depend on how
    the numbering was cut into chunks. Per chunk: one ``np.minimum.reduceat`` when the groups come
    in runs (the grouped parameters lead the space, as Tenstorrent's layout and memory do), else one
    ``np.minimum.at``; then the first point at each improved group's minimum.
    """

    def __init__(self, space: SearchSpace, names: tuple[str, ...], objective: str = "latency") -> None:
        params = [p for p in space.params if p.name in names]
        self.names = tuple(p.name for p in params)
        self.objective = objective
        self.sizes = tuple(len(p.choices) for p in params)
        self.value = np.full(math.prod(self.sizes), np.inf)
        self.point: dict[int, dict[str, Choice]] = {}

    def absorb(self, space: SearchSpace, codes: dict[str, np.ndarray], score: BatchScore) -> None:
        """Fold one scored chunk (points in numbering order, after every earlier chunk)."""
        lat = np.where(np.asarray(score.feasible, dtype=bool), np.asarray(score.objectives[self.objective]), np.inf)
        group = np.zeros(lat.size, dtype=np.intp)
        for name, size in zip(self.names, self.sizes, strict=True):
            group = group * size + np.asarray(codes[name])
        if group.size and (group.size == 1 or bool(np.all(group[1:] >= group[:-1]))):
            self._absorb_sorted(space, codes, lat, group)
            return
        chunk = np.full_like(self.value, np.inf)
        np.minimum.at(chunk, group, lat)
        better = chunk < self.value
        if not better.any():
            return
        at = np.flatnonzero(better[group] & (lat == chunk[group]))  # points at an improved group's minimum
        groups, first = np.unique(group[at], return_index=True)
        for k, i in zip(groups.tolist(), at[first].tolist(), strict=True):
            self.value[k] = chunk[k]
            self.point[k] = point_at(space, codes, i)

    def _absorb_sorted(
        self, space: SearchSpace, codes: dict[str, np.ndarray], lat: np.ndarray, group: np.ndarray
    ) -> None:
        """The same when the chunk's groups come in runs (the grouped parameters lead the space): one reduceat."""
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        ends = np.r_[starts[1:], group.size]
        mins = np.minimum.reduceat(lat, starts)
        keys = group[starts]
        for j in np.flatnonzero(mins < self.value[keys]).tolist():
            s0 = int(starts[j])
            i = s0 + int(np.argmin(lat[s0 : int(ends[j])]))  # argmin keeps the first of equal minima
            k = int(keys[j])
            self.value[k] = mins[j]
            self.point[k] = point_at(space, codes, i)

    def table(self, space: SearchSpace) -> dict[tuple[Choice, ...], tuple[float, dict[str, Choice]]]:
        """(the group's values of `names`) -> (best value, its point), for every group with a feasible point."""
        choices = {p.name: p.choices for p in space.params}
        out = {}
        for k in sorted(self.point):
            digits = np.unravel_index(k, self.sizes)
            key = tuple(choices[n][int(d)] for n, d in zip(self.names, digits, strict=True))
            out[key] = (float(self.value[k]), self.point[k])
        return out


@dataclass
class Enumeration:
    """What scoring the space (or part of it) found; `absorb` adds one scored chunk (and to `groups`, if set)."""

    objectives: tuple[str, ...] = ("latency",)
    scored: int = 0
    feasible: int = 0
    complete: bool = False
    seconds: float = 0.0
    best: dict[str, Choice] | None = None
    best_values: tuple[float, ...] | None = None
    front: list[tuple[dict[str, Choice], tuple[float, ...]]] = field(default_factory=list)
    trace: list[float | None] = field(default_factory=list)  # best first objective after each chunk
    trace_points: list[int] = field(default_factory=list)  # points scored after each chunk
    candidates: list[tuple[dict[str, Choice], tuple[float, ...]]] = field(default_factory=list)
    groups: GroupBest | None = None  # the best per group, in the same pass (`mapper.ties`)

    def absorb(self, space: SearchSpace, codes: dict[str, np.ndarray], score: BatchScore) -> None:
        """Fold one scored chunk of code columns into the running best (ties keep the earlier point)."""
        if self.groups is not None:
            self.groups.absorb(space, codes, score)
        feas = np.asarray(score.feasible, dtype=bool)
        self.scored += feas.size
        self.feasible += int(feas.sum())
        if feas.any():
            vals = scored_values(score, self.objectives)
            if len(self.objectives) == 1:
                i = int(np.argmin(vals[:, 0]))
                if self.best_values is None or vals[i, 0] < self.best_values[0]:
                    self.best, self.best_values = point_at(space, codes, i), (float(vals[i, 0]),)
            else:  # the chunk's front (one point per distinct value, the earliest), merged in `finish`
                for j in pareto_front(vals):
                    self.candidates.append((point_at(space, codes, int(j)), tuple(map(float, vals[j]))))
        self.trace.append(self.best_values[0] if self.best_values and len(self.objectives) == 1 else None)
        self.trace_points.append(self.scored)

    def finish(self) -> Enumeration:
        """Reduce the chunks' fronts to the exact Pareto front: one point per distinct value, the earliest."""
        if len(self.objectives) > 1 and self.candidates:
            allv = np.array([v for _, v in self.candidates])
            self.front = [self.candidates[int(i)] for i in pareto_front(allv)]  # chunks arrive in point order
            self.best, self.best_values = min(self.front, key=lambda c: c[1])
        return self


def enumerate_space(
    target: Target,
    problem: Problem,
    space: SearchSpace,
    objectives: tuple[str, ...],
    *,
    chunk: int = 1 << 18,
    deadline: float | None = None,
    plan: ChunkPlan | None = None,
    state: Enumeration | None = None,
    first_block: int = 0,
    watch: Watch | None = None,
) -> Enumeration:
    """Score every point of `space` in chunks; stop early only at `deadline` (a `time.perf_counter` value).

    Ties on the first objective keep the lowest point number, so the answer is deterministic. To
    continue an enumeration whose first chunks were already scored (a rate probe), pass its `plan`,
    `state` and the next block. A `watch` hears the progress after every chunk and may cancel
    (the enumeration then stops with what it has scored, incomplete).
    """
    t0 = time.perf_counter()
    plan = plan or ChunkPlan(space, chunk)
    out = state or Enumeration(objectives=objectives)
    for b0, b1 in plan.bounds(first_block):
        if deadline is not None and out.scored > 0 and time.perf_counter() > deadline:
            break
        if watch is not None and out.scored > 0 and watch.cancelled():
            break
        codes = plan.codes(b0, b1)
        out.absorb(space, codes, target.score_codes(problem, codes))
        if watch is not None:
            watch.report(out.scored, space.size, out.trace[-1], unit="points")
    else:
        out.complete = True
    out.seconds += time.perf_counter() - t0
    return out.finish()
