"""trf_split choices that only add padding are pruned (issue #13), by a dominance rule
(`rngd.factors.trf_padding_only`): half the split gives no more TRF loads and none larger, and
every RNGD cost term is non-decreasing in both. Checked here against the unpruned space, point by
point and at the optimum of every objective, on small problems whose N does not divide evenly."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.registry import get_target
from costmodels.rngd.cost import POINT_CODES, STATIC_CODES, evaluate
from costmodels.rngd.target import RngdTarget
from tests.costmodels.rngd.points import BASE
from workload.conv2d import conv2d
from workload.einsum import einsum

T = get_target("rngd")
assert isinstance(T, RngdTarget)

PROBLEMS = {
    "gemm n=24": einsum("mk,nk->mn", {"m": 16, "k": 64, "n": 24}, weight=1),
    "gemm n=40": einsum("mk,nk->mn", {"m": 8, "k": 96, "n": 40}, weight=1),
    "two n axes": einsum("mk,nok->mno", {"m": 8, "k": 32, "n": 3, "o": 5}, weight=1),
    "conv co=24": conv2d(batch=1, in_channels=8, out_channels=24, input_height=6, input_width=6, kernel=3),
}
OBJECTIVES = ("cycles", "offchip", "footprint")


def _unpruned_feasible(res: dict[str, np.ndarray]) -> np.ndarray:
    other = np.zeros_like(res["feasible"])
    for code in (*STATIC_CODES, *POINT_CODES):  # what `evaluate`'s feasible combines ("alignment" is check's)
        if code != "trf-split":
            other |= res[f"bad:{code}"]
    return ~other


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_pruned_splits_are_dominated_by_half_the_split(name: str) -> None:
    p = PROBLEMS[name]
    cols = T.space(p).columns()
    res = evaluate(p, T.hardware, cols)
    pruned = res["bad:trf-split"]
    assert pruned.any(), "the problem should have splits that only pad"
    idx = np.flatnonzero(pruned)
    half = {k: np.asarray(v)[idx] for k, v in cols.items()}
    half["trf_split"] = half["trf_split"] // 2
    alt = evaluate(p, T.hardware, half)
    ok = _unpruned_feasible(res)[idx]
    assert (_unpruned_feasible(alt)[ok]).all()  # feasible whenever the pruned point is
    for key in OBJECTIVES:
        assert (alt[key][ok] <= res[key][idx][ok]).all(), key


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_pruning_keeps_the_optimum_of_every_objective(name: str) -> None:
    p = PROBLEMS[name]
    cols = T.space(p).columns()
    res = evaluate(p, T.hardware, cols)
    before, after = _unpruned_feasible(res), res["feasible"]
    assert after.sum() < before.sum() and not (after & ~before).any()
    for key in OBJECTIVES:
        assert res[key][after].min() == res[key][before].min(), key
    score = T.score_batch(p, cols)  # the mapper's scorer prunes the same points
    assert (np.asarray(score.feasible) == after).all()


def test_the_pruned_split_says_what_to_use() -> None:
    p = PROBLEMS["gemm n=24"]  # 8 rows: 3 N groups; 8 loads of one group where 4 loads cover the 3
    vs = T.check(p, T.mapping(p, {**BASE, "trf_split": 8}))
    assert [v.code for v in vs] == ["trf-split"]
    assert "loads the TRF 8 times with 1 N group(s)" in vs[0].message and "use trf_split=4" in vs[0].message
    assert T.check(p, T.mapping(p, {**BASE, "trf_split": 4})) == []  # 4 loads of 1 group: smaller than 2 of 2
    assert T.check(p, T.mapping(p, {**BASE, "trf_split": 2})) == []  # 2 loads of 2 (one padded): kept


@pytest.mark.parametrize(
    ("trf", "shown"),
    [
        (1, "N/8=3"),  # 3 groups of 8 rows: no padding
        (4, "N/8=3+1#"),  # 4 chunks of one group where 3 hold N = 24: one dummy chunk
        (2, "N/16=2(N=24+8#)"),  # 2 chunks of two groups: the second half padding
    ],
)
def test_the_dump_shows_the_padding_of_a_kept_split(trf: int, shown: str) -> None:
    p = PROBLEMS["gemm n=24"]
    m = T.mapping(p, {**BASE, "trf_split": trf})
    assert T.check(p, m) == []
    dump = T.render(p, m)
    assert all(shown in line for line in dump.splitlines()[2:5]), dump  # TRF, computation, accumulation
    assert ("#" in dump) is (m.padded_size("n") > p.axes["n"])
