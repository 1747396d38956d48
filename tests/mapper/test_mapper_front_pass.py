"""Best-first's dominance passes over every structure's cells (`mapper.strategies.front_pass.LivePass`).

- the first pass runs once the best latency is proven and leaves out the structures the front dominates;
- as the front grows, a pass runs again and leaves out the structures left to visit that the grown front
  dominates (counted as pruned), but not when visiting the structures left costs less than a pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodels.dominance import RTOL
from costmodels.protocol import Param
from mapper.strategies import front_pass
from mapper.strategies.front_pass import LivePass, OpenRows, bulk_visits, seed_structures

N = 10
#: structure i: latency bound i + 1, one cell (latency i + 1, bytes 100 - 10 i)
CELLS = np.array([[i + 1.0, 100.0 - 10 * i] for i in range(N)])


class Clock:
    """A clock the pass policy reads (`front_pass.time.perf_counter`) that moves only when told: the passes'
    and visits' durations are the test's, whatever the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


CLOCK = Clock()


@pytest.fixture(autouse=True)
def _clock(monkeypatch: pytest.MonkeyPatch) -> None:
    CLOCK.now = 0.0
    monkeypatch.setattr(front_pass, "time", CLOCK)
    monkeypatch.setattr(front_pass, "OPEN_SEEDS", 0)  # the passes' policy alone; the seeds have their own test


