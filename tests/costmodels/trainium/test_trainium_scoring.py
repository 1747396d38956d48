"""The fast Trainium scorer (priced grid gathered by choice codes) and the pruned space.

Guards the refactor: `score_batch` over whole spaces equals `check`/`cost` point by point on all
three objectives (every point of the small spaces, a sample of the larger ones); `score_codes`
equals `score_batch` in any order and chunk; the grid priced in one-point slabs (with the one-core
slabs copied) equals the grid priced in its default slabs (the one-core slab broadcast over the
shard choices); the effect tables the grid reads agree with the order effects wherever the
multiplied role has blocks; column dtypes other than the ones
`SearchSpace.columns()` makes score the same (object columns on a shuffled sample of points, narrow
integer and string columns on a whole sub-space); values outside the space are rejected naming the
parameter; the pruned space keeps every distinct loop nest of the unpruned product of choices.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import costmodels.trainium.scoring as trainium_grid
import costmodels.trainium.target as trainium_module
from costmodels.choice_codes import SpaceCoder
from costmodels.protocol import BatchScore, Choice, SearchSpace
from costmodels.registry import get_target
from costmodels.trainium.nest import roles_of
from costmodels.trainium.orders import ORDERS, distinct_orders
from costmodels.trainium.scoring import GridScorer, PricedGrid, effect_tables, order_effects
from costmodels.trainium.space import LADDER, core_choices
from costmodels.trainium.target import TrainiumTarget
from mapper.enumerate import point_at
from tests.enumerable import narrowed
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

SMALL: dict[str, tuple[str, Problem]] = {
    "gemm bf16": ("trn1", einsum("mk,kn->mn", {"m": 24, "k": 136, "n": 20}, dtype="bf16", weight=1)),
    "gemm bf16 blocked": ("trn1", einsum("mk,kn->mn", {"m": 600, "k": 64, "n": 150}, dtype="bf16", weight=1)),
    "gemm f32": ("trn1", einsum("mk,kn->mn", {"m": 24, "k": 300, "n": 130}, dtype="f32", weight=0)),
    "gemm fp8 trn2": ("trn2", einsum("mk,kn->mn", {"m": 16, "k": 600, "n": 16}, dtype="f8e4m3", weight=1)),
    "bmm": ("trn2", einsum("vmk,vnk->vmn", {"v": 3, "m": 20, "n": 140, "k": 36}, dtype="f16", weight=1)),
    "conv": (
        "trn1",
        conv2d(batch=2, in_channels=4, out_channels=8, input_height=9, input_width=9, kernel=3, stride=2, padding=1),
    ),
}
WHOLE = 1500  # spaces up to this size are checked on every point, larger ones on a sample


def target(name: str) -> TrainiumTarget:
    """A target over the ladder space (`space.LADDER`): these checks enumerate whole spaces, and the formulas
    and the grid do not depend on the tiles offered (every tile count: test_trainium_tile_bounds.py)."""
    t = get_target(name)
    assert isinstance(t, TrainiumTarget)
    t.tiles = LADDER
    return t


def _point(cols: dict[str, np.ndarray], i: int) -> dict[str, Choice]:
    return {k: (v[i].item() if isinstance(v[i], np.generic) else v[i]) for k, v in cols.items()}


@pytest.mark.parametrize("name", list(SMALL))
def test_score_batch_equals_check_and_cost_point_by_point(name: str) -> None:
    preset, p = SMALL[name]
    t = target(preset)
    cols = t.space(p).columns()
    n = len(cols["stationary"])
    s = t.score_batch(p, cols)
    rows = range(n) if n <= WHOLE else np.random.default_rng(0).choice(n, size=300, replace=False)
    feasible = 0
    for i in rows:
        m = t.mapping(p, _point(cols, i))
        ok = not t.check(p, m)
        assert bool(s.feasible[i]) == ok, _point(cols, i)
        if not ok:
            assert all(math.isinf(s.objectives[k][i]) for k in ("latency", "offchip_bytes", "footprint"))
            continue
        feasible += 1
        r = t.cost(p, m)
        assert s.objectives["latency"][i] == r.seconds  # same formulas, same operations: bit-identical
        assert s.objectives["offchip_bytes"][i] == r.offchip_bytes
        assert s.objectives["footprint"][i] == r.footprint_bytes
    assert feasible > 0


def _codes(space: SearchSpace) -> dict[str, np.ndarray]:
    """Every point of `space` as code columns (enumeration order)."""
    digits = np.unravel_index(np.arange(space.size), tuple(len(p.choices) for p in space.params))
    return {p.name: d.astype(np.intp) for p, d in zip(space.params, digits, strict=True)}


def _same(a: BatchScore, b: BatchScore) -> None:
    assert np.array_equal(np.asarray(a.feasible, bool), np.asarray(b.feasible, bool))
    for k in ("latency", "offchip_bytes", "footprint"):
        assert np.array_equal(a.objectives[k], b.objectives[k]), k


@pytest.mark.parametrize("name", list(SMALL))
def test_score_codes_equals_score_batch_in_any_order_and_chunk(name: str) -> None:
    preset, p = SMALL[name]
    t = target(preset)
    space = t.space(p)
    codes = _codes(space)
    perm = np.random.default_rng(1).permutation(space.size)
    shuffled = {k: v[perm] for k, v in codes.items()}
    ref = t.score_batch(p, space.columns())
    got = t.score_codes(p, shuffled)
    assert np.asarray(got.feasible).any()
    for k in ("latency", "offchip_bytes", "footprint"):
        assert np.array_equal(got.objectives[k], ref.objectives[k][perm]), k
    assert np.array_equal(got.feasible, np.asarray(ref.feasible)[perm])
    one = {k: v[5:6] for k, v in shuffled.items()}  # a chunk of one point
    _same(t.score_codes(p, one), t.score_batch(p, SpaceCoder(space).decode(one)))
    assert t.score_codes(p, {k: v[:0] for k, v in codes.items()}).objectives["latency"].shape == (0,)
    narrow = t.score_codes(p, {k: v.astype(np.int16) for k, v in codes.items()})  # other integer widths
    assert np.array_equal(narrow.objectives["latency"], ref.objectives["latency"])


def test_slabs_and_copied_one_core_slabs_price_like_the_whole_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2304 points, cores (1, 2, 4, 8) and two shard roles: by default (at most `SMALL` points per stationary
    # choice) one slab per (stationary, acc), every cores choice at once; above it one slab per (stationary,
    # cores, acc), the one-core slab priced for one shard and broadcast to the other
    p = einsum("vmk,vnk->vmn", {"v": 8, "m": 64, "n": 48, "k": 96}, dtype="bf16", weight=1)
    space = target("trn2").space(p)
    ch = {q.name: q.choices for q in space.params}
    assert ch["cores"][0] == 1 and len(ch["shard"]) > 1 and space.size <= trainium_grid.SMALL <= trainium_grid.SLAB
    codes = _codes(space)
    calls: dict[str, int] = {"traffic": 0, "accumulation": 0}

    def counting(name: str) -> object:
        real = getattr(trainium_grid, name)

        def counted(*args: object) -> object:
            calls[name] += 1
            return real(*args)

        return counted

    for name in calls:
        monkeypatch.setattr(trainium_grid, name, counting(name))
    whole = target("trn2").score_codes(p, codes)
    n_st, n_cores, n_acc = len(ch["stationary"]), len(ch["cores"]), len(ch["acc"])
    assert calls == {"traffic": n_st, "accumulation": n_st * n_acc}  # traffic shared by accs
    calls.update(traffic=0, accumulation=0)
    monkeypatch.setattr(trainium_grid, "SMALL", 0)  # a slab per cores choice
    _same(target("trn2").score_codes(p, codes), whole)
    assert calls == {"traffic": n_st * n_cores, "accumulation": n_st * n_cores * n_acc}
    calls.update(traffic=0, accumulation=0)
    monkeypatch.setattr(trainium_grid, "SLAB", 1)  # one point per slab: every shard apart
    t = target("trn2")
    sliced = t.score_codes(p, codes)
    _same(sliced, whole)
    one_core_copies = space.size // len(ch["cores"]) // len(ch["shard"]) * (len(ch["shard"]) - 1)
    assert calls["accumulation"] == space.size - one_core_copies  # the one-core slabs of other shards: copied
    assert calls["traffic"] * n_acc == calls["accumulation"]
    copied = np.flatnonzero((codes["cores"] == 0) & (codes["shard"] > 0))
    lat = np.asarray(sliced.objectives["latency"])
    for i in copied[:: max(1, copied.size // 12)]:
        point = point_at(space, codes, int(i))
        m = t.mapping(p, point)
        if t.check(p, m):
            assert math.isinf(lat[i])
        else:
            assert lat[i] == t.cost(p, m).seconds


def test_grid_scorer_numbers_points_in_the_grid_order() -> None:
    # axes b (one choice) and c add nothing / their code; a point's number is C order over the axes
    grid = PricedGrid(axes=("a", "b", "c"), shape=(2, 1, 3), latency=np.asarray([1.0, 2, 3, np.inf, 5, 6]),
                      offchip=np.arange(6.0), footprint=np.arange(6.0) * 10)  # fmt: skip
    score = GridScorer(grid)
    codes = {"c": np.asarray([2, 0, 0], dtype=np.int32), "a": np.asarray([0, 1, 1]), "b": np.zeros(3, dtype=np.intp)}
    assert score.flat(codes).tolist() == [2, 3, 3]
    s = score(codes)
    assert s.feasible.tolist() == [True, False, False]
    assert s.objectives["offchip_bytes"].tolist() == [2.0, 3.0, 3.0]
    one = GridScorer(PricedGrid(("a",), (1,), np.ones(1), np.ones(1), np.ones(1)))
    assert one.flat({"a": np.zeros(4, dtype=np.intp)}).tolist() == [0, 0, 0, 0]


def test_unsupported_problems_score_infeasible_by_value_and_by_code() -> None:
    t = target("trn1")
    p = einsum("mk,kn->mn", {"m": 64, "k": 128, "n": 64}, dtype="i8", weight=1)
    assert t.supports(p)
    by_codes = t.score_codes(p, {"unsupported": np.zeros(3, dtype=np.intp)})
    by_values = t.score_batch(p, t.space(p).columns())
    for s, n in ((by_codes, 3), (by_values, 1)):
        assert np.asarray(s.feasible).shape == (n,) and not np.asarray(s.feasible).any()
        assert set(s.objectives) == set(t.objectives)
        assert all(np.isinf(v).all() and len(v) == n for v in s.objectives.values())


@pytest.mark.slow
def test_column_dtypes_and_order_of_rows_do_not_change_scores() -> None:
    preset, p = SMALL["bmm"]
    t = target(preset)
    cols = t.space(p).columns()
    ref = t.score_batch(p, cols)
    rng = np.random.default_rng(0)
    # object columns take the slow per-value path: a seeded sample of the 373248 points in shuffled
    # order (every choice of every parameter met), the narrow dtypes below on a whole sub-space
    perm = rng.choice(len(cols["stationary"]), size=20_000, replace=False)
    assert all(set(np.unique(v[perm])) == set(np.unique(v)) for v in cols.values())
    objects = {k: np.asarray(list(v[perm]), dtype=object) for k, v in cols.items()}
    other = t.score_batch(p, objects)
    for k in ref.objectives:
        assert np.array_equal(other.objectives[k], ref.objectives[k][perm])
    # a sub-space whose string column is narrower (<U5 for "other") and int32 / uint16 columns
    sub = {k: v[cols["stationary"] == "other"] for k, v in cols.items()}
    for width in (np.int32, np.uint16):
        narrow = {
            k: (v.astype(str(v[0]).__class__) if v.dtype.kind == "U" else v.astype(width)) for k, v in sub.items()
        }
        narrow["stationary"] = np.asarray(["other"] * len(sub["stationary"]))
        assert narrow["stationary"].dtype.itemsize == 5 * 4
        got = t.score_batch(p, narrow)
        keep = cols["stationary"] == "other"
        assert np.array_equal(got.objectives["latency"], ref.objectives["latency"][keep])


@pytest.mark.parametrize(
    ("param", "bad"),
    [("tile_mov", 96), ("order", "sm"), ("order", "xyz"), ("stationary", "weigh"), ("acc", "PSUM"), ("cores", -1),
     ("cores", True), ("block_k", 1 << 40)],
)  # fmt: skip
def test_values_outside_the_space_are_rejected_with_the_parameter(param: str, bad: object) -> None:
    preset, p = SMALL["gemm bf16"]
    t = target(preset)
    cols = t.space(p).columns()
    col = cols[param].astype(object) if isinstance(bad, (str, bool)) else cols[param].copy()
    col[3] = bad
    cols[param] = col.astype(str) if isinstance(bad, str) else col
    with pytest.raises(ValueError, match=param):
        t.score_batch(p, cols)


def test_priced_grids_are_kept_per_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    priced = []
    real = trainium_module.price_grid

    def counted(*args: object) -> object:
        priced.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(trainium_module, "price_grid", counted)
    t = target("trn1")
    a, b = SMALL["gemm bf16"][1], SMALL["conv"][1]
    first = t.score_batch(a, t.space(a).columns()).objectives["latency"]
    t.score_batch(b, t.space(b).columns())
    again = t.score_codes(a, _codes(t.space(a))).objectives["latency"]
    assert np.array_equal(first, again)
    equal = Problem.model_validate_json(a.model_dump_json())  # an equal problem parsed again: the same grid
    assert equal is not a
    t.score_codes(equal, _codes(t.space(a)))
    assert len(priced) == 2
    fresh = target("trn1").score_batch(a, t.space(a).columns()).objectives["latency"]
    assert np.array_equal(first, fresh) and len(priced) == 3


def test_order_effects_follow_the_loop_nest_rules() -> None:
    # hardware-facts.md §2.2 step 5: a block is fetched again when a loop it does not depend on
    # advances outside its own loops; the open PSUM/SBUF accumulators are the output loops inside k.
    eff = order_effects(ORDERS)
    o = {name: i for i, name in enumerate(ORDERS)}
    assert eff["m_in_stat"][o["msk"], 1, 1, 1] and not eff["m_in_stat"][o["skm"], 1, 1, 1]
    assert not eff["m_in_stat"][o["msk"], 0, 1, 0]  # nothing of the stationary input inside m: fetched once
    assert eff["s_in_mov"][o["smk"], 1, 1, 0] and not eff["s_in_mov"][o["mks"], 1, 1, 1]
    assert eff["s_live"][o["ksm"], 1, 1, 1] and eff["m_live"][o["ksm"], 1, 1, 1]
    assert not eff["s_live"][o["ksm"], 1, 1, 0]  # one k block: no accumulation across blocks
    assert not eff["s_live"][o["smk"], 1, 1, 1]


def test_orders_collapse_only_over_roles_with_one_block() -> None:
    assert distinct_orders("smk") == ORDERS
    assert set(distinct_orders("k")) == {ORDERS[0]}
    assert len(distinct_orders("sk")) == 2 and len(distinct_orders("")) == 1


def _unpruned(t: TrainiumTarget, p: Problem) -> SearchSpace:
    space = t.space(p)
    batch = math.prod(p.axes[a] for a in roles_of(p, "weight").axes["b"]) > 1
    full = {"order": ORDERS, "cores": core_choices(t.hardware), "shard": ("m", "s", "b") if batch else ("m", "s")}
    return narrowed(space, full)


def _nest(t: TrainiumTarget, p: Problem, point: dict[str, Choice]) -> tuple[object, ...]:
    m = t.mapping(p, point)
    return (point["stationary"], point["acc"], tuple((lvl.name, lvl.loops) for lvl in m.levels))


@pytest.mark.parametrize(
    ("preset", "problem"),
    [
        ("trn1", einsum("mk,kn->mn", {"m": 24, "k": 136, "n": 20}, dtype="bf16", weight=1)),  # only k has blocks
        ("trn2", einsum("vmk,vnk->vmn", {"v": 3, "m": 20, "n": 12, "k": 40}, dtype="bf16", weight=1)),  # batch only
        ("trn1", SMALL["conv"][1]),  # s and k have blocks, m a single one
    ],
)
def test_pruned_space_keeps_every_distinct_loop_nest(preset: str, problem: Problem) -> None:
    # the cost is a function of the nest, the stationary input and acc (mapping_quantities), so equal
    # sets of (stationary, acc, nest) mean every cost of the product of choices is still reachable
    t = target(preset)
    pruned, full = t.space(problem), _unpruned(t, problem)
    assert pruned.size < full.size
    pc, fc = pruned.columns(), full.columns()
    kept = {_nest(t, problem, _point(pc, i)) for i in range(pruned.size)}
    every = {_nest(t, problem, _point(fc, i)) for i in range(full.size)}
    assert kept == every


def test_grid_effect_tables_agree_with_order_effects_where_the_role_has_blocks() -> None:
    eff, tab = order_effects(ORDERS), effect_tables(ORDERS)
    for o, fs, fm, fk in itertools.product(range(len(ORDERS)), (0, 1), (0, 1), (0, 1)):
        if fm:  # the m trips multiply: read with (order, s flag, k flag)
            assert tab["m_in_stat"][o * 4 + fs * 2 + fk] == eff["m_in_stat"][o, fs, fm, fk]
            assert tab["m_live"][o * 4 + fs * 2 + fk] == eff["m_live"][o, fs, fm, fk]
        if fs:  # the s trips multiply: read with (order, m flag, k flag)
            assert tab["s_in_mov"][o * 4 + fm * 2 + fk] == eff["s_in_mov"][o, fs, fm, fk]
            assert tab["s_live"][o * 4 + fm * 2 + fk] == eff["s_live"][o, fs, fm, fk]
    assert tab["m_in_stat"].any() and not tab["m_in_stat"].all()


def test_every_combination_of_role_flags_is_covered() -> None:
    eff = order_effects(ORDERS)
    for k in eff:
        assert eff[k].shape == (len(ORDERS), 2, 2, 2)
    # a role with a single block never multiplies anything
    for o, fs, fk in itertools.product(range(len(ORDERS)), (0, 1), (0, 1)):
        assert not eff["m_in_stat"][o, fs, 0, fk] and not eff["m_live"][o, fs, 0, fk]
