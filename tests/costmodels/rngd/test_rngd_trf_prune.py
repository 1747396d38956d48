"""trf_split: every split up to 8, then powers of two up to 64, with the splits a smaller one
dominates pruned (issue #12; issue #13 pruned only against half the split).

The rule (`rngd.factors.trf_image`, proved there): a split is pruned when a smaller candidate gives
no more TRF loads and none larger. Checked here: the image against a plain search over every smaller
candidate; every pruned point of the space of every candidate split against its image, point by
point (feasible whenever it is, no worse on every objective) and at the optimum of every objective;
the space offers every image (`rngd.trf_splits.kept_splits`); a split of 3 beats every power of two
where the TRF holds one N group per load.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from costmodels.protocol import SearchSpace
from costmodels.registry import get_target
from costmodels.rngd.cost import POINT_CODES, STATIC_CODES, evaluate
from costmodels.rngd.factors import TRF_CANDIDATES, trf_image, trf_loads
from costmodels.rngd.space import roles_of
from costmodels.rngd.target import RngdTarget
from costmodels.rngd.trf_splits import all_splits
from tests.costmodels.rngd.points import BASE
from workload.conv2d import conv2d
from workload.einsum import einsum

T = get_target("rngd", {"slices_per_cluster": 4})  # 4 slices a cluster: spaces of about 100k-300k points
assert isinstance(T, RngdTarget)

PROBLEMS = {
    "gemm n=24": einsum("mk,nk->mn", {"m": 16, "k": 64, "n": 24}, weight=1),
    "gemm n=40": einsum("mk,nk->mn", {"m": 8, "k": 96, "n": 40}, weight=1),
    "gemm n=100": einsum("mk,nk->mn", {"m": 4, "k": 32, "n": 100}, weight=1),
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


def _every_split(p: object) -> SearchSpace:
    """The problem's space with every candidate split (`all_splits`) instead of the kept ones."""
    space = T.space(p)  # type: ignore[arg-type]
    splits = all_splits(roles_of(p))  # type: ignore[arg-type]
    params = tuple(q.model_copy(update={"choices": splits}) if q.name == "trf_split" else q for q in space.params)
    return SearchSpace(params=params)


