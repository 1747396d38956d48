"""Exact enumeration of a search space with the target's vectorised scorer.

A `SearchSpace` is a finite product of choices; its points are numbered in C order (last
parameter fastest), the order of `SearchSpace.columns()`. This module builds the columns of
any slice of that numbering without materialising the whole space, scores them in chunks
with `Target.score_batch`, and keeps the best point (or the Pareto front of several
objectives). Nothing here calls Optuna: enumeration is plain numpy.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from costmodels.protocol import Choice, Param, SearchSpace, Target
from workload.problem import Problem


def choice_array(param: Param) -> np.ndarray:
    """The choices of a parameter as a numpy array, typed exactly as `SearchSpace.columns()` types them."""
    mixed = len({type(c) for c in param.choices}) > 1
    return np.asarray(param.choices, dtype=object if mixed else None)


def chunk_columns(space: SearchSpace, start: int, stop: int) -> dict[str, np.ndarray]:
    """Columns of points ``start..stop-1`` of the space (C order, as `SearchSpace.columns()`)."""
    shape = tuple(len(p.choices) for p in space.params)
    flat = np.arange(start, stop, dtype=np.int64)
    digits = np.unravel_index(flat, shape) if shape else ()
    return {p.name: choice_array(p)[d] for p, d in zip(space.params, digits, strict=True)}


def subspace_columns(space: SearchSpace, fixed: dict[str, Choice], inner: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Every combination of the `inner` parameters, with the others held at `fixed`."""
    inner_params = [p for p in space.params if p.name in inner]
    shape = tuple(len(p.choices) for p in inner_params)
    n = math.prod(shape)
    digits = np.unravel_index(np.arange(n, dtype=np.int64), shape) if shape else ()
    out: dict[str, np.ndarray] = {}
    by_name = dict(zip((p.name for p in inner_params), digits, strict=True))
    for p in space.params:
        arr = choice_array(p)
        if p.name in by_name:
            out[p.name] = arr[by_name[p.name]]
        else:
            idx = p.choices.index(fixed[p.name])
            out[p.name] = np.repeat(arr[idx : idx + 1], n)
    return out


def point_at(columns: dict[str, np.ndarray], i: int) -> dict[str, Choice]:
    """Row `i` of a set of columns as a point (plain Python scalars)."""
    return {k: _plain(v[i]) for k, v in columns.items()}


def _plain(x: object) -> Choice:
    if isinstance(x, np.generic):
        return x.item()
    return x  # type: ignore[return-value]


def pareto_mask(values: np.ndarray) -> np.ndarray:
    """Rows of `values` (points x objectives, minimised) that no other row dominates.

    Duplicated rows are all kept. Rows with a non-finite entry are never on the front.
    """
    n = values.shape[0]
    keep = np.all(np.isfinite(values), axis=1)
    order = np.lexsort(values.T[::-1])  # sort by first objective, then the next...
    front: list[int] = []
    for i in order:
        if not keep[i]:
            continue
        v = values[i]
        if front:
            f = values[front]
            dominated = np.any(np.all(f <= v, axis=1) & np.any(f < v, axis=1))
            if dominated:
                keep[i] = False
                continue
        front.append(int(i))
    mask = np.zeros(n, dtype=bool)
    mask[front] = True
    return mask


@dataclass
class Enumeration:
    """What scoring the space (or part of it) found."""

    scored: int = 0
    feasible: int = 0
    complete: bool = False
    seconds: float = 0.0
    best: dict[str, Choice] | None = None
    best_values: tuple[float, ...] | None = None
    front: list[tuple[dict[str, Choice], tuple[float, ...]]] = field(default_factory=list)
    trace: list[float | None] = field(default_factory=list)  # best first objective after each chunk


def enumerate_space(
    target: Target,
    problem: Problem,
    space: SearchSpace,
    objectives: tuple[str, ...],
    *,
    chunk: int = 1 << 18,
    deadline: float | None = None,
) -> Enumeration:
    """Score every point of `space` in chunks; stop early only at `deadline` (a `time.perf_counter` value).

    Ties on the first objective keep the lowest point number, so the answer is deterministic.
    """
    t0 = time.perf_counter()
    out = Enumeration()
    total = space.size
    best_key: tuple[float, ...] | None = None
    cands: list[tuple[dict[str, Choice], tuple[float, ...]]] = []
    for start in range(0, total, chunk):
        if deadline is not None and start > 0 and time.perf_counter() > deadline:
            break
        cols = chunk_columns(space, start, min(total, start + chunk))
        score = target.score_batch(problem, cols)
        feas = np.asarray(score.feasible, dtype=bool)
        vals = np.stack([np.asarray(score.objectives[o], dtype=np.float64) for o in objectives], axis=1)
        vals[~feas] = np.inf
        out.scored += feas.size
        out.feasible += int(feas.sum())
        if feas.any():
            if len(objectives) == 1:
                i = int(np.argmin(vals[:, 0]))
                key = (float(vals[i, 0]),)
                if best_key is None or key < best_key:
                    best_key, out.best = key, point_at(cols, i)
            else:
                mask = pareto_mask(vals)
                cands.extend((point_at(cols, int(i)), tuple(map(float, vals[i]))) for i in np.flatnonzero(mask))
        out.trace.append(best_key[0] if best_key else None)
    else:
        out.complete = True
    if len(objectives) > 1 and cands:
        allv = np.array([v for _, v in cands])
        mask = pareto_mask(allv)
        out.front = [c for c, m in zip(cands, mask, strict=True) if m]
        out.best, out.best_values = min(out.front, key=lambda c: c[1])
        best_key = out.best_values
    out.best_values = best_key
    out.seconds = time.perf_counter() - t0
    return out
