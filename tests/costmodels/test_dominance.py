"""`costmodels.dominance.dominated_rows` against its definition, brute force (issue #12, several objectives)."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.dominance import RTOL, dominated_columns, dominated_rows, finite_rows


def by_definition(rows: np.ndarray, front: np.ndarray) -> np.ndarray:
    """A row is dominated when its first entry is not finite, or a front point is no worse everywhere (RTOL)."""
    out = []
    for r in rows:
        out.append(not np.isfinite(r[0]) or any(bool(np.all(f <= r * (1 + RTOL))) for f in front))
    return np.array(out, dtype=bool)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("seed", range(20))
def test_dominated_rows_is_the_definition(seed: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    front = rng.integers(1, 6, size=(rng.integers(1, 6), k)).astype(float)
    rows = rng.integers(0, 7, size=(200, k)).astype(float)
    rows[rng.random(200) < 0.1, rng.integers(0, k)] = np.inf  # infinite entries, the first one included
    rows[:5] = front[0]  # equal to a front point: dominated (weakly)
    assert np.array_equal(dominated_rows(rows, front), by_definition(rows, front))


def test_a_row_no_front_point_matches_on_the_first_objective_is_live_even_if_its_second_is_infinite() -> None:
    front = np.array([[2.0, 1.0], [3.0, 0.5]])
    rows = np.array([[1.0, np.inf], [1.0, 0.1], [2.0, np.inf], [np.inf, 0.0], [2.0 * (1 + RTOL / 2), 1.0]])
    assert dominated_rows(rows, front).tolist() == [False, False, True, True, True]


@pytest.mark.parametrize("seed", range(10))
def test_two_columns_and_finite_rows_are_the_definition(seed: int) -> None:
    """`dominated_columns` (two objectives kept apart, strided columns of a table too) is `dominated_rows`' definition,
    and `finite_rows` is ``np.isfinite(rows).all(axis=1)``."""
    rng = np.random.default_rng(seed)
    front = rng.integers(1, 6, size=(rng.integers(1, 6), 2)).astype(float)
    rows = rng.integers(0, 7, size=(300, 2)).astype(float)
    rows[rng.random(300) < 0.1, rng.integers(0, 2)] = np.inf
    rows[rng.random(300) < 0.05, 1] = np.nan
    assert np.array_equal(dominated_columns(rows[:, 0], rows[:, 1], front), by_definition(rows, front))
    wide = np.concatenate([rows, rng.random((300, 1))], axis=1)
    wide[7, 2] = -np.inf
    for r in (rows, wide):
        assert np.array_equal(finite_rows(r), np.isfinite(r).all(axis=1))
