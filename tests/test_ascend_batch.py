"""Guards of the fast Ascend scorer: `score_batch` must price every point as `check`/`cost` do.

The scorer encodes columns to integer codes, builds per-parameter tables and evaluates the
model per point (gather path) or per cell of the box of codes (grid path). These tests compare
it, over whole small spaces, with the point-by-point `check`/`cost` path, and the two batch
paths and the typed/object column paths with each other.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from costmodels import ascend_batch
from costmodels.ascend_codes import encode
from costmodels.protocol import Choice, Target
from costmodels.registry import get_target
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = ("ascend-910b", "ascend-a5")


def _problems() -> dict[str, Problem]:
    return {
        "f16": einsum("mk,kn->mn", {"m": 32, "k": 32, "n": 24}, dtype="f16", weight=1),
        "bf16": einsum("mk,kn->mn", {"m": 20, "k": 48, "n": 32}, dtype="bf16", weight=1),
        "i8": einsum("mk,kn->mn", {"m": 32, "k": 64, "n": 16}, dtype="i8", weight=1),
        "f32": einsum("mk,kn->mn", {"m": 17, "k": 16, "n": 32}, dtype="f32", weight=1),
        "fp8": einsum("mk,kn->mn", {"m": 32, "k": 64, "n": 32}, dtype="f8e4m3", weight=1),
        "bmm": einsum("vmk,vnk->vmn", {"v": 2, "m": 16, "n": 24, "k": 32}, dtype="f16", weight=1),
        "conv": conv2d(batch=1, in_channels=4, out_channels=16, input_height=4, input_width=4, kernel=3, padding=1),
        "rowprod": einsum("mk->m", {"m": 40, "k": 24}, dtype="f32", reduce_op="mul"),
        "rowsum": einsum("abk->ab", {"a": 3, "b": 20, "k": 48}, dtype="f16", reduce_op="add"),
        "rowmax": einsum("mk->m", {"m": 64, "k": 30}, dtype="f32", reduce_op="max"),
    }


PROBLEMS = _problems()


def _plain(v: object) -> Choice:
    return v.item() if isinstance(v, np.generic) else v  # type: ignore[return-value]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("pname", list(PROBLEMS))
def test_whole_space_matches_check_and_cost(preset: str, pname: str) -> None:
    target, problem = get_target(preset), PROBLEMS[pname]
    if target.supports(problem):
        assert pname == "fp8" and preset == "ascend-910b"  # no fp8 on A2/A3 (pto-tmatmul.txt, Constraints)
        return
    space = target.space(problem)
    assert space.size <= 300, space.size  # keep the point-by-point loop fast
    cols = space.columns()
    score = target.score_batch(problem, cols)
    feasible = 0
    for i in range(space.size):
        point = {k: _plain(v[i]) for k, v in cols.items()}
        mapping = target.mapping(problem, point)
        ok = not target.check(problem, mapping)
        assert bool(score.feasible[i]) == ok, point
        if not ok:
            assert all(math.isinf(score.objectives[o][i]) for o in target.objectives)
            continue
        feasible += 1
        report = target.cost(problem, mapping)
        assert score.objectives["latency"][i] == report.seconds, point  # bit-identical: one formula
        assert score.objectives["offchip_bytes"][i] == report.offchip_bytes
        assert score.objectives["footprint"][i] == report.footprint_bytes
    assert feasible > 0


def _big() -> Problem:
    return einsum("vmk,vnk->vmn", {"v": 6, "m": 200, "n": 120, "k": 96}, dtype="bf16", weight=1)


@pytest.mark.parametrize("preset", PRESETS)
def test_grid_and_gather_paths_agree(preset: str, monkeypatch: pytest.MonkeyPatch) -> None:
    target, problem = get_target(preset), _big()
    cols = target.space(problem).columns()
    monkeypatch.setattr(ascend_batch, "GRID_CELLS_PER_POINT", 1e18)
    grid = target.score_batch(problem, cols)
    monkeypatch.setattr(ascend_batch, "GRID_CELLS_PER_POINT", 0.0)
    gather = target.score_batch(problem, cols)
    assert np.array_equal(grid.feasible, gather.feasible)
    assert 0 < grid.feasible.sum() < len(grid.feasible)  # both kinds of point are exercised
    for o in target.objectives:
        assert np.array_equal(grid.objectives[o], gather.objectives[o]), o


@pytest.mark.parametrize("preset", PRESETS)
def test_object_columns_and_shuffled_points_agree(preset: str) -> None:
    """Object arrays (the generic decode) and a random order (the gather path) score the same points alike."""
    target: Target = get_target(preset)
    problem = _big()
    cols = target.space(problem).columns()
    ref = target.score_batch(problem, cols)
    idx = np.random.default_rng(0).permutation(len(ref.feasible))[:500]
    obj = {k: np.asarray([_plain(x) for x in v[idx]], dtype=object) for k, v in cols.items()}
    got = target.score_batch(problem, obj)
    assert np.array_equal(got.feasible, ref.feasible[idx])
    for o in target.objectives:
        assert np.array_equal(got.objectives[o], ref.objectives[o][idx])


def test_values_outside_the_choices_are_priced_like_check_and_cost() -> None:
    """A base tile or grid that is not a choice of the space takes the generic decode, same answer."""
    target, problem = get_target("ascend-910b"), einsum("mk,kn->mn", {"m": 96, "k": 64, "n": 80}, weight=1)
    space = target.space(problem)
    assert 48 not in dict((p.name, p.choices) for p in space.params)["base_m"]
    point: dict[str, Choice] = {"base_m": 48, "base_k": 32, "base_n": 16, "l1_m": 1, "l1_k": 2, "l1_n": 1}
    point |= {"double_buffer": False, "core_grid": "1x2x3"}
    cols = {k: np.asarray([v, v]) for k, v in point.items()}
    score = target.score_batch(problem, cols)
    mapping = target.mapping(problem, point)
    assert not target.check(problem, mapping)
    assert list(score.feasible) == [True, True]
    assert score.objectives["latency"][0] == target.cost(problem, mapping).seconds


def test_encode_fast_path_and_fallback() -> None:
    choices = ("1x4x6", "24x1x1", "2x3x4")
    conv = np.asarray
    col = np.asarray(["2x3x4", "1x4x6", "2x3x4", "24x1x1"])
    enc = encode(col, "str", choices, conv)
    assert enc.values == choices and list(enc.codes) == [2, 0, 2, 1] and (enc.lo, enc.hi) == (0, 2)
    odd = np.asarray(["2x3x4", "9x9x9"])  # not a choice: the distinct values found are used instead
    enc = encode(odd, "str", choices, lambda a: np.asarray(a).astype(str))
    assert enc.values == ("2x3x4", "9x9x9") and list(enc.codes) == [0, 1]
    ints = encode(np.asarray([64, 16, 64, 4096]), "int", (16, 64), lambda a: np.asarray(a, dtype=np.int64))
    assert ints.values == (16, 64, 4096) and list(ints.codes) == [1, 0, 1, 2]
    flags = encode(np.asarray([False, True]), "bool", (True, False), np.asarray)
    assert flags.values == (True, False) and list(flags.codes) == [1, 0]
