"""Trainium's per-structure footprint floors (`TrainiumTarget.structure_objective_floors`, `bounds.footprint_floors`).

Best-first visits a few structures along these floors before its first dominance pass
(`mapper.strategies.front_pass.seed_structures`); the contract (`mapper.bounds.StructureObjectiveFloors`) is that
no feasible point of a structure holds fewer bytes than its floor. Checked by scoring whole structures of random
small problems, on the presets and on parts with a small SBUF.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from costmodels.trainium.bounds import TILE_PARAMS
from mapper.bounds import RTOL
from tests.costmodels.trainium.tile_structures import every_tile_target, random_problem, structure_codes

PARTS: list[dict[str, object]] = [{}, {"sbuf_partition_bytes": 4096}, {"sbuf_partition_bytes": 16384, "psum_banks": 2}]


@pytest.mark.parametrize("part", range(len(PARTS)))
@pytest.mark.parametrize("seed", range(5))
def test_no_feasible_point_of_a_structure_holds_less_than_its_footprint_floor(seed: int, part: int) -> None:
    rng = random.Random(700 + seed)
    p, t = random_problem(rng), every_tile_target(rng.choice(["trn1", "trn2"]), **PARTS[part])
    floors = t.structure_objective_floors(p, TILE_PARAMS, "footprint")
    shape = tuple(len(q.choices) for q in t.space(p).params[:4])
    assert floors is not None and floors.shape == shape
    checked = tight = 0
    for flat in sorted({rng.randrange(int(np.prod(shape))) for _ in range(10)}):
        s = t.score_codes(p, structure_codes(t.space(p), flat))
        got = np.asarray(s.objectives["footprint"], dtype=np.float64)[np.asarray(s.feasible)]
        floor = float(floors.reshape(-1)[flat])
        assert (got >= floor * (1 - RTOL)).all(), (p.label, t.name, flat, floor, got.min())
        checked += got.size
        tight += bool(got.size) and got.min() <= floor * 1.5  # not vacuous: within 1.5x of the least held
    assert checked > 0 and tight > 0


def test_other_objectives_and_names_have_no_floors() -> None:
    t = every_tile_target("trn1")
    p = random_problem(random.Random(1))
    assert t.structure_objective_floors(p, TILE_PARAMS, "energy") is None
    assert t.structure_objective_floors(p, TILE_PARAMS[:3], "footprint") is None
