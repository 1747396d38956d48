"""The fast Trainium scorer (priced grid + column decoding) and the pruned space.

Guards the refactor: `score_batch` over whole spaces equals `check`/`cost` point by point on all
three objectives (every point of the small spaces, a sample of the larger ones); column dtypes
other than the ones `SearchSpace.columns()` makes decode the same; values outside the space are
rejected; the pruned space keeps every distinct loop nest of the unpruned product of choices.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from costmodels.protocol import Choice, Param, SearchSpace
from costmodels.registry import get_target
from costmodels.trainium import TrainiumTarget
from costmodels.trainium_grid import order_effects
from costmodels.trainium_nest import roles_of
from costmodels.trainium_space import ORDERS, core_choices, distinct_orders
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
    t = get_target(name)
    assert isinstance(t, TrainiumTarget)
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


def test_column_dtypes_and_order_of_rows_do_not_change_scores() -> None:
    preset, p = SMALL["bmm"]
    t = target(preset)
    cols = t.space(p).columns()
    ref = t.score_batch(p, cols)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(cols["stationary"]))
    objects = {k: np.asarray(list(v[perm]), dtype=object) for k, v in cols.items()}
    other = t.score_batch(p, objects)
    for k in ref.objectives:
        assert np.array_equal(other.objectives[k], ref.objectives[k][perm])
    # a sub-space whose string column is narrower (<U5 for "other") and int32 columns
    sub = {k: v[cols["stationary"] == "other"] for k, v in cols.items()}
    narrow = {k: (v.astype(str(v[0]).__class__) if v.dtype.kind == "U" else v.astype(np.int32)) for k, v in sub.items()}
    narrow["stationary"] = np.asarray(["other"] * len(sub["stationary"]))
    assert narrow["stationary"].dtype.itemsize == 5 * 4
    got = t.score_batch(p, narrow)
    keep = cols["stationary"] == "other"
    assert np.array_equal(got.objectives["latency"], ref.objectives["latency"][keep])


@pytest.mark.parametrize(
    ("param", "bad"),
    [("tile_mov", 96), ("order", "sm"), ("order", "xyz"), ("stationary", "weigh"), ("acc", "PSUM"), ("cores", -1)],
)
def test_values_outside_the_space_are_rejected_with_the_parameter(param: str, bad: object) -> None:
    preset, p = SMALL["gemm bf16"]
    t = target(preset)
    cols = t.space(p).columns()
    col = cols[param].astype(object) if isinstance(bad, str) else cols[param].copy()
    col[3] = bad
    cols[param] = col.astype(str) if isinstance(bad, str) else col
    with pytest.raises(ValueError, match=param):
        t.score_batch(p, cols)


def test_priced_grids_are_kept_per_problem() -> None:
    t = target("trn1")
    a, b = SMALL["gemm bf16"][1], SMALL["conv"][1]
    first = t.score_batch(a, t.space(a).columns()).objectives["latency"]
    t.score_batch(b, t.space(b).columns())
    again = t.score_batch(a, t.space(a).columns()).objectives["latency"]
    assert np.array_equal(first, again)
    fresh = target("trn1").score_batch(a, t.space(a).columns()).objectives["latency"]
    assert np.array_equal(first, fresh)


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
    return SearchSpace(params=tuple(Param(name=q.name, choices=full.get(q.name, q.choices)) for q in space.params))


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


def test_every_combination_of_role_flags_is_covered() -> None:
    eff = order_effects(ORDERS)
    for k in eff:
        assert eff[k].shape == (len(ORDERS), 2, 2, 2)
    # a role with a single block never multiplies anything
    for o, fs, fk in itertools.product(range(len(ORDERS)), (0, 1), (0, 1)):
        assert not eff["m_in_stat"][o, fs, 0, fk] and not eff["m_live"][o, fs, 0, fk]
