"""RNGD's structure bound (`rngd.bounds`) is admissible and prunes (issue #12, branch and bound).

Admissible: on random problems, for many structures (random subsets of the parameters fixed), the
bound is at most the latency of the structure's best feasible point. Prunes: on a 4096^3 GEMM, with
the best latency of the space known, most structures of the mapper's split are bounded out.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from costmodels.registry import get_target
from costmodels.rngd.target import RngdTarget
from costmodels.rngd.warm import STRUCTURAL
from costmodels.structure_bound import StructureBounded
from mapper.strategies.encoding import split_params
from tests.costmodels.space_scan import space_latencies
from workload.conv2d import conv2d
from workload.einsum import einsum


def _problems(seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for _ in range(3):
        dims = {"m": rng.randint(1, 300), "k": rng.randint(1, 300), "n": rng.randint(1, 300)}
        out.append(einsum("mk,nk->mn", dims, weight=1, dtype=rng.choice(["bf16", "i8"])))
    out.append(einsum("vmk,vnk->vmn", {"v": rng.randint(2, 9), "m": rng.randint(2, 60), "k": 64, "n": 40}, weight=1))
    out.append(conv2d(batch=2, in_channels=rng.randint(3, 20), out_channels=rng.randint(8, 40), input_height=9,
                      input_width=rng.randint(8, 14), kernel=3, stride=rng.choice([1, 2])))  # fmt: skip
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_bound_is_below_the_best_point_of_every_structure(seed: int) -> None:
    t = get_target("rngd", {"slices_per_cluster": 12})
    assert isinstance(t, RngdTarget) and isinstance(t, StructureBounded)
    rng = random.Random(seed)
    checked = 0
    for p in _problems(seed):
        space = t.space(p)
        # every point's latency, scored by code, on the grid of the choices (C order, as `SearchSpace.columns`):
        # a structure's points are a slice of it, not a comparison of whole value columns per structure
        _, lat = space_latencies(t, p)
        assert np.isfinite(lat).any()
        assert t.structure_bound(p, {}) <= lat.min() * (1 + 1e-12)
        for _ in range(60):
            names = rng.sample([q.name for q in space.params], rng.randint(1, 6))
            fixed = {nm: rng.choice(next(q.choices for q in space.params if q.name == nm)) for nm in names}
            at = tuple(q.choices.index(fixed[q.name]) if q.name in fixed else slice(None) for q in space.params)
            best = lat[at].min()
            bound = t.structure_bound(p, fixed)
            assert bound <= best * (1 + 1e-12), (fixed, bound, best)
            checked += int(np.isfinite(best))
    assert checked > 100


def test_bound_is_tighter_than_the_roofline_and_prunes_a_large_gemm() -> None:
    t = get_target("rngd")
    assert isinstance(t, RngdTarget)
    p = einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, weight=1)
    space = t.space(p)
    best = 966_868 / t.hardware.clock_hz  # the space's optimum in cycles (exhaustive enumeration, this model)
    structural, _ = split_params(space, 1 << 16)
    grid = np.meshgrid(*[np.arange(len(q.choices)) for q in structural], indexing="ij")
    codes = np.stack([g.reshape(-1) for g in grid], axis=1)
    bounds = np.array([t.structure_bound(p, {q.name: q.choices[c] for q, c in zip(structural, row, strict=True)})
                       for row in codes])  # fmt: skip
    roof = t.lower_bound(p).cycles / t.hardware.clock_hz
    assert (bounds >= roof * (1 - 1e-12)).all() and (bounds > roof * 1.05).mean() > 0.5
    assert (bounds <= best).any()  # the optimum's structure is not pruned
    assert (bounds > best).mean() > 0.5  # most structures are bounded out once the optimum is found


def test_unknown_fixed_choices_are_refused() -> None:
    t = get_target("rngd")
    assert isinstance(t, RngdTarget)
    p = einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, weight=1)
    with pytest.raises(ValueError, match="no parameter"):
        t.structure_bound(p, {"tile": 3})
    with pytest.raises(ValueError, match="not a choice"):
        t.structure_bound(p, {"rows": 3})


def test_warm_starts_add_the_structures_that_can_beat_the_placements_lowest_bound_first() -> None:
    t = get_target("rngd")
    assert isinstance(t, RngdTarget)
    p = conv2d(batch=16, in_channels=128, out_channels=128, input_height=28, input_width=28, kernel=3, padding=1)
    warm = t.warm_starts(p)
    space = t.space(p)
    ch = {q.name: q.choices for q in space.params}
    assert all(all(w[k] in ch[k] for k in ch) for w in warm)
    first_lat = [t.cost(p, t.mapping(p, w)).seconds for w in warm[:4] if not t.check(p, t.mapping(p, w))]
    added = [w for w in warm if w not in warm[:4]]
    assert added
    bounds = [t.structure_bound(p, {k: w[k] for k in STRUCTURAL if k in ch}) for w in added]
    assert bounds == sorted(bounds) and max(bounds) < min(first_lat)


def test_a_bound_with_the_row_count_free_is_the_least_of_the_bounds_with_it_fixed() -> None:
    """`TermBound` bounds a structure that leaves ``rows`` free by the least of its bounds with each row count
    fixed: never looser than the bound of the lane minima over every row count (the terms' least, taken apart)."""
    from costmodels.rngd.bounds import TermBound

    p = einsum("mk,kn->mn", {"m": 96, "k": 200, "n": 130}, dtype="bf16", weight=1)
    t = get_target("rngd")
    assert isinstance(t, RngdTarget)
    prep = t.prepared(p)
    assert prep.space is not None and prep.tables is not None
    composed = TermBound(prep.space, prep.tables, t.hw)
    termwise = TermBound(prep.space, prep.tables, t.hw)
    termwise._row_choices = ()  # one lane minimum over every row count, term by term
    rows = composed._row_choices
    assert len(rows) > 1
    ch = {q.name: q.choices for q in prep.space.params}
    for fixed in ({}, {"clusters": ch["clusters"][0]}, {"packet_k": ch["packet_k"][-1], "double_buffer": True}):
        each = [composed({**fixed, "rows": r}) for r in rows]
        assert composed(fixed) == min(each)
        assert composed(fixed) >= termwise(fixed)
    assert math.isfinite(composed({}))


def _lane_minima_by_definition(t: RngdTarget, tables, lanes: np.ndarray, dbuf: bool | None) -> dict[str, np.ndarray]:
    """The least lane terms ``[s, p]`` straight from the definition: every (s, p, l) at once, the cost's own tests."""
    n_s = tables.n_s
    a = {k: tables.qa[k].reshape(n_s, tables.n_p, 1) for k in ("kvw", "og", "hld")}
    n = {k: tables.qn[k].reshape(n_s, 1, tables.n_l)[:, :, lanes] for k in ("rhn", "hn", "tn", "tnhn", "rtnhn", "dma")}
    n["trhn"] = n["tn"] * n["rhn"]
    cap = t.hw.trf_half_bytes_per_slice if dbuf else t.hw.trf_bytes_per_slice
    acc = t.hw.accumulator_cells_per_row
    fits = (n["rhn"] * a["kvw"] / 8 <= cap) & (a["og"] * np.maximum(n["hn"] * a["hld"], 1) <= acc)
    fits &= n["dma"] < np.inf
    return {k: np.where(fits, n[k], np.inf).min(axis=2) for k in ("tn", "tnhn", "rtnhn", "trhn", "dma")}


@pytest.mark.parametrize("seed", [0, 1])
def test_lane_minima_are_the_least_terms_of_the_lanes_that_fit(seed: int) -> None:
    """`TermBound._lane_minima` (thresholds per lane) against the TRF and accumulator tests of every (s, p, l)."""
    from costmodels.rngd.bounds import TermBound

    t = get_target("rngd", {"slices_per_cluster": 12})
    assert isinstance(t, RngdTarget)
    tight = 0
    for p in _problems(seed):
        prep = t.prepared(p)
        assert prep.space is not None and prep.tables is not None
        tb = TermBound(prep.space, prep.tables, t.hw)
        rows = tb._grids["l"]["rows"]
        for fixed in ((), (("rows", int(rows[-1])),)):
            lanes = tb._mask("l", fixed)
            for dbuf in (None, True, False):
                got, want = tb._lane_minima(fixed, dbuf), _lane_minima_by_definition(t, prep.tables, lanes, dbuf)
                for k, v in want.items():
                    assert np.array_equal(got[k], v), (p.label, fixed, dbuf, k)
                # some (s, p) lose a lane to a capacity: the thresholds are exercised, not all-fit
                full = _lane_minima_by_definition(t, prep.tables, lanes, False)["trhn"]
                tight += int((got["trhn"] > full).any() or not np.isfinite(got["trhn"]).all())
    assert tight > 0
