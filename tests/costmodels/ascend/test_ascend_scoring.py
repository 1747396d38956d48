"""Guards of the fast Ascend scorer: `score_codes` and `score_batch` must price every point as `check`/`cost` do.

Points given as choice codes are priced from per-parameter tables over the space's choices, by
the gather path, the grid path or (once enough of the space has been asked for) the tabulated
whole space; value columns are encoded to codes first, and points with a value outside the space
are priced from tables over the values they hold. These tests compare all of them, over whole
small spaces, with the point-by-point `check`/`cost` path and with each other.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodels import param_tables as ascend_batch
from costmodels.ascend import cube_grid as ascend_cube_grid
from costmodels.ascend import scoring as ascend_prepared
from costmodels.ascend.cube_grid import CubeTable
from costmodels.ascend.target import AscendTarget
from costmodels.ascend.tiling import level_sizes, nest_group, round_up
from costmodels.choice_codes import SpaceCoder
from costmodels.param_tables import run_start
from costmodels.protocol import BatchScore, Choice
from costmodels.registry import get_target
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = ("ascend-910b", "ascend-a5")


def _problems() -> dict[str, Problem]:
    return {
        "f16": einsum("mk,kn->mn", {"m": 32, "k": 32, "n": 24}, dtype="f16", weight=1),
        "bf16": einsum("mk,kn->mn", {"m": 20, "k": 48, "n": 32}, dtype="bf16", weight=1),
        "i8": einsum("mk,kn->mn", {"m": 32, "k": 64, "n": 16}, dtype="i8", weight=1),
        "f32": einsum("mk,kn->mn", {"m": 17, "k": 16, "n": 32}, dtype="f32", weight=1),
        "fp8": einsum("mk,kn->mn", {"m": 32, "k": 64, "n": 32}, dtype="f8e4m3", weight=1),
        "bmm": einsum("vmk,vnk->vmn", {"v": 2, "m": 16, "n": 24, "k": 32}, dtype="f16", weight=1),
        "conv": conv2d(batch=1, in_channels=4, out_channels=16, input_height=4, input_width=4, kernel=3, padding=1),
        "rowprod": einsum("mk->m", {"m": 40, "k": 24}, dtype="f32", reduce_op="mul"),
        "rowsum": einsum("abk->ab", {"a": 3, "b": 20, "k": 48}, dtype="f16", reduce_op="add"),
        "rowmax": einsum("mk->m", {"m": 64, "k": 30}, dtype="f32", reduce_op="max"),
    }


PROBLEMS = _problems()
VECTOR = ("rowprod", "rowsum", "rowmax")


def _plain(v: object) -> Choice:
    return v.item() if isinstance(v, np.generic) else v  # type: ignore[return-value]


def _target(preset: str, l2_bytes: int | None = None) -> AscendTarget:
    t = get_target(preset, {} if l2_bytes is None else {"l2_bytes": l2_bytes})
    assert isinstance(t, AscendTarget)
    return t


def _same(a: BatchScore, b: BatchScore, objectives: tuple[str, ...]) -> None:
    assert np.array_equal(np.asarray(a.feasible, bool), np.asarray(b.feasible, bool))
    for o in objectives:
        assert np.array_equal(a.objectives[o], b.objectives[o]), o


def _codes(target: AscendTarget, problem: Problem, idx: np.ndarray) -> dict[str, np.ndarray]:
    space = target.space(problem)
    digits = np.unravel_index(idx, tuple(len(p.choices) for p in space.params))
    return {p.name: d.astype(np.intp) for p, d in zip(space.params, digits, strict=True)}


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("pname", list(PROBLEMS))
def test_whole_space_matches_check_and_cost(preset: str, pname: str) -> None:
    target, problem = _target(preset), PROBLEMS[pname]
    if target.supports(problem):
        assert pname == "fp8" and preset == "ascend-910b"  # no fp8 on A2/A3 (pto-tmatmul.txt, Constraints)
        return
    space = target.space(problem)
    # 300 points spread over the space, each preset its own half of them (every other one), scored as one batch
    # and checked one by one (issue #12 made the spaces too large to check every point); a batch scores each row
    # alone, whatever else it holds: test_score_codes_equals_score_batch_in_any_order_and_chunk
    spread = np.unique(np.linspace(0, space.size - 1, min(space.size, 300)).astype(np.int64))
    picks = spread[PRESETS.index(preset) :: len(PRESETS)]
    cols = SpaceCoder(space).decode(_codes(target, problem, picks))
    score = target.score_batch(problem, cols)
    feasible = 0
    for i in range(len(picks)):
        point = {k: _plain(v[i]) for k, v in cols.items()}
        mapping = target.mapping(problem, point)
        ok = not target.check(problem, mapping)
        assert bool(score.feasible[i]) == ok, point
        if not ok:
            assert all(math.isinf(score.objectives[o][i]) for o in target.objectives)
            continue
        feasible += 1
        report = target.cost(problem, mapping)
        assert score.objectives["latency"][i] == report.seconds, point  # bit-identical: one formula
        assert score.objectives["offchip_bytes"][i] == report.offchip_bytes
        assert score.objectives["footprint"][i] == report.footprint_bytes
    assert feasible > 0


def _big() -> Problem:
    return einsum("vmk,vnk->vmn", {"v": 6, "m": 200, "n": 120, "k": 96}, dtype="bf16", weight=1)


# the preset's L2 (inputs L2-resident), or none: HBM traffic; each preset one of them, in turn
@pytest.mark.parametrize(("preset", "l2_bytes"), [(PRESETS[0], None), (PRESETS[1], 0)])
def test_tabulated_grid_and_gather_paths_agree(
    preset: str, l2_bytes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole space tabulated (in slabs of any size), one grid over the box of the codes, and per-point gathers
    price alike."""
    problem = _big()
    n = _target(preset).space(problem).size
    order = np.random.default_rng(1).permutation(n)
    tabulated = _target(preset, l2_bytes)
    assert tabulated.prepared(problem).cube.l2_resident == (l2_bytes is None)
    ref = tabulated.score_codes(problem, _codes(tabulated, problem, np.arange(n)))
    assert tabulated.prepared(problem).table is not None
    assert 0 < ref.feasible.sum() < n  # both kinds of point are exercised
    monkeypatch.setattr(ascend_cube_grid, "SLAB", 4000)  # slabs cut along several axes
    sliced = _target(preset, l2_bytes)
    _same(sliced.score_codes(problem, _codes(sliced, problem, np.arange(n))), ref, sliced.objectives)
    monkeypatch.setattr(ascend_prepared, "TABULATE_MAX", 0)
    for cells_per_point, idx in ((1e18, np.arange(n)), (1e18, order), (0.0, order)):
        monkeypatch.setattr(ascend_batch, "GRID_CELLS_PER_POINT", cells_per_point)
        target = _target(preset, l2_bytes)
        got = target.score_codes(problem, _codes(target, problem, idx))
        assert target.prepared(problem).table is None
        _same(
            got,
            BatchScore(feasible=ref.feasible[idx], objectives={o: v[idx] for o, v in ref.objectives.items()}),
            target.objectives,
        )


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("l2_bytes", [None, 0])
def test_runs_of_a_tabulated_space_read_it_as_read_only_views(preset: str, l2_bytes: int | None) -> None:
    """Consecutive points (a chunk of an enumeration) read latency and feasibility as slices of the kept table."""
    target, problem = _target(preset, l2_bytes), _big()
    n = target.space(problem).size
    ref = target.score_codes(problem, _codes(target, problem, np.arange(n)))
    table = target.prepared(problem).table
    assert isinstance(table, CubeTable)
    assert (table.offchip is None) == (l2_bytes is None)  # kept only when it varies
    assert table.footprint.size * table.grids == n  # kept without the grid axis
    for idx in (np.arange(n), np.arange(17, 4000), np.arange(n - 5, n), np.arange(9, 10), np.arange(42, 42 + 5 * 21)):
        got = target.score_codes(problem, _codes(target, problem, idx))
        assert np.shares_memory(got.objectives["latency"], table.latency)
        assert np.shares_memory(got.feasible, table.ok)
        with pytest.raises(ValueError, match="read-only"):
            got.objectives["latency"][0] = 0.0  # a caller cannot spoil the kept table
        want = BatchScore(feasible=ref.feasible[idx], objectives={o: v[idx] for o, v in ref.objectives.items()})
        _same(got, want, target.objectives)
    for idx in (np.arange(4000, 17, -1), np.arange(0, n, 2), np.asarray([5, 5])):
        got = target.score_codes(problem, _codes(target, problem, idx))
        assert not np.shares_memory(got.objectives["latency"], table.latency)
        want = BatchScore(feasible=ref.feasible[idx], objectives={o: v[idx] for o, v in ref.objectives.items()})
        _same(got, want, target.objectives)


