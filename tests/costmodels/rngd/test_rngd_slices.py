"""The RNGD space offers every grid ``a x b`` of slices for every pair of roles (issue #12).

The dominance rule of `rngd.slices` is checked against the unpruned space point by point on small
problems; the sizes `build_space`'s docstring quotes are recomputed; a padded 186-slice split
(M over 6, N over 31) beats the best point of the old power-of-two space by more than 4%.
"""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.registry import get_target
from costmodels.rngd import space as space_module
from costmodels.rngd.factors import factors, slice_factor
from costmodels.rngd.scoring import build_tables, score_codes
from costmodels.rngd.slices import Stage1, slice_images
from costmodels.rngd.space import build_space, grid_code, grid_label, grid_parts, roles_of
from costmodels.rngd.target import RngdTarget
from tests.costmodels.rngd.points import BASE
from workload.conv2d import conv2d
from workload.einsum import einsum

T = get_target("rngd")
assert isinstance(T, RngdTarget)
HW = T.hw

SMALL = {
    "gemm 100x64x96": einsum("mk,nk->mn", {"m": 100, "k": 64, "n": 96}, weight=1),
    "bmm 3x20x48x30": einsum("vmk,vnk->vmn", {"v": 3, "m": 20, "k": 48, "n": 30}, weight=1),
    "conv 5->40 9x9": conv2d(batch=2, in_channels=5, out_channels=40, input_height=9, input_width=9, kernel=3),
}
#: the points of a larger unpruned space are sampled (seeded): every image is still checked against its point
EVERY_POINT_LIMIT = 2_500_000
SMALL_HW = {"slices_per_cluster": 20}  # every grid up to 12 slices: the rule is exercised without millions of points


def test_grid_codes_and_the_roles_they_give() -> None:
    """``xy`` over ``a x b``: x over a, y over b, either letter order read the same way; one role takes a * b."""
    g = np.array([grid_code(6, 31), grid_code(6, 31), grid_code(8, 1), grid_code(1, 8)])
    assert g.tolist() == [60_031, 60_031, 8, 10_008]
    assert [x.tolist() for x in grid_parts(g)] == [[6, 6, 8, 1], [31, 31, 1, 8]]
    rs = np.array(["mn", "nm", "mn", "n"])
    assert slice_factor(rs, g, "m").tolist() == [6, 31, 8, 1]
    assert slice_factor(rs, g, "n").tolist() == [31, 6, 1, 8]
    assert grid_label(60_031) == "6x31" and grid_label(8) == "8"


def test_every_factorisation_of_every_count_for_every_pair() -> None:
    """The unpruned grids are every ``a x b <= 256`` with sides within the largest extent, each unordered pair."""
    p = einsum("mk,kn->mn", {"m": 4099, "k": 131, "n": 8191}, weight=1)
    full = {q.name: q.choices for q in build_space(p, HW, prune=False).params}
    assert full["slice_role"] == ("mn", "mk", "nk")
    want = {grid_code(a, b) for a in range(1, 257) for b in range(1, 257) if a * b <= 256}
    assert set(full["slice_grid"]) == want and len(full["slice_grid"]) == len(want)
    kept = set(T.space(p).params[2].choices)
    assert {grid_code(24, 8), grid_code(8, 24), grid_code(64, 3), grid_code(6, 31)} <= kept


