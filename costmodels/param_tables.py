"""Evaluating a cost model over many points from small per-parameter tables.

A cost model of a product space is mostly made of quantities that depend on a few parameters
only (the M split depends on ``base_m``, ``l1_m`` and the grid; the L0A tile on ``base_m`` and
``base_k``). A `Table` holds such quantities (its *fields*) for every combination of the
values of its parameters (its *dims*). A batch of points, given as integer codes into those
values (`Encoded`), is then priced in one of three ways, all feeding the same model function
with the same field values, so all give bit-identical results:

- *gather*: each point gathers its fields from the tables (one ``np.take`` per table and
  dtype), in chunks that stay in cache, and the model runs elementwise on the points;
- *grid*: when the points fill most of the box of codes they span (an enumeration of the
  space, or a sub-space with some parameters fixed), the model runs once per cell of that box
  with numpy broadcasting (each term over only the dims it depends on), and each point reads
  its cell;
- *tabulate*: the grid over the whole space (ascend/cube_grid.py), kept by the caller, so later
  points only read their cell (`flat_index` of their codes), and a run of consecutive points
  (`run_start`) a slice of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

#: Points per chunk of the gather path (a few hundred KiB per array: stays in L2).
CHUNK = 1 << 14
#: Use the grid path when the box of codes has at most this many cells per point.
GRID_CELLS_PER_POINT = 2.0
#: Points per block of `run_start` (its scratch, 256 KiB, stays in cache).
RUN_BLOCK = 1 << 15

Model = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Encoded:
    """One column as codes into `values` (the values the tables are built over)."""

    codes: np.ndarray  # integers, one per point
    values: tuple[object, ...]
    lo: int  # smallest and largest code present
    hi: int


@dataclass(frozen=True)
class Table:
    """Fields over the values of some parameters.

    The fields are laid out over the axes of a grid, one per parameter in the order the model is
    evaluated in (``order`` below; numpy follows its operands' memory order, so the grid's axes
    are the fields' own), with size 1 on the axes of the parameters they do not depend on.

    Attributes:
        dims: positions of the parameters (in the encoded column order) the fields depend on, in
            the grid's axis order.
        fields: name -> array over the grid's axes, ``len(values of dim)`` on the axes of `dims`.
    """

    dims: tuple[int, ...]
    fields: dict[str, np.ndarray]

    @cached_property
    def stacks(self) -> tuple[tuple[tuple[str, ...], np.ndarray], ...]:
        """The fields stacked per dtype as ``(names, array[field, flat cell])`` for one gather each."""
        by_dtype: dict[np.dtype, list[str]] = {}
        for name, arr in self.fields.items():
            by_dtype.setdefault(arr.dtype, []).append(name)
        return tuple(
            (tuple(names), np.stack([np.ascontiguousarray(self.fields[k]).reshape(-1) for k in names]))
            for names in by_dtype.values()
        )


def flat_index(codes: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """Row-major index of each point into an array of shape `sizes` (codes outermost first)."""
    idx = np.array(codes[0], dtype=np.intp)
    for c, size in zip(codes[1:], sizes[1:], strict=True):
        idx *= size
        idx += c
    return idx


def run_start(codes: Sequence[np.ndarray], sizes: Sequence[int]) -> int | None:
    """Row-major index of the first point if the points are consecutive ones (``s, s + 1, ...``), else None.

    A chunk of an enumeration is such a run: it then reads a kept table as a slice. The check is
    exact (every point's index is computed, `RUN_BLOCK` points at a time so the scratch stays in
    cache); points that are no run are usually told apart by their first and last point alone.
    """
    n = len(codes[0]) if codes else 0
    if n == 0:
        return None
    first, last = (_index_of(codes, sizes, i) for i in (0, n - 1))
    if last - first != n - 1 or first < 0 or last >= math.prod(sizes):
        return None
    m = min(n, RUN_BLOCK)
    step, idx = np.arange(m, dtype=np.intp), np.empty(m, dtype=np.intp)
    for b0 in range(0, n, RUN_BLOCK):
        b1 = min(n, b0 + RUN_BLOCK)
        x = idx[: b1 - b0]
        np.copyto(x, codes[0][b0:b1])  # flat_index, in place
        for c, size in zip(codes[1:], sizes[1:], strict=True):
            x *= size
            x += c[b0:b1]
        x -= step[: b1 - b0]
        if x.min() != first + b0 or x.max() != first + b0:
            return None
    return first


def _index_of(codes: Sequence[np.ndarray], sizes: Sequence[int], i: int) -> int:
    idx = 0
    for c, size in zip(codes, sizes, strict=True):
        idx = idx * size + int(c[i])
    return idx


def gather_fields(tables: Sequence[Table], codes: Sequence[np.ndarray], sizes: Sequence[int]) -> dict[str, np.ndarray]:
    """Every field of every table, one entry per point."""
    out: dict[str, np.ndarray] = {}
    for t in tables:
        idx = (
            codes[t.dims[0]] if len(t.dims) == 1 else flat_index([codes[d] for d in t.dims], [sizes[d] for d in t.dims])
        )
        for names, stack in t.stacks:
            out.update(zip(names, np.take(stack, idx, axis=1), strict=True))
    return out


def grid_fields(
    tables: Sequence[Table], lo: Sequence[int], hi: Sequence[int], order: Sequence[int]
) -> dict[str, np.ndarray]:
    """Every field restricted to the box ``lo..hi`` of codes, laid out to broadcast over the box.

    The fields are laid out over the axes of `order` already (see `Table`), so this only slices
    the axes each table depends on.
    """
    out: dict[str, np.ndarray] = {}
    for t in tables:
        window = tuple(slice(lo[d], hi[d] + 1) if d in t.dims else slice(None) for d in order)
        out.update((name, arr[window]) for name, arr in t.fields.items())
    return out


def evaluate(
    tables: Sequence[Table],
    encoded: Sequence[Encoded],
    model: Model,
    outputs: dict[str, np.dtype],
    order: Sequence[int],
) -> dict[str, np.ndarray]:
    """The `outputs` of `model` for every point of the encoded columns (grid path, axes in `order`, or gather)."""
    n = len(encoded[0].codes)
    lo = [e.lo for e in encoded]
    hi = [e.hi for e in encoded]
    box = tuple(hi[d] - lo[d] + 1 for d in order)
    if math.prod(box) <= GRID_CELLS_PER_POINT * n:
        res = model(grid_fields(tables, lo, hi, order))
        cell = flat_index([encoded[d].codes for d in order], box)
        offset = _offset([lo[d] for d in order], box)
        if offset:
            cell -= offset
        return {k: np.take(np.broadcast_to(res[k], box).reshape(-1), cell) for k in outputs}
    sizes = [len(e.values) for e in encoded]
    out = {k: np.empty(n, dtype=dt) for k, dt in outputs.items()}
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        res = model(gather_fields(tables, [e.codes[start:stop] for e in encoded], sizes))
        for k, arr in out.items():
            arr[start:stop] = res[k]
    return out


def _offset(lo: Sequence[int], box: Sequence[int]) -> int:
    """`flat_index` of the box's first corner: subtracted once instead of `lo` from each column."""
    off = 0
    for low, size in zip(lo, box, strict=True):
        off = off * size + low
    return off
