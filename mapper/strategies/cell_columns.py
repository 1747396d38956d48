"""A cell table's columns as the cell rounds read them, kept for the problem's next search (issue #12).

`mapper.strategies.cell_rounds` reads the target's table of every structure's cells (`mapper.bounds.FrontCellTable`)
as one column per objective, lifted to the whole space's bound, and every structure's points sorted by cell. The
target keeps the table per problem, so a problem's next search with the same objectives finds them here.
"""

from __future__ import annotations

import threading
import weakref
from typing import NamedTuple

import numpy as np


class Lifted(NamedTuple):
    """What `lifted` keeps of a table: the table (weakly), the bound it was lifted to, and the arrays."""

    table: weakref.ref[np.ndarray]
    whole: bytes
    cell_of: np.ndarray
    columns: list[np.ndarray]
    open: np.ndarray
    by_cell: np.ndarray
    starts: np.ndarray


#: the last tables' `lifted` arrays: a problem's next search reads the same table (the target keeps it,
#: `FrontCellTable`), and lifting its cells and sorting the points by cell took about 1.3 ms of a 20 ms search
#: (ascend-a5, ResNet-50 layer1.0.conv1, latency + energy, measured once by hand outside `bench/`)
KEPT: list[Lifted] = []
KEPT_TABLES = 4
_LOCK = threading.Lock()  # (a service may search in several threads)


def lifted(
    table: np.ndarray, whole: np.ndarray, cell_of: np.ndarray
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Each objective's column over structure x cell of `table` (structures x cells x objectives), lifted to the whole
    space's bound `whole` (kept apart: numpy's operations along rows of two entries are slow,
    `costmodels.dominance.finite_rows`); the cells with every entry finite (a new array: the caller's to change);
    every structure's points by cell (`cell_of`: each point's cell, the same for every structure; ascending point
    numbers within a cell) and where each cell's run starts. Kept for the same table (the object the target keeps),
    bound and cells of points (`KEPT`)."""
    root = table
    while isinstance(root.base, np.ndarray):
        root = root.base
    key = np.asarray(whole, dtype=np.float64).tobytes()
    with _LOCK:
        kept_now = list(KEPT)
    for kept in kept_now:
        if kept.table() is root and kept.whole == key and np.array_equal(kept.cell_of, cell_of):
            return kept.columns, kept.open.copy(), kept.by_cell, kept.starts
    values = np.asarray(table, dtype=np.float64)
    columns = [np.maximum(values[:, :, j], whole[j]).reshape(-1) for j in range(values.shape[2])]
    open_ = np.logical_and.reduce([np.isfinite(c) for c in columns])
    small = np.int16 if values.shape[1] <= np.iinfo(np.int16).max else np.intp  # (numpy's radix sort: 2x faster)
    by_cell = np.argsort(np.asarray(cell_of).astype(small), kind="stable")
    starts = np.searchsorted(np.asarray(cell_of)[by_cell], np.arange(values.shape[1] + 1))
    for a in (*columns, by_cell, starts):
        a.flags.writeable = False  # shared by the searches that find them kept
    try:
        ref = weakref.ref(root)
    except TypeError:  # (an array that takes no weak reference: not kept)
        return columns, open_, by_cell, starts
    with _LOCK:  # (the newest first; tables gone and the oldest out)
        alive = [k for k in KEPT if k.table() is not None][: KEPT_TABLES - 1]
        KEPT[:] = [Lifted(ref, key, np.array(cell_of), columns, open_.copy(), by_cell, starts), *alive]
    return columns, open_, by_cell, starts
