"""Per-problem preparations a target keeps between calls (its space, coder and priced tables).

A mapper scores the same problem many times (chunks of an enumeration, one sub-space per trial),
so a target does the point-independent work once and keeps it for the last few problems. Lookup
is by identity first (the mapper passes one problem object throughout), then by equality, so a
request that parses an identical problem again reuses the work too. Problems are frozen, so a kept
preparation can never go stale.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from threading import Lock
from typing import Generic, TypeVar

from workload.problem import Problem

T = TypeVar("T")


class ProblemMemo(Generic[T]):
    """The `build(problem)` of the last `size` problems, most recently used kept longest."""

    def __init__(self, build: Callable[[Problem], T], size: int = 8) -> None:
        self.build = build
        self.size = size
        self._items: OrderedDict[int, tuple[Problem, T]] = OrderedDict()
        self._lock = Lock()

    def get(self, problem: Problem) -> T:
        key = id(problem)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] is problem:
                self._items.move_to_end(key)
                return hit[1]
            for old, (prob, value) in reversed(self._items.items()):
                if prob == problem:  # an equal problem: one entry serves both
                    self._items.move_to_end(old)
                    return value
        value = self.build(problem)  # outside the lock: building may take a while
        with self._lock:
            self._remember(key, problem, value)
        return value

    def peek(self, problem: Problem) -> T | None:
        """The kept `build(problem)`, or None when it was not built (never builds)."""
        with self._lock:
            hit = self._items.get(id(problem))
            if hit is not None and hit[0] is problem:
                return hit[1]
            return next((value for prob, value in self._items.values() if prob == problem), None)

    def _remember(self, key: int, problem: Problem, value: T) -> None:
        self._items[key] = (problem, value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