def test_run_start_tells_runs_of_points_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ascend_batch, "RUN_BLOCK", 8)  # several blocks per check
    sizes = (3, 1, 4, 5)
    cols = [d.astype(np.intp) for d in np.unravel_index(np.arange(60), sizes)]
    assert run_start(cols, sizes) == 0
    assert run_start([c[7:50] for c in cols], sizes) == 7
    assert run_start([c[33:34] for c in cols], sizes) == 33
    assert run_start([np.broadcast_to(c[20:21], (1,)) for c in cols], sizes) == 20  # read-only broadcasts too
    swapped = [c.copy() for c in cols]
    swapped[-1][[41, 42]] = swapped[-1][[42, 41]]  # first and last point still fit a run: only the full check tells
    assert run_start(swapped, sizes) is None
    assert run_start([c[::2] for c in cols], sizes) is None
    assert run_start([c[:0] for c in cols], sizes) is None
    past = [c[50:] for c in cols]
    past[0] = past[0] + 1  # numbers 70..79: beyond the 60 points of the space
    assert run_start(past, sizes) is None


@pytest.mark.parametrize("preset", PRESETS)
def test_tabulation_starts_once_enough_of_the_space_is_asked_for(preset: str) -> None:
    target, problem = _target(preset), _big()
    prep = target.prepared(problem)
    n = prep.size
    idx = np.random.default_rng(2).permutation(n)
    step = int(n * ascend_prepared.TABULATE_SHARE) // 3
    parts = [target.score_codes(problem, _codes(target, problem, idx[i * step : (i + 1) * step])) for i in range(2)]
    assert prep.table is None  # two thirds of the share: still priced from the tables
    parts.append(target.score_codes(problem, _codes(target, problem, idx[2 * step :])))
    assert prep.table is not None
    fresh = _target(preset).score_codes(problem, _codes(target, problem, idx))
    joined = BatchScore(
        feasible=np.concatenate([p.feasible for p in parts]),
        objectives={o: np.concatenate([p.objectives[o] for p in parts]) for o in target.objectives},
    )
    _same(joined, fresh, target.objectives)


