"""The reference's rules of thumb hold in the RNGD model (contraction-engine-rngd.txt).

Placements are compared on the contraction-engine time ``C_CE`` of one slice (the Reducer
efficiency the rules are about), minimised over every other choice of the space; whole-kernel
latency on small problems is dominated by the DMA, which no placement changes.
"""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.protocol import Choice, Param, SearchSpace
from costmodels.registry import get_target
from costmodels.rngd.cost import evaluate
from costmodels.rngd.target import RngdTarget
from costmodels.rngd.warm import family_mask, rule_family
from tests.costmodels.rngd.points import BASE
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

_T = get_target("rngd")
assert isinstance(_T, RngdTarget)
T: RngdTarget = _T
BMM = "vmk,vnk->vmn"


def _best_ce_per_placement(problem: Problem) -> dict[str, float]:
    """Over the space's points on one slice of one cluster: the space with slice_grid and clusters fixed to 1
    (its columns are exactly the rows of the whole space's columns with both at 1, in the same order)."""
    space = T.space(problem)
    one_slice = {"slice_grid", "clusters"}
    assert all(1 in q.choices for q in space.params if q.name in one_slice)
    cols = SearchSpace(
        params=tuple(Param(name=q.name, choices=(1,), doc=q.doc) if q.name in one_slice else q for q in space.params)
    ).columns()
    res = evaluate(problem, T.hw, cols)
    one = res["feasible"]
    return {fam: float(np.min(res["ce"][family_mask(cols, 32, fam) & one], initial=np.inf)) for fam in ("k", "v", "nm")}


@pytest.mark.parametrize(
    ("sizes", "winner"),
    [
        ({"v": 2, "m": 8, "k": 4096, "n": 16}, "k"),  # "use K contraction when K is large"
        ({"v": 512, "m": 4, "k": 48, "n": 16}, "v"),  # "V vectorized when the batch axis V is large"
        ({"v": 2, "m": 128, "k": 48, "n": 128}, "nm"),  # "N x M tiled when both output axes are large"
    ],
)
def test_dominant_axis_picks_the_placement(sizes: dict[str, int], winner: str) -> None:
    """contraction-engine-rngd.txt, Batched MatMul: choose the mapping by the largest axis."""
    p = einsum(BMM, sizes, weight=1)
    best = _best_ce_per_placement(p)
    others = [v for k, v in best.items() if k != winner]
    assert best[winner] < min(others), best
    assert rule_family(p) == winner


def test_warm_start_is_the_rule_of_thumb_placement() -> None:
    for sizes, pk, free in (
        ({"v": 2, "m": 8, "k": 4096, "n": 16}, 32, None),
        ({"v": 512, "m": 4, "k": 48, "n": 16}, 1, "b"),
        ({"v": 2, "m": 128, "k": 48, "n": 128}, 1, "m"),
    ):
        first = T.warm_starts(einsum(BMM, sizes, weight=1))[0]
        assert first["packet_k"] == pk and (free is None or first["packet_free"] == free)
    conv = conv2d(batch=1, in_channels=32, out_channels=32, input_height=32, input_width=32, kernel=3)
    assert T.warm_starts(conv)[0]["shift"] is True


@pytest.mark.parametrize("rows", [1, 2, 4])
def test_fewer_rows_lower_throughput_in_proportion(rows: int) -> None:
    """contraction-engine-rngd.txt, Performance: 'Configurations with fewer Rows proportionally reduce throughput'."""
    p = einsum("mk,nk->mn", {"m": 256, "k": 256, "n": 64}, weight=1)
    pt: dict[str, Choice] = {**BASE}
    full = T.cost(p, T.mapping(p, pt))
    part = T.cost(p, T.mapping(p, {**pt, "rows": rows}))
    assert part.breakdown["compute"] == full.breakdown["compute"] * 8 / rows
    ce = lambda c: c.breakdown["ce"] - c.breakdown["tree"] - c.breakdown["drain_last"]  # noqa: E731
    assert ce(part) == pytest.approx(ce(full) * 8 / rows)


def test_stride_2_needs_feed_flits_3_to_fill_the_macs() -> None:
    """contraction-engine-rngd.txt, Filter-Stride 2: feed_flits 3 turns W=15+1# into W=16."""
    p = conv2d(batch=1, in_channels=32, out_channels=24, input_height=34, input_width=34, kernel=4, stride=2)
    pt: dict[str, Choice] = {**BASE, "packet_k": 1, "inner": "k", "shift": True}
    two = T.cost(p, T.mapping(p, pt))
    three = T.cost(p, T.mapping(p, {**pt, "feed_flits": 3}))
    assert three.breakdown["compute"] < two.breakdown["compute"]
    assert three.breakdown["ce"] < two.breakdown["ce"]
    slots = lambda c: p.macs / (c.breakdown["compute"] * 8 * 32)  # noqa: E731  (MAC slots filled, one slice)
    assert slots(three) == pytest.approx(1.0) and slots(two) < 0.6
