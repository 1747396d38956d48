"""Tile structures that repeat another one point for point (`costmodels.trainium.repeats`, issue #12).

- a structure marked as a repeat has, point for point, every value of the structure with each role's first cap
  of the same tile (scored whole, on random small problems); a structure none repeats is kept;
- a dominance pass given a front (`front_cells.cell_blocks`) leaves out the repeats and no other structure it
  would keep;
- `Canonical.spread` puts each kept structure's row at its own number.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from costmodels.trainium.bounds import TILE_PARAMS
from costmodels.trainium.nest import roles_of, split_inner
from costmodels.trainium.repeats import WHOLE_RUN, Canonical, repeated_caps, repeated_structures
from tests.costmodels.trainium.tile_structures import every_tile_target, random_problem, structure_codes
from workload.einsum import einsum

OBJECTIVES = ("latency", "offchip_bytes", "footprint", "energy")


def _values(t, p, flat: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    s = t.score_codes(p, structure_codes(t.space(p), flat))
    return np.stack([np.asarray(s.objectives[o], dtype=np.float64) for o in OBJECTIVES], axis=1)


def test_a_cap_repeats_when_an_earlier_cap_gives_its_tile() -> None:
    # extent 2048: caps 512 and 511 give tiles 512 and 410; 410 gives 410 again (the balanced tile of 5 tiles)
    assert repeated_caps([2048], (512, 511, 410, 409)).tolist() == [False, False, True, False]
    assert repeated_caps([1], (128, 64, 1)).tolist() == [False, True, True]  # one tile whatever the cap
    assert repeated_caps([3, 5], (15, 14, 10, 5)).tolist() == [
        False,
        False,
        True,
        False,
    ]  # (3, 5), (2, 5) twice, (1, 5)


@pytest.mark.parametrize("seed", range(4))
def test_a_repeat_has_every_value_of_its_first_structure_point_for_point(seed: int) -> None:
    rng = random.Random(900 + seed)
    p = random_problem(rng, m=(1, 40), k=(1, 60), n=(1, 80))
    t = every_tile_target(rng.choice(["trn1", "trn2"]))
    params = t.space(p).params[:4]
    choices = {q.name: q.choices for q in params}
    rep = repeated_structures(p, choices)
    shape = tuple(len(q.choices) for q in params)
    assert rep.shape == shape and rep.any() and not rep.all()
    for flat in rng.sample(np.flatnonzero(rep.reshape(-1)).tolist(), min(6, int(rep.sum()))):
        st, *caps = np.unravel_index(flat, shape)
        roles = roles_of(p, str(choices["stationary"][st]))
        first = [int(st)]
        for (role, name), c in zip((("s", "tile_stat"), ("m", "tile_mov"), ("k", "tile_k")), caps, strict=True):
            sizes = [p.axes[a] for a in roles.axes[role]]
            tile = split_inner(sizes, int(choices[name][c]))  # the first cap of this tile: its structure repeats none
            first.append(next(i for i, cap in enumerate(choices[name]) if split_inner(sizes, int(cap)) == tile))
        own = int(np.ravel_multi_index(tuple(first), shape))
        assert own != flat and not rep.reshape(-1)[own]
        np.testing.assert_array_equal(_values(t, p, flat), _values(t, p, own))


@pytest.mark.parametrize("seed", range(3))
def test_the_repeats_are_the_structures_with_a_cap_whose_tile_an_earlier_cap_gives(seed: int) -> None:
    rng = random.Random(950 + seed)
    p = random_problem(rng, m=(1, 40), k=(1, 60), n=(1, 80))
    params = every_tile_target("trn2").space(p).params[:4]
    choices = {q.name: q.choices for q in params}
    want = np.zeros([len(q.choices) for q in params], dtype=bool)
    for st, key in enumerate(choices["stationary"]):
        roles = roles_of(p, str(key))
        for role, name, axis in (("s", "tile_stat", 0), ("m", "tile_mov", 1), ("k", "tile_k", 2)):
            tiles = [split_inner([p.axes[a] for a in roles.axes[role]], int(c)) for c in choices[name]]
            again = np.array([tiles.index(x) < i for i, x in enumerate(tiles)])
            want[st] |= again.reshape([-1 if d == axis else 1 for d in range(3)])
    np.testing.assert_array_equal(repeated_structures(p, choices), want)


def test_a_pass_given_a_front_leaves_out_the_repeats_and_keeps_every_other_live_structure() -> None:
    from mapper.bounds import live_structures
    from mapper.pareto import pareto_front

    p = einsum("bk,kn->bn", {"b": 1, "k": 700, "n": 900}, dtype="bf16", weight=1)  # decode-shaped: many repeats
    t = every_tile_target("trn1")
    objectives = ("latency", "energy")
    params = t.space(p).params[:4]
    total = int(np.prod([len(q.choices) for q in params]))
    rows = np.concatenate([b for _, b in t.structure_front_cell_blocks(p, TILE_PARAMS, objectives)])  # type: ignore[union-attr]
    sample = rows[np.isfinite(rows[:, 0])][:: max(1, len(rows) // 50)] * 1.02
    front = sample[pareto_front(sample)]
    rep = repeated_structures(p, {q.name: q.choices for q in params}).reshape(-1)
    plain = live_structures(t.structure_front_cell_blocks(p, TILE_PARAMS, objectives), total, front)
    given = live_structures(t.structure_front_cell_blocks(p, TILE_PARAMS, objectives, front), total, front)
    assert plain is not None and given is not None
    assert (plain & rep).sum() > 0  # repeats the plain pass keeps
    np.testing.assert_array_equal(given, plain & ~rep)


@pytest.mark.parametrize("kept_mov", [[0, 2, 3, 5, 7], [1], list(range(8))])
@pytest.mark.parametrize("kept_k", [[0, 1, 2], [1, 2]])
def test_spread_puts_each_kept_row_at_its_structure_number(kept_mov: list[int], kept_k: list[int]) -> None:
    n_ts, n_tm, n_tk = 3, 8, 3  # [1] keeps 1 of 8 tile_mov choices: a run per kept choice (`WHOLE_RUN`)
    keep = np.zeros((n_ts, n_tm, n_tk), dtype=bool)
    keep[np.ix_([0, 2], kept_mov, kept_k)] = True
    c = Canonical.of(keep, {"tile_mov": (0,) * n_tm, "tile_k": (0,) * n_tk}, first=100)
    assert (
        c.mask(np.arange(keep.size)).tolist()
        == np.arange(keep.size).reshape(keep.shape)[np.ix_([0, 2], kept_mov, kept_k)].tolist()
    )
    whole = np.full(100 + keep.size, np.inf)
    for i, ts in enumerate(c.ts.tolist()):
        numbers = 100 + np.ravel_multi_index(np.ix_([ts], kept_mov, kept_k), keep.shape).reshape(-1)
        rows = numbers.astype(float)[:, None]  # each kept structure's row: its own number
        for first, block in c.spread(i, rows):
            assert block.shape[1] == 1 and (len(block) == n_tm * n_tk) == (len(kept_mov) >= WHOLE_RUN * n_tm)
            seg = whole[first : first + len(block)]
            assert np.isinf(seg).all()  # no structure twice
            whole[first : first + len(block)] = block[:, 0]
    finite = np.flatnonzero(np.isfinite(whole))
    np.testing.assert_array_equal(whole[finite], finite)  # every kept row at its number
    assert len(finite) == keep.sum()


@pytest.mark.parametrize("objectives", [("latency",), ("latency", "energy"), ("latency", "footprint")])
@pytest.mark.parametrize("exhausted", [False, True])
def test_best_first_visits_no_repeat_and_proves_the_enumerations_answer(
    objectives: tuple[str, ...], exhausted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Best-first never visits a repeat and still proves the enumeration's answer; with no structure bounded
    out (`exhausted`: the order runs to its end), the repeats count as left out, not as unexplored."""
    from mapper.bounds import StructureBounds
    from mapper.search import tune
    from mapper.settings import SearchSettings
    from mapper.strategies.objective import Evaluator

    p = einsum("bk,kn->bn", {"b": 1, "k": 6, "n": 20}, dtype="bf16", weight=1)
    t = every_tile_target("trn1")
    params = t.space(p).params[:4]
    rep = repeated_structures(p, {q.name: q.choices for q in params})
    assert rep.mean() > 0.8
    settings = dict(objectives=objectives, max_seconds=600)
    exact = tune(p, t, SearchSettings(strategy="exhaustive", **settings), validate=False)
    visited: list[tuple[object, ...]] = []
    visit = Evaluator.visit

    def record(ev: Evaluator, fixed: dict[str, object]) -> None:
        visited.append(tuple(fixed[n] for n in TILE_PARAMS))
        visit(ev, fixed)  # type: ignore[arg-type]

    monkeypatch.setattr(Evaluator, "visit", record)
    if exhausted:
        monkeypatch.setattr(StructureBounds, "bounded_out", staticmethod(lambda bound, best: False))
    bb = tune(p, t, SearchSettings(strategy="bestfirst", **settings), validate=False)
    codes = [tuple(q.choices.index(v) for q, v in zip(params, key, strict=True)) for key in visited]
    assert visited and not any(rep[c] for c in codes)
    assert not exhausted or len(objectives) > 1 or len(visited) == int((~rep).sum())
    cert = bb.certificate
    assert cert is not None and cert.unexplored == 0 and cert.scored + cert.pruned_by_bound == cert.structures_total
    if len(objectives) == 1:
        assert bb.best_value() == exact.best_value()
    else:
        values = lambda r: sorted(tuple(q.values[o] for o in objectives) for q in r.pareto)  # noqa: E731
        np.testing.assert_allclose(np.array(values(bb)), np.array(values(exact)), rtol=1e-12)
