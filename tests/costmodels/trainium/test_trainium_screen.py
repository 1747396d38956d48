"""Screening rows against a front a chunk at a time (`costmodels.trainium.screen`): the same rows open as one
`dominated_rows` call, and an empty block between chunks, so that a pass may stop there."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.dominance import dominated_rows
from costmodels.trainium import screen


def _run(rows: np.ndarray, front: np.ndarray) -> tuple[np.ndarray, list[tuple[int, np.ndarray]]]:
    blocks: list[tuple[int, np.ndarray]] = []
    gen = screen.open_rows(rows, front, 7)
    while True:
        try:
            blocks.append(next(gen))
        except StopIteration as done:
            return done.value, blocks


@pytest.mark.parametrize("objectives", [2, 3, 4])
def test_chunks_leave_open_what_one_call_does_with_an_empty_block_between(
    monkeypatch: pytest.MonkeyPatch, objectives: int
) -> None:
    rng = np.random.default_rng(objectives)
    rows = rng.random((3, 5, 11, objectives))
    rows[0, 0, 0, 0] = np.inf  # (a cell without points: dominated)
    front = rng.random((6, objectives)) * 0.8
    want = ~dominated_rows(rows.reshape(-1, objectives), front).reshape(rows.shape[:-1])
    got, blocks = _run(rows, front)
    assert got.shape == rows.shape[:-1] and np.array_equal(got, want) and 0 < want.sum() < want.size
    assert blocks == []  # (one chunk: no block)
    monkeypatch.setattr(screen, "CHUNK", 6 * 40)  # 40 rows a chunk: 165 rows in 5 chunks
    got, blocks = _run(rows, front)
    assert np.array_equal(got, want)
    assert len(blocks) == 4 and all(first == 7 and b.shape == (0, objectives) for first, b in blocks)
