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
- *tabulate*: the grid over the whole space, kept by the caller, so later points only read
  their cell (`flat_index` of their codes).
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
#: Cells per slab when a whole space is tabulated (the model's temporaries stay a few hundred KiB).
SLAB = 1 << 15

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

    Attributes:
        dims: positions of the parameters (in the encoded column order) the fields depend on.
        fields: name -> array of shape ``(len(values of dim) for dim in dims)``.
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


def in_order(tables: Sequence[Table], order: Sequence[int]) -> tuple[Table, ...]:
    """The tables with their dims (and field axes) sorted by `order`: `grid_fields` then only slices them."""
    pos = {d: i for i, d in enumerate(order)}
    out = []
    for t in tables:
        axes = sorted(range(len(t.dims)), key=lambda j: pos[t.dims[j]])
        fields = {k: np.ascontiguousarray(np.transpose(a, axes)) for k, a in t.fields.items()}
        out.append(Table(dims=tuple(t.dims[j] for j in axes), fields=fields))
    return tuple(out)


def flat_index(codes: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """Row-major index of each point into an array of shape `sizes` (codes outermost first)."""
    idx = np.array(codes[0], dtype=np.intp)
    for c, size in zip(codes[1:], sizes[1:], strict=True):
        idx *= size
        idx += c
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

    The box's axes are the parameters in `order` (outermost first): numpy runs a term's inner
    loop over the trailing axes its operands share, so the dims most terms depend on go last.
    """
    out: dict[str, np.ndarray] = {}
    pos = {d: i for i, d in enumerate(order)}
    for t in tables:
        window = tuple(slice(lo[d], hi[d] + 1) for d in t.dims)
        axes = sorted(range(len(t.dims)), key=lambda j: pos[t.dims[j]])
        shape = [1] * len(order)
        for d in t.dims:
            shape[pos[d]] = hi[d] - lo[d] + 1
        if axes == list(range(len(axes))):  # already in order (see `in_order`)
            out.update((name, arr[window].reshape(shape)) for name, arr in t.fields.items())
        else:
            out.update((name, arr[window].transpose(axes).reshape(shape)) for name, arr in t.fields.items())
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


def tabulate(
    tables: Sequence[Table], shape: Sequence[int], model: Model, outputs: dict[str, np.dtype], order: Sequence[int]
) -> dict[str, np.ndarray]:
    """The `outputs` of `model` on every cell of the space of `shape`, flat in C order (of `shape`).

    A point's result is at ``flat_index(its codes, shape)``. The grid is computed with its axes in
    `order` (see `grid_fields`), in slabs (about `SLAB` cells, at least an eighth of that) cut
    along the axes after the first, so the model's temporaries stay small while the terms that
    do not depend on the first axis are still computed once per slab.
    """
    dims = [shape[d] for d in order]
    out = {k: np.empty(tuple(shape), dtype=dt) for k, dt in outputs.items()}
    view = {k: arr.transpose(order) for k, arr in out.items()}  # the same memory, axes in `order`
    split, cells = 1, math.prod(dims)
    while split < len(dims) and cells > SLAB and cells // dims[split] >= SLAB // 8:  # no slivers: ops cost per call
        cells //= dims[split]
        split += 1
    lo, hi = [0] * len(shape), [s - 1 for s in shape]
    for lead in np.ndindex(*dims[1:split]):
        for d, i in zip(order[1:split], lead, strict=True):
            lo[d] = hi[d] = i
        res = model(grid_fields(tables, lo, hi, order))
        where = (slice(None), *lead)
        box = (dims[0], *[1] * len(lead), *dims[split:])
        for k, arr in view.items():
            arr[where] = np.broadcast_to(res[k], box).reshape(arr[where].shape)
    return {k: arr.reshape(-1) for k, arr in out.items()}
