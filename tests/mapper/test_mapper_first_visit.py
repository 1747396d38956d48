"""A first visit priced in two steps (`mapper.strategies.first_visit`): the staircase cells, then what is open.

The structure's front must be the one its every point gives, with points left out; the staircase cells are
those no other cell's row is at most on every objective.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from costmodels.dominance import dominated_rows
from costmodels.registry import get_target
from mapper.bounds import FrontBounds
from mapper.pareto import pareto_front
from mapper.strategies.encoding import Encoding, split_params
from mapper.strategies.first_visit import staircase_first
from mapper.strategies.objective import Evaluator
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

CONV = conv2d(batch=2, in_channels=17, out_channels=40, input_height=14, input_width=14, kernel=3, padding=1)
GEMM = einsum("mk,kn->mn", {"m": 300, "k": 129, "n": 257}, dtype="bf16", weight=1)


def _values(score: object, objectives: tuple[str, ...]) -> np.ndarray:
    vals = np.stack([np.asarray(score.objectives[o], dtype=np.float64) for o in objectives], axis=1)  # type: ignore[attr-defined]
    vals[~np.asarray(score.feasible, dtype=bool)] = np.inf  # type: ignore[attr-defined]
    return vals


def _front(values: np.ndarray) -> list[tuple[float, ...]]:
    return sorted(tuple(float(x) for x in values[i]) for i in pareto_front(values))


@pytest.mark.parametrize(
    ("preset", "problem", "objectives"),
    [
        ("ascend-a5", CONV, ("latency", "footprint")),
        ("ascend-910b", GEMM, ("energy", "latency")),
        ("ascend-910b", CONV, ("latency", "offchip_bytes")),
        ("rngd", GEMM, ("latency", "energy")),
    ],
)
def test_two_steps_keep_each_structures_front(preset: str, problem: Problem, objectives: tuple[str, ...]) -> None:
    t = get_target(preset)
    space = t.space(problem)
    structural, inner = split_params(space, 1 << 16)
    ev = Evaluator(t, problem, space, objectives, Encoding.of(structural), tuple(q.name for q in inner))
    fb = FrontBounds(t, problem, objectives)
    left_out = checked = 0
    keys = list(itertools.product(*(q.choices for q in structural)))
    for key in keys[:: max(1, len(keys) // 12)]:
        fixed = dict(zip((q.name for q in structural), key, strict=True))
        codes = ev.structure_codes(fixed)
        got = staircase_first(t, problem, fb, fixed, codes)
        if got is None:
            continue
        picked, out, score = got
        n = len(codes[inner[0].name])
        assert out == n - len(picked[inner[0].name]) >= 0
        every = _values(t.score_codes(problem, codes), objectives)
        assert _front(_values(score, objectives)) == _front(every)  # the structure's front, exactly
        left_out, checked = left_out + out, checked + 1
    assert checked and left_out > 0


def test_staircase_cells_are_those_no_other_row_is_at_most() -> None:
    t = get_target("ascend-a5")
    objectives = ("latency", "energy")
    space = t.space(CONV)
    structural, inner = split_params(space, 1 << 16)
    ev = Evaluator(t, CONV, space, objectives, Encoding.of(structural), tuple(q.name for q in inner))
    fb = FrontBounds(t, CONV, objectives)
    fixed = {q.name: q.choices[len(q.choices) // 2] for q in structural}
    codes = ev.structure_codes(fixed)
    first = fb.staircase_points(fixed, codes)
    assert first is not None and first.any() and not first.all()
    rows = np.maximum(t.structure_front_cells(CONV, fixed, objectives), fb.cheap(fixed))
    cell = t.structure_cell_of_points(CONV, fixed, codes, objectives)
    stairs = np.unique(cell[first])
    others = np.setdiff1d(np.unique(cell), stairs)
    finite = others[np.isfinite(rows[others]).all(axis=1)]
    assert dominated_rows(rows[finite], rows[stairs]).all()  # every other cell: a staircase row is at most its row
    strict = [bool(np.all(rows[s] <= rows[o]) and np.any(rows[s] < rows[o])) for s in stairs for o in stairs]
    assert not any(strict)  # and no staircase row beats another