def test_many_one_point_calls_tabulate_too() -> None:
    """Each call counts as at least CALL_POINTS points: a search asking one point at a time tabulates soon."""
    target, problem = _target("ascend-a5"), _big()
    prep = target.prepared(problem)
    calls = math.ceil(ascend_prepared.TABULATE_SHARE * prep.size / ascend_prepared.CALL_POINTS)
    idx = np.random.default_rng(5).permutation(prep.size)[: calls + 3]
    got = [target.score_codes(problem, _codes(target, problem, idx[i : i + 1])) for i in range(calls + 3)]
    assert prep.table is not None
    ref = _target("ascend-a5").score_codes(problem, _codes(target, problem, idx))
    assert [float(g.objectives["latency"][0]) for g in got] == ref.objectives["latency"].tolist()
    assert [bool(g.feasible[0]) for g in got] == ref.feasible.tolist()
    fresh = _target("ascend-a5")
    for i in range(calls - 1):
        fresh.score_codes(problem, _codes(fresh, problem, idx[i : i + 1]))
    assert fresh.prepared(problem).table is None


#: the GEMM (millions of points, scored by tables) and the conv (tabulated) each on one preset, the presets in turn;
#: the row reductions (tens of points, TROWPROD differs per preset) on both
CODES_CASES = [("bf16", PRESETS[0]), ("conv", PRESETS[1])] + [(v, pr) for v in VECTOR for pr in PRESETS]


