"""Ascend's floors of single points (`AscendTarget.point_floors`, `mapper.bounds.PointFloored`): the footprint.

A TMATMUL mapping's footprint is ``(fa + fb) x h + acc_m x acc_n`` (ascend/cost.py, `cube_scores`): table fields
that no core grid changes. Read point by point from one grid over the other parameters, it must be each
feasible point's footprint exactly (a floor above it would leave out points of the front), whether or not
the whole space's table was built (`cube_grid.CubeTable` keeps the same grid).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from costmodels.ascend.cube_grid import tabulate_cube
from costmodels.registry import get_target
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem


def _problems(seed: int) -> list[Problem]:
    rng = random.Random(seed)
    out: list[Problem] = [
        conv2d(batch=2, in_channels=17, out_channels=40, input_height=14, input_width=14, kernel=3, padding=1),
        einsum("bmk,bkn->bmn", {"b": 3, "m": 129, "k": 77, "n": 200}, dtype="f16", weight=1),
    ]
    for _ in range(3):
        sizes = {a: rng.randint(1, 900) for a in "mkn"}
        out.append(einsum("mk,kn->mn", sizes, dtype=rng.choice(["f16", "bf16", "i8", "f32"]), weight=1))
    return out


@pytest.mark.parametrize("preset", ["ascend-910b", "ascend-a5"])
def test_point_footprint_is_each_feasible_points_footprint(preset: str) -> None:
    t = get_target(preset)
    rng = np.random.default_rng(len(preset))
    feasible_seen = 0
    for p in _problems(seed=len(preset)):
        space = t.space(p)
        codes = {q.name: rng.integers(0, len(q.choices), size=4000) for q in space.params}
        got = t.point_floors(p, codes, ("latency", "footprint"))
        assert got is not None and set(got) == {"footprint"}
        score = t.score_codes(p, codes)
        ok = np.asarray(score.feasible, dtype=bool)
        assert np.array_equal(got["footprint"][ok], np.asarray(score.objectives["footprint"])[ok])
        assert np.isfinite(got["footprint"]).all() and (got["footprint"] > 0).all()  # infeasible points too: a floor
        feasible_seen += int(ok.sum())
    assert feasible_seen > 1000


def test_the_footprint_grid_is_the_whole_space_tables() -> None:
    """Computed from the fields before the space's table exists, it equals the table's own footprint grid."""
    t = get_target("ascend-910b")
    p = _problems(seed=3)[0]
    prep = t.prepared(p)
    assert prep.table is None
    grid = prep.footprint_grid
    table = tabulate_cube(prep.tables, prep.shape, prep.consts, prep.energy)
    assert grid.shape == prep.shape[:-1] and np.array_equal(grid.reshape(-1), table.footprint)


def test_no_point_floors_without_footprint_or_for_a_row_reduction() -> None:
    t = get_target("ascend-a5")
    gemm = _problems(seed=5)[1]
    codes = {q.name: np.zeros(3, dtype=np.intp) for q in t.space(gemm).params}
    assert t.point_floors(gemm, codes, ("latency", "energy")) is None
    rows = einsum("mk->m", {"m": 64, "k": 512}, dtype="f16")
    row_codes = {q.name: np.zeros(3, dtype=np.intp) for q in t.space(rows).params}
    assert t.point_floors(rows, row_codes, ("latency", "footprint")) is None
