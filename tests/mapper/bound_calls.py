"""Count a target's ``structure_bound`` calls in a test (how much bounding a search or a preparation asked for)."""

from __future__ import annotations

import pytest


def count_structure_bounds(target: object, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch the target's class so that every ``structure_bound`` call adds 1 to the returned one-item list."""
    calls = [0]
    own = type(target).structure_bound  # type: ignore[attr-defined]

    def counted(self: object, problem: object, fixed: dict[str, object]) -> float:
        calls[0] += 1
        return own(self, problem, fixed)  # type: ignore[no-any-return]

    monkeypatch.setattr(type(target), "structure_bound", counted)
    return calls
