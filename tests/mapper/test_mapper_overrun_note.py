"""A result says when its search took well past its time budget, and why (the preparation is not cut)."""

from __future__ import annotations

import pytest

from costmodels.registry import get_target
from mapper.report import OVERRUN_NOTED, Found, package_result
from mapper.result import TrialCounts
from mapper.settings import SearchSettings
from workload.einsum import einsum

P = einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, weight=1)


def _notes(seconds: float, budget: float) -> list[str]:
    target = get_target("trn2")
    counts = TrialCounts(trials=0, complete=0, infeasible=0, points_scored=0)
    found = Found("bestfirst", None, None, False, "seconds", [], counts)  # (no point: the note needs none)
    settings = SearchSettings(max_seconds=budget)
    result = package_result(
        P, target, settings, found, key="k", problem_hash="h", version="v", overrides={}, seconds=seconds,
        validate=False, pareto=[],
    )  # fmt: skip
    return [n for n in result.notes if "against its" in n]


@pytest.mark.parametrize(
    ("seconds", "budget", "said"),
    [
        (0.8, 0.05, True),  # 16x: the preparation of a large space
        (0.05 + OVERRUN_NOTED + 0.01, 0.05, True),
        (0.05 + OVERRUN_NOTED - 0.01, 0.05, False),  # a step's slack: not worth a note
        (14.0, 10.0, False),  # within 1.5x of a long budget
        (16.0, 10.0, True),
    ],
)
def test_a_search_well_past_its_budget_says_so_and_why(seconds: float, budget: float, said: bool) -> None:
    notes = _notes(seconds, budget)
    assert bool(notes) == said
    if said:
        assert f"{seconds:.2f} s against its {budget:g} s budget" in notes[0] and "preparation" in notes[0]
