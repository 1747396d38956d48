"""Screening cell rows against a front a chunk at a time (`front_cells.cell_blocks`).

With three objectives and more, `costmodels.dominance.dominated_rows` compares each row with every front point
at once: one split's groups of a 8191x3x65537 fp8 GEMM on trn1 with footprint's cases are millions of rows,
which against a front of 154 points took 16 s in one call and held a comparison array of about 1.4 GB, while a
pass may stop only between the blocks it is given. Here the rows are compared `CHUNK` row-front pairs at a time,
and an empty block is yielded between chunks so that the pass may stop there
(`mapper.bounds.FrontCellBlocks`: a block may have no row).
"""

from __future__ import annotations

from collections.abc import Generator

import numpy as np

from costmodels.dominance import dominated_rows

#: row-front point pairs compared at once
CHUNK = 1 << 22


def open_rows(rows: np.ndarray, front: np.ndarray, first: int) -> Generator[tuple[int, np.ndarray], None, np.ndarray]:
    """Which of `rows` (any shape, objectives last) `front` does not dominate (``~dominated_rows``, the same shape
    without the objectives), a chunk at a time; between chunks, an empty block ``(first, no rows)``."""
    flat = rows.reshape(-1, rows.shape[-1])
    out = np.empty(len(flat), dtype=bool)
    step = max(1, CHUNK // max(1, len(front)))
    for lo in range(0, len(flat), step):
        if lo:
            yield first, flat[:0]
        out[lo : lo + step] = ~dominated_rows(flat[lo : lo + step], front)
    return out.reshape(rows.shape[:-1])