@pytest.mark.parametrize(("pname", "preset"), CODES_CASES)
def test_score_codes_equals_score_batch_in_any_order_and_chunk(preset: str, pname: str) -> None:
    target, problem = _target(preset), PROBLEMS[pname]
    space = target.space(problem)
    coder = SpaceCoder(space)
    idx = np.random.default_rng(3).permutation(space.size)
    codes = _codes(target, problem, idx)
    by_values = _target(preset).score_batch(problem, coder.decode(codes))
    assert by_values.feasible.any()
    _same(target.score_codes(problem, codes), by_values, target.objectives)
    for i in (0, 5, space.size - 1):  # one point alone
        one = _target(preset).score_codes(problem, {k: v[i : i + 1] for k, v in codes.items()})
        assert one.feasible.shape == (1,) and bool(one.feasible[0]) == bool(by_values.feasible[i])
        assert one.objectives["latency"][0] == by_values.objectives["latency"][i]
    empty = target.score_codes(problem, {k: v[:0] for k, v in codes.items()})
    assert empty.feasible.shape == (0,) and all(v.shape == (0,) for v in empty.objectives.values())


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("pname", ["bf16", "rowsum"])
def test_value_columns_of_any_type_score_alike(preset: str, pname: str) -> None:
    """Object columns, other integer widths and narrower strings all encode to the same points."""
    problem = PROBLEMS[pname]
    cols = _target(preset).space(problem).columns()
    step = max(1, len(next(iter(cols.values()))) // 200_000)  # every legal grid: millions of points; a spread of them
    cols = {k: v[::step] for k, v in cols.items()}
    ref = _target(preset).score_batch(problem, cols)
    objects = {k: v.astype(object) for k, v in cols.items()}  # Python ints, bools and strs, as the choices are
    narrow = {k: v.astype(np.int32 if v.dtype.kind == "i" else v.dtype) for k, v in cols.items()}
    unsigned = {k: v.astype(np.uint16 if v.dtype.kind == "i" else v.dtype) for k, v in cols.items()}
    if "core_grid" in cols:
        width = max(len(g) for g in cols["core_grid"])
        narrow["core_grid"] = cols["core_grid"].astype(f"<U{width}")
        unsigned["core_grid"] = cols["core_grid"].astype("<U16")
    for variant in (objects, narrow, unsigned):
        _same(_target(preset).score_batch(problem, variant), ref, ("latency", "offchip_bytes", "footprint"))


@pytest.mark.parametrize("preset", PRESETS)
def test_values_outside_the_choices_are_priced_like_check_and_cost(preset: str) -> None:
    """A base tile or grid that is no choice goes to the general path; points beside it keep their codes."""
    target, problem = _target(preset), einsum("mk,kn->mn", {"m": 96, "k": 64, "n": 80}, weight=1)
    space = target.space(problem)
    choices = {p.name: p.choices for p in space.params}
    assert 40 not in choices["base_m"] and "1x4x3" not in choices["core_grid"]  # legal: M sides 4 are never tight here
    odd: dict[str, Choice] = {"base_m": 40, "base_k": 32, "base_n": 16, "l1_m": 1, "l1_k": 2, "l1_n": 1}
    odd |= {"double_buffer": False, "core_grid": "1x4x3"}
    known = {p.name: p.choices[0] for p in space.params}
    cols = {k: np.asarray([known[k], odd[k], known[k], odd[k]], dtype=object) for k in odd}
    score = target.score_batch(problem, cols)
    for i, point in ((0, known), (1, odd)):
        mapping = target.mapping(problem, point)
        ok = not target.check(problem, mapping)
        assert bool(score.feasible[i]) == ok == bool(score.feasible[i + 2])
        if ok:
            assert score.objectives["latency"][i] == target.cost(problem, mapping).seconds
    assert bool(score.feasible[1])
    alone = target.score_codes(problem, {k: np.asarray([0]) for k in odd})
    assert alone.objectives["latency"][0] == score.objectives["latency"][0]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("pname", ["bf16", "conv", "big"])
def test_general_path_prices_known_points_as_their_codes_do(preset: str, pname: str) -> None:
    """Tables over the values a batch holds (the general path) give what the tables over the choices give."""
    target, problem = _target(preset), _big() if pname == "big" else PROBLEMS[pname]
    space = target.space(problem)
    idx = np.random.default_rng(4).permutation(space.size)[:150]
    codes = _codes(target, problem, idx)
    general = target.prepared(problem).cube_values(SpaceCoder(space).decode(codes))
    by_codes = target.score_codes(problem, codes)
    assert np.array_equal(general["ok"], by_codes.feasible) and general["ok"].any()
    assert pname != "big" or not general["ok"].all()
    for o in target.objectives:
        assert np.array_equal(general[o], by_codes.objectives[o]), o


@pytest.mark.parametrize("preset", PRESETS)
def test_vector_values_outside_the_choices_are_priced_like_check_and_cost(preset: str) -> None:
    target, problem = _target(preset), PROBLEMS["rowsum"]
    assert 12 not in dict((p.name, p.choices) for p in target.space(problem).params)["row_block"]
    point: dict[str, Choice] = {"row_block": 12, "col_block": 48, "double_buffer": True}
    score = target.score_batch(problem, {k: np.asarray([v]) for k, v in point.items()})
    mapping = target.mapping(problem, point)
    assert not target.check(problem, mapping) and bool(score.feasible[0])
    assert score.objectives["latency"][0] == target.cost(problem, mapping).seconds


def test_malformed_values_are_refused_with_the_reason() -> None:
    target, problem = _target("ascend-910b"), PROBLEMS["bf16"]
    space = target.space(problem)  # 3.5 M points: a seeded sample of 20,000 of them
    idx = np.sort(np.random.default_rng(6).choice(space.size, 20_000, replace=False))
    cols = SpaceCoder(space).decode(_codes(target, problem, idx))
    with pytest.raises(ValueError, match="core_grid"):
        target.score_batch(problem, {k: v for k, v in cols.items() if k != "core_grid"})
    with pytest.raises(ValueError, match="BxMxN"):
        target.score_batch(problem, cols | {"core_grid": np.full(len(cols["core_grid"]), "four")})


def test_unsupported_problems_score_infeasible_by_code_and_value() -> None:
    target, problem = _target("ascend-910b"), PROBLEMS["fp8"]
    assert target.supports(problem)
    n = 7
    codes = {p.name: np.zeros(n, dtype=np.intp) for p in target.space(problem).params}
    for score in (
        target.score_codes(problem, codes),
        target.score_batch(problem, SpaceCoder(target.space(problem)).decode(codes)),
    ):
        assert not score.feasible.any() and np.isinf(score.objectives["latency"]).all()


@settings(max_examples=80, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 300), max_size=3),
    counts=st.lists(st.lists(st.integers(-1, 700), min_size=4, max_size=4), min_size=1, max_size=3),
)
def test_level_sizes_are_nest_group_sizes(sizes: list[int], counts: list[list[int]]) -> None:
    axes = tuple((f"a{i}", s) for i, s in enumerate(sizes))
    got = level_sizes(axes, tuple(np.asarray(c) for c in counts))
    for j in range(4):
        nest = nest_group(axes, tuple(c[j] for c in counts))
        assert got[j].tolist() == [nest.size(i) for i in range(len(counts) + 1)]


def test_round_up_is_one_helper_for_ints_and_arrays() -> None:
    assert round_up(17, 16) == 32 and round_up(32, 16) == 32 and round_up(1, 32) == 32
    assert round_up(np.asarray([0, 1, 16, 17]), 16).tolist() == [0, 16, 16, 32]