@functools.cache
def _every_split_evaluated(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """`_every_split` of a problem as columns and `evaluate` of them: once per problem for both tests below
    (they only read them)."""
    p = PROBLEMS[name]
    cols = _every_split(p).columns()
    return cols, evaluate(p, T.hardware, cols)


def _choices(p: object) -> dict[str, tuple[object, ...]]:
    return {q.name: q.choices for q in T.space(p).params}  # type: ignore[arg-type]


def _search_image(rem: list[np.ndarray], t: np.ndarray) -> np.ndarray:
    """Per point, the smallest candidate below ``t`` with no more loads and none larger, by trying each
    candidate in increasing order (every point at once: the first candidate that qualifies is kept)."""
    tl, hl = trf_loads(rem, t)
    tn, hn = np.prod(tl, axis=0), np.prod(hl, axis=0)
    out, found = t.copy(), np.zeros(t.shape, dtype=bool)
    for c in TRF_CANDIDATES:
        cl, dl = trf_loads(rem, np.full_like(t, c))
        ok = ~found & (c < t) & (np.prod(cl, axis=0) <= tn) & (np.prod(dl, axis=0) <= hn)
        out[ok], found = c, found | ok
    return out


@pytest.mark.parametrize("axes", [1, 2])
def test_the_image_is_the_smallest_dominating_candidate(axes: int) -> None:
    rng = np.random.default_rng(axes)
    rem = [rng.integers(1, 90, 3000) for _ in range(axes)]
    t = np.where(rng.random(3000) < 0.5, rng.choice(TRF_CANDIDATES, 3000), rng.integers(1, 150, 3000))
    got = trf_image(rem, t)
    assert got.tolist() == _search_image(rem, t).tolist()
    assert (got < t).any() and (got == t).any()
    assert (trf_image(rem, got) == got).all()  # an image is its own image


def test_the_candidates_are_every_split_to_8_then_powers_of_two() -> None:
    assert TRF_CANDIDATES == (1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64)
    assert all_splits(roles_of(PROBLEMS["gemm n=24"])) == (1, 2, 3, 4, 5, 6, 7, 8, 16, 32)  # 32 >= N: the last


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_pruned_splits_are_dominated_by_their_image_in_the_space(name: str) -> None:
    p = PROBLEMS[name]
    cols, res = _every_split_evaluated(name)
    pruned = res["bad:trf-split"]
    assert pruned.any(), "the problem should have splits that only pad"
    idx = np.flatnonzero(pruned)
    image = {k: np.asarray(v)[idx] for k, v in cols.items()}
    image["trf_split"] = np.asarray(res["trf_image"])[idx]
    assert (image["trf_split"] < np.asarray(cols["trf_split"])[idx]).all()
    assert set(image["trf_split"].tolist()) <= set(_choices(p)["trf_split"])  # the space offers every image
    alt = evaluate(p, T.hardware, image)
    assert not alt["bad:trf-split"].any()  # the image is its own image
    ok = _unpruned_feasible(res)[idx]
    assert ok.any()
    assert (_unpruned_feasible(alt)[ok]).all()  # feasible whenever the pruned point is
    for key in OBJECTIVES:
        assert (alt[key][ok] <= res[key][idx][ok]).all(), key


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_pruning_keeps_the_optimum_of_every_objective(name: str) -> None:
    p = PROBLEMS[name]
    _, res = _every_split_evaluated(name)
    before, after = _unpruned_feasible(res), res["feasible"]
    assert after.sum() < before.sum() and not (after & ~before).any()
    for key in OBJECTIVES:
        assert res[key][after].min() == res[key][before].min(), key
    kept = T.space(p)
    kept_cols = kept.columns()
    kres = evaluate(p, T.hardware, kept_cols)
    for key in OBJECTIVES:
        assert kres[key][kres["feasible"]].min() == res[key][before].min(), key  # the kept space: same optima
    score = T.score_batch(p, kept_cols)  # the mapper's scorer prunes the same points
    assert (np.asarray(score.feasible) == kres["feasible"]).all()


def test_the_pruned_split_says_what_to_use() -> None:
    p = PROBLEMS["gemm n=24"]  # 8 rows: 3 N groups; 8 or 4 loads of one group where 3 loads cover the 3
    vs = T.check(p, T.mapping(p, {**BASE, "trf_split": 8}))
    assert [v.code for v in vs] == ["trf-split"]
    assert "loads the TRF 8 times with 1 N group(s)" in vs[0].message and "use trf_split=3" in vs[0].message
    assert "use trf_split=3" in T.check(p, T.mapping(p, {**BASE, "trf_split": 4}))[0].message
    assert T.check(p, T.mapping(p, {**BASE, "trf_split": 3})) == []  # 3 loads of 1 group
    assert T.check(p, T.mapping(p, {**BASE, "trf_split": 2})) == []  # 2 loads of 2 (one padded): kept


def test_a_split_of_3_beats_every_power_of_two_when_the_trf_holds_one_group() -> None:
    """N = 24 on 8 rows (3 groups) and K = 4096 bf16: one group is 8 KiB per lane, all the TRF holds
    (hardware-facts.md §1.1, TRF: 8 KB per lane), so a load holds one group; 3 loads beat 4 (the
    least power of two that fits), which now pads and is pruned."""
    p = einsum("mk,nk->mn", {"m": 64, "k": 4096, "n": 24}, weight=1)
    point = {**BASE, "inner": "k"}
    costs = {}
    for t in (1, 2, 3, 4, 8):
        m = T.mapping(p, {**point, "trf_split": t})
        codes = [v.code for v in T.check(p, m)]
        costs[t] = codes if codes else T.cost(p, m).cycles
    assert costs[1] == ["trf-capacity"] and costs[2] == ["trf-capacity"]
    assert costs[4] == ["trf-split"] and costs[8] == ["trf-split"]
    assert isinstance(costs[3], float)
    assert 3 in _choices(p)["trf_split"]


@pytest.mark.parametrize(
    ("trf", "shown"),
    [
        (1, "N/8=3"),  # 3 groups of 8 rows: no padding
        (2, "N/16=2(N=24+8#)"),  # 2 chunks of two groups: the second half padding
    ],
)
def test_the_dump_shows_the_padding_of_a_kept_split(trf: int, shown: str) -> None:
    """(4 chunks of one group, ``N/8=3+1#``, is pruned now: 3 chunks hold the N = 24.)"""
    p = PROBLEMS["gemm n=24"]
    m = T.mapping(p, {**BASE, "trf_split": trf})
    assert T.check(p, m) == []
    dump = T.render(p, m)
    assert all(shown in line for line in dump.splitlines()[2:5]), dump  # TRF, computation, accumulation
    assert ("#" in dump) is (m.padded_size("n") > p.axes["n"])
