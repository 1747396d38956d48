"""Evaluating a cost model over many points from small per-parameter tables.

A cost model of a product space is mostly made of quantities that depend on a few parameters
only (the M split depends on ``base_m``, ``l1_m`` and the grid; the L0A tile on ``base_m`` and
``base_k``). A `Table` holds such quantities (its *fields*) for every combination of the
distinct values of its parameters (its *dims*). A batch of points, encoded as integer codes
(ascend_codes.py), is then priced in one of two ways, both feeding the same model function
with the same field values, so both give bit-identical results:

- *gather*: each point gathers its fields from the tables (one ``np.take`` per table and
  dtype), in chunks that stay in cache, and the model runs elementwise on the points;
- *grid*: when the points fill most of the box of codes they span (an enumeration of the
  space, or a sub-space with some parameters fixed), the model runs once per cell of that box
  with numpy broadcasting (most terms depend on a few dims and stay small), and each point
  reads its cell.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from costmodels.ascend_codes import Encoded, flat_index

#: Points per chunk of the gather path (a few hundred KiB per array: stays in L2).
CHUNK = 1 << 14
#: Use the grid path when the box of codes has at most this many cells per point.
GRID_CELLS_PER_POINT = 2.0

Model = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Table:
    """Fields over the distinct values of some parameters.

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


def gather_fields(tables: Sequence[Table], codes: Sequence[np.ndarray], sizes: Sequence[int]) -> dict[str, np.ndarray]:
    """Every field of every table, one entry per point."""
    out: dict[str, np.ndarray] = {}
    for t in tables:
        idx = flat_index([codes[d] for d in t.dims], [sizes[d] for d in t.dims])
        for names, stack in t.stacks:
            out.update(zip(names, np.take(stack, idx, axis=1), strict=True))
    return out


def grid_fields(tables: Sequence[Table], lo: Sequence[int], hi: Sequence[int]) -> dict[str, np.ndarray]:
    """Every field restricted to the box ``lo..hi`` of codes, shaped to broadcast over the box."""
    out: dict[str, np.ndarray] = {}
    ndim = len(lo)
    for t in tables:
        window = tuple(slice(lo[d], hi[d] + 1) for d in t.dims)
        shape = [1] * ndim
        for d in t.dims:
            shape[d] = hi[d] - lo[d] + 1
        for name, arr in t.fields.items():
            out[name] = arr[window].reshape(shape)
    return out


def evaluate(
    tables: Sequence[Table], encoded: Sequence[Encoded], model: Model, outputs: dict[str, np.dtype]
) -> dict[str, np.ndarray]:
    """The `outputs` of `model` for every point of the encoded columns (grid or gather path)."""
    n = len(encoded[0].codes)
    lo = [e.lo for e in encoded]
    hi = [e.hi for e in encoded]
    box = tuple(h - low + 1 for low, h in zip(lo, hi, strict=True))
    if math.prod(box) <= GRID_CELLS_PER_POINT * n:
        res = model(grid_fields(tables, lo, hi))
        cell = flat_index([e.codes - e.lo if e.lo else e.codes for e in encoded], box)
        return {k: np.take(np.broadcast_to(res[k], box).reshape(-1), cell) for k in outputs}
    sizes = [len(e.values) for e in encoded]
    out = {k: np.empty(n, dtype=dt) for k, dt in outputs.items()}
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        res = model(gather_fields(tables, [e.codes[start:stop] for e in encoded], sizes))
        for k, arr in out.items():
            arr[start:stop] = res[k]
    return out