def _run(
    grown_front: np.ndarray,
    asked: list[list[int]] | None = None,
    take: int = 3,
    passes: list[np.ndarray | None] | None = None,
    cells: np.ndarray = CELLS,
) -> tuple[list[int], LivePass]:
    """Visit the N structures through a `LivePass`; `asked` hears each look-ahead (`Evaluator.score_ahead`),
    which goes through `take` structures at a time; `passes` hears the structures each pass is asked about."""

    def score_ahead(structures: list[dict[str, int]]) -> int:
        if asked is not None:
            asked.append([s["x"] for s in structures])
        return min(take, len(structures))

    ev = SimpleNamespace(front_values=np.array([[0.5, 1000.0]]), score_ahead=score_ahead)  # dominates no cell
    structural = (Param(name="x", choices=tuple(range(N))),)
    flat = cells[:, 0].copy()

    def blocks(front: np.ndarray, live: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
        if passes is not None:
            passes.append(None if live is None else live.copy())
        CLOCK.sleep(0.002)  # a pass takes some time: the visits after it must take twice that
        yield 0, cells

    lp = LivePass(flat, structural, ev, 0, blocks, set(), lambda: False)  # type: ignore[arg-type]
    order = ((key, float(flat[key[0]])) for key in ((i,) for i in range(N)))
    visited = []
    for key, _ in lp.visits(order):
        visited.append(int(key[0]))
        ev.front_values = grown_front  # the first visit grows the front
        CLOCK.sleep(0.006)
    return visited, lp


def test_a_pass_runs_again_as_the_front_grows_and_leaves_out_what_it_dominates() -> None:
    # (0.5, 55) dominates the cells of structures 0-4 (bytes 100 .. 60): 1-4 are still to visit
    visited, lp = _run(np.array([[0.5, 55.0]]))
    assert visited == [0, 5, 6, 7, 8, 9]
    assert lp.live == N and lp.passes == 1 and lp.later == 4 and lp.pruned == 4


def test_a_pass_again_is_asked_about_the_live_structures_left_to_visit_only() -> None:
    """The first pass is asked about every structure; a later one only about the live structures after the one
    just visited (`FrontCellBlocks`' ``live``: a target may price those more finely, Trainium's cases)."""
    passes: list[np.ndarray | None] = []
    _run(np.array([[0.5, 55.0]]), passes=passes)
    assert len(passes) == 2 and passes[0] is None
    later = passes[1]
    assert later is not None and np.flatnonzero(later).tolist() == list(range(1, N))


def test_no_pass_again_when_the_front_has_not_changed() -> None:
    visited, lp = _run(np.array([[0.5, 1000.0]]))
    assert visited == list(range(N)) and lp.passes == 0 and lp.pruned == 0


def test_no_pass_again_when_too_few_structures_are_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(front_pass, "REPASS_PAYS", 1e9)  # visiting what is left always costs less than a pass
    # without the rows the first pass left open (`OpenRows`), every live structure is visited
    monkeypatch.setattr(front_pass.OpenRows, "out", lambda self, s, front: np.zeros(len(s), dtype=bool))
    visited, lp = _run(np.array([[0.5, 55.0]]))
    assert visited == list(range(N)) and lp.passes == 0 and lp.pruned == 0


def test_live_structures_whose_open_rows_the_front_comes_to_dominate_are_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No pass again, but the rows the first pass left open: the front grown by the first visit dominates those of
    structures 1-4, which are left out unvisited, as pruned."""
    monkeypatch.setattr(front_pass, "REPASS_PAYS", 1e9)
    visited, lp = _run(np.array([[0.5, 55.0]]))
    assert visited == [0, 5, 6, 7, 8, 9] and lp.passes == 0
    assert lp.rows_out == 4 and lp.pruned == 4 and "left out when the front came to dominate" in lp.note(True)


def test_the_coming_live_structures_are_priced_ahead_a_few_at_a_time() -> None:
    asked: list[list[int]] = []
    visited, _ = _run(np.array([[0.5, 55.0]]), asked, take=3)
    # structure 0 asks for every live one after the pass; each look-ahead takes 3, the next one starts after them;
    # the second pass (after 0's visit) left out 1-4, so the look-ahead from 5 asks for 5-9 only
    assert asked[0] == list(range(N))
    assert asked[1] == [5, 6, 7, 8, 9] and asked[2] == [8, 9]
    assert visited == [0, 5, 6, 7, 8, 9]


def test_after_the_first_pass_the_live_structures_on_the_staircase_of_their_open_cells_come_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`OPEN_SEEDS`: the live structures no other beats on both its latency bound and its open cells' least bytes
    (the pass's own rows) are visited first, each once; the latency order then goes on with the rest."""
    monkeypatch.setattr(front_pass, "OPEN_SEEDS", 16)
    cells = np.array([[i + 1.0, b] for i, b in enumerate([50.0, 60, 40, 70, 30, 80, 90, 20, 95, 99])])
    visited, lp = _run(np.array([[0.5, 1000.0]]), cells=cells)  # the front dominates no cell: all live
    assert visited == [0, 2, 4, 7, 1, 3, 5, 6, 8, 9]
    assert lp.open_seeded == 4 and lp.live == N and lp.after == 0
    monkeypatch.setattr(front_pass, "OPEN_SEEDS", 2)  # the two ends of the staircase
    visited, lp = _run(np.array([[0.5, 1000.0]]), cells=cells)
    assert visited == [0, 7, 1, 2, 3, 4, 5, 6, 8, 9] and lp.open_seeded == 2


def test_the_pass_keeps_each_structures_least_open_cell_objective_by_objective() -> None:
    """`live_structures`' ``open_floors``: the least of each objective over the cells the front leaves open only."""
    from mapper.bounds import live_structures

    front = np.array([[2.0, 2.0]])
    first = np.array([[1.0, 9.0], [3.0, 3.0], [2.5, 2.5]])  # one cell of each of structures 0, 1, 2
    second = np.array([[5.0, 4.0], [1.0, 1.5], [4.0, 1.0]])  # another cell of each
    lows = np.full((3, 2), np.inf)
    live = live_structures(iter([(0, first), (0, second)]), 3, front, None, lows)
    assert live is not None and live.tolist() == [True, True, True]
    # (5, 4), (3, 3) and (2.5, 2.5) are dominated by (2, 2): their values are not the open cells' least
    assert lows.tolist() == [[1.0, 9.0], [1.0, 1.5], [4.0, 1.0]]
    lows = np.full((2, 2), np.inf)
    live = live_structures(iter([(1, np.array([[3.0, 3.0]]))]), 2, front, None, lows)  # a block from structure 1
    assert live is not None and live.tolist() == [False, False] and np.isinf(lows).all()


def test_seed_structures_are_the_staircase_of_latency_bounds_over_floors() -> None:
    """`front_pass.seed_structures`: each structure no other beats on both its latency bound and its floor,
    at most `count` of them spread along the staircase; infinite bounds or floors are never picked."""
    flat = np.array([5.0, 1.0, 4.0, 2.0, 3.0, np.inf, 0.5, 6.0])
    floor = np.array([1.0, 9.0, 2.0, 5.0, 2.0, 0.1, np.inf, 0.5])
    # by floor: 7 (0.5, 6), 0 (1, 5), 4 (2, 3), 2 (2, 4), 3 (5, 2), 1 (9, 1); staircase 7, 0, 4, 3, 1
    assert front_pass.seed_structures(flat, [floor]).tolist() == [0, 1, 3, 4, 7]
    picked = front_pass.seed_structures(flat, [floor], count=2)
    assert picked.tolist() == [1, 7]  # the two ends
    assert front_pass.seed_structures(flat, []).size == 0


def test_seed_structures_never_pick_a_structure_to_skip() -> None:
    flat = np.array([1.0, 1.0, 2.0, 3.0, 3.0])
    floor = np.array([9.0, 9.0, 5.0, 1.0, 1.0])  # 0 and 1, 3 and 4: the same bound and floor (a repeat)
    assert seed_structures(flat, [floor], count=8).tolist() == [0, 2, 3]
    skip = np.array([False, True, False, False, True])
    assert seed_structures(flat, [floor], count=8, skip=skip).tolist() == [0, 2, 3]
    skip = np.array([True, False, False, True, False])  # then the other of each pair is the staircase's
    assert seed_structures(flat, [floor], count=8, skip=skip).tolist() == [1, 2, 4]


def test_bulk_visits_leave_out_the_structures_to_skip_and_say_which() -> None:
    structural = (Param(name="x", choices=tuple("abcde")),)
    flat = np.array([3.0, 1.0, 2.0, 1.0, 0.5])
    skipped: set[tuple[object, ...]] = set()
    got = list(bulk_visits(flat, structural, lambda: np.array([False, False, False, True, False]), skipped))
    assert got == [(("e",), 0.5), (("b",), 1.0), (("c",), 2.0), (("a",), 3.0)] and skipped == {("d",)}
    assert [k for k, _ in bulk_visits(flat, structural)] == [("e",), ("b",), ("d",), ("c",), ("a",)]


def test_seeds_are_visited_before_the_first_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """`LivePass` visits its seed structures once the least latency is proven, before the pass."""
    from mapper.strategies import front_pass

    floors = [np.arange(float(N))]
    picks = lambda flat, got, skip=None: np.array([7, 9]) if got is floors else np.zeros(0, dtype=int)  # noqa: E731
    monkeypatch.setattr(front_pass, "seed_structures", picks)
    seen_at_pass: list[int] = []
    visited_seeds: list[int] = []
    ev = SimpleNamespace(front_values=np.array([[0.5, 1000.0]]), score_ahead=lambda s: len(s))
    structural = (Param(name="x", choices=tuple(range(N))),)
    flat = CELLS[:, 0].copy()

    def blocks(front: np.ndarray, asked: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
        seen_at_pass.extend(visited_seeds)
        yield 0, CELLS

    def visit(key: tuple[int, ...]) -> None:
        visited_seeds.append(int(key[0]))

    seeds = (lambda: floors, visit)
    lp = LivePass(flat, structural, ev, 0, blocks, {(9,)}, lambda: False, seeds)  # type: ignore[arg-type]
    order = ((key, float(flat[key[0]])) for key in ((i,) for i in range(N)))
    list(lp.visits(order))
    assert seen_at_pass == [7] and lp.seeded == 1  # 9 was seen already


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 40),
    structures=st.integers(1, 12),
    m=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_open_rows_leave_out_a_structure_only_when_every_row_of_it_is_dominated(
    n: int, structures: int, m: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, structures, size=n)
    rows = rng.integers(0, 6, size=(n, 2)).astype(np.float64)
    cut = int(rng.integers(0, n + 1))  # two blocks, as a pass yields them
    kept = OpenRows()
    kept.add(owner[:cut], rows[:cut])
    kept.add(owner[cut:], rows[cut:])
    kept.close()
    front = rng.integers(0, 6, size=(m, 2)).astype(np.float64)
    asked = np.arange(structures + 2)  # (the last two have no row: never out)
    got = kept.out(asked, front)
    for s in asked.tolist():
        mine = rows[owner == s]
        expect = bool(len(mine)) and all(any(np.all(f <= r * (1 + RTOL)) for f in front) for r in mine)
        assert got[s] == expect


def test_open_rows_beyond_the_limit_keep_none() -> None:
    kept = OpenRows(limit=3)
    kept.add(np.array([0, 1]), np.array([[1.0, 1.0], [2.0, 2.0]]))
    kept.add(np.array([2, 3]), np.array([[3.0, 3.0], [4.0, 4.0]]))  # 4 rows > 3: none kept
    kept.close()
    assert not kept.out(np.arange(4), np.array([[0.0, 0.0]])).any()
    within = OpenRows(limit=4)
    within.add(np.array([0, 1, 2, 3]), np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]))
    assert within.close().out(np.arange(4), np.array([[0.0, 0.0]])).all()
