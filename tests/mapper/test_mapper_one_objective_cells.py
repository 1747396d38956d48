"""One objective other than latency on a target that bounds it cell by cell (issue #12): best-first bounds each
structure by its cells' floors of that objective, the best point found standing for the front
(`mapper.bounds.FrontBounds` with one objective), and proves the enumeration's optimum while leaving structures
out unscored. Before, such a search had no per-structure bound at all: it scored every structure (Trainium's
every-tile spaces could not be finished)."""

from __future__ import annotations

import pytest

from costmodels.registry import get_target
from mapper.search import tune
from mapper.settings import SearchSettings
from tests.costmodels.trainium.tile_structures import every_tile_target
from workload.conv2d import conv2d
from workload.einsum import einsum

CASES = {
    "rngd": (lambda: get_target("rngd"), einsum("mk,kn->mn", {"m": 24, "k": 40, "n": 17}, weight=1)),
    "trn1": (lambda: every_tile_target("trn1"), einsum("mk,kn->mn", {"m": 6, "k": 5, "n": 7}, dtype="bf16", weight=1)),
    "trn2": (
        lambda: every_tile_target("trn2"),
        conv2d(batch=1, in_channels=2, out_channels=3, input_height=4, input_width=4, kernel=3),
    ),
    "ascend-910b": (
        lambda: get_target("ascend-910b"),
        conv2d(batch=1, in_channels=8, out_channels=12, input_height=5, input_width=5, kernel=3, padding=1),
    ),
}


@pytest.mark.parametrize("objective", ["offchip_bytes", "energy", "footprint"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_bestfirst_proves_the_enumerations_optimum_and_leaves_structures_out_by_their_cells(
    name: str, objective: str
) -> None:
    make, problem = CASES[name]
    t = make()
    settings = dict(objectives=(objective,), max_seconds=600)
    exact = tune(problem, t, SearchSettings(strategy="exhaustive", **settings), validate=False)
    bb = tune(problem, t, SearchSettings(strategy="bestfirst", **settings), validate=False)
    assert exact.proven_optimal and bb.proven_optimal
    assert bb.values[objective] == pytest.approx(exact.values[objective], rel=1e-9)
    cert = bb.certificate
    assert cert is not None and cert.unexplored == 0
    assert cert.scored + cert.pruned_by_bound == cert.structures_total
    assert cert.pruned_by_bound > 0  # the cells' floors left structures out unscored
    assert "within a structure, the target's cells" in cert.bound_source


def test_the_notes_say_how_a_trainium_search_without_latency_ran() -> None:
    """No warm start is claimed (they serve latency alone), the pass came after structures in latency-bound order,
    and with one objective the cells were tested against the best found, not a front."""
    make, problem = CASES["trn1"]
    r = tune(problem, make(), SearchSettings(strategy="bestfirst", objectives=("energy",)), validate=False)
    text = " ".join(r.notes)
    assert "warm starts first" not in text
    assert "structures in latency-bound order, a pass over every structure's cells" in text
    assert "whose cells the best did not dominate" in text