@pytest.mark.parametrize("name", list(SMALL))
def test_every_left_out_point_is_dominated_by_one_in_the_space(name: str) -> None:
    """Each unpruned point (of a space above `EVERY_POINT_LIMIT`, each of a seeded sample) maps to its image
    (`slice_images`): in the pruned space, feasible whenever the point is, and no worse on every objective."""
    t = get_target("rngd", SMALL_HW)
    assert isinstance(t, RngdTarget)
    p = SMALL[name]
    full, pruned = build_space(p, t.hw, prune=False), t.space(p)
    assert pruned.size < full.size
    ch = {q.name: q.choices for q in full.params}
    role_img, grid_img = slice_images(Stage1.of_space(roles_of(p), full))
    # every point's index among each parameter's choices, in the order of `SearchSpace.columns` (last fastest);
    # of a space above EVERY_POINT_LIMIT points, a seeded sample of that many (the bmm's 9.1M took 15 s)
    every = full.size <= EVERY_POINT_LIMIT
    flat = np.arange(full.size) if every else np.sort(np.random.default_rng(0).choice(full.size, EVERY_POINT_LIMIT))
    idx = dict(zip(ch, np.unravel_index(flat, tuple(len(v) for v in ch.values())), strict=True))
    cols = {k: np.asarray(ch[k])[i] for k, i in idx.items()}
    ci, rci, sh, ri, si = (idx[k] for k in ("clusters", "cluster_role", "shift", "slice_role", "slice_grid"))
    img = {**idx, "slice_role": role_img[ci, rci, sh, ri, si], "slice_grid": grid_img[ci, rci, sh, ri, si]}
    # the split too: the space leaves out the splits no row needs (`rngd.trf_splits`, tested there)
    trf = np.asarray(ch["trf_split"])
    trf_img = factors(p, t.hw, cols)["trf_image"]
    img["trf_split"] = np.searchsorted(trf, trf_img)
    assert (trf[img["trf_split"]] == trf_img).all()
    moved = (img["slice_grid"] != si) | (img["slice_role"] != ri)
    assert moved.any()
    codes = {}  # each image's codes in the pruned space: all of its choices must be there
    for q in pruned.params:
        lut = np.array([q.choices.index(c) if c in q.choices else -1 for c in ch[q.name]])
        codes[q.name] = lut[img[q.name]]
        assert (codes[q.name] >= 0).all(), q.name
    # the unpruned points by the batch scorer's tables over the unpruned space (equal to the point
    # formulas: test_rngd_scoring.py), the images by the target over its own (pruned) space
    tables = build_tables(p, t.hw, full)
    assert tables is not None
    u = score_codes(t.hw, tables, idx, flat.size)
    r = t.score_codes(p, codes)
    assert u["feasible"].any()
    assert not (u["feasible"] & ~r.feasible).any()
    f = u["feasible"]
    for obj in ("latency", "offchip_bytes", "footprint", "energy"):
        assert (r.objectives[obj][f] <= u[obj][f] * (1 + 1e-12)).all(), obj
        if every:  # same optimum in both spaces
            assert r.objectives[obj][f].min() == u[obj][f].min(), obj


def test_a_186_slice_split_beats_the_old_space_by_4_percent() -> None:
    """4099x131x8191 bf16: the old power-of-two space's optimum was 136,097 cycles (enumerated with that
    space before issue #12); 186 slices, M over 6 and N over 31, beat it by more than 4%."""
    p = einsum("mk,kn->mn", {"m": 4099, "k": 131, "n": 8191}, weight=1)
    old = 136_097
    point = {**BASE, "packet_k": 32, "clusters": 2, "cluster_role": "m", "slice_role": "mn", "rows": 8}
    best = {}
    for s in (grid_code(6, 31),):
        costs = []
        for trf in (1, 2, 4, 8, 16):
            for inner in ("k", "n"):
                for db in (False, True):
                    q = {**point, "slice_grid": s, "trf_split": trf, "inner": inner, "double_buffer": db}
                    m = T.mapping(p, q)
                    if not T.check(p, m):
                        costs.append(T.cost(p, m).cycles)
        best[s] = min(costs)
    assert best[grid_code(6, 31)] < old * 0.96


#: (pruned, unpruned, balanced 2-D only, before issue #12) of the sizes quoted in `build_space`'s docstring
SIZES = {
    "gemm": (27_929_088, 37_154_304, 17_259_264, 290_304),
    "conv": (23_721_984, 111_462_912, 23_493_888, 870_912),
}


@pytest.mark.parametrize("kind", list(SIZES))
def test_space_sizes_quoted_in_the_docs(kind: str) -> None:
    p = (
        einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, weight=1)
        if kind == "gemm"
        else conv2d(batch=16, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1)
    )
    pruned, full, balanced, before = SIZES[kind]
    assert build_space(p, HW).size == pruned
    assert build_space(p, HW, prune=False).size == full
    doc = space_module.build_space.__doc__ or ""
    for n in (pruned, full, balanced, before):
        assert f"{n:,}" in doc
