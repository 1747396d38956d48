"""Trainium's cells for two objectives: every tile structure's core splits (issue #12).

- every feasible point of a structure is, on latency and off-chip bytes, no better than one of the
  structure's cells (`front_cells.structure_cells`), checked by scoring whole structures of random
  small problems: the contract of `mapper.bounds.FrontCellBounded`;
- the cells of every structure at once (`cell_blocks`) are the cells of each structure alone;
- best-first with two objectives on a space of every tile count returns the enumeration's exact
  front, with the dominance pass (`mapper.strategies.front_pass`) pruning structures;
- a pass that keeps a structure whose cell the front does not dominate (`mapper.bounds.live_structures`).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from costmodels.trainium.bounds import TILE_PARAMS
from costmodels.trainium.repeats import repeated_structures
from costmodels.trainium.target import TrainiumTarget
from mapper.bounds import RTOL, dominated_rows, live_structures
from mapper.search import tune
from mapper.settings import SearchSettings
from tests.costmodels.trainium.tile_structures import (
    every_tile_target,
    random_problem,
    structure_choices,
    structure_codes,
)
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

OBJECTIVES = ("latency", "offchip_bytes", "energy", "footprint")
#: the objectives whose cells are the core splits alone (`structure_cell_of_points` places points in them)
SPLIT_OBJECTIVES = ("latency", "offchip_bytes", "energy")


def _structure_points(t: TrainiumTarget, p: Problem, flat: int) -> np.ndarray:
    """(latency s, off-chip bytes) of every feasible point of one structure (by its C-order number)."""
    s = t.score_codes(p, structure_codes(t.space(p), flat))
    both = np.stack([np.asarray(s.objectives[o], dtype=np.float64) for o in OBJECTIVES], axis=1)
    return both[np.asarray(s.feasible)]


def _fixed(t: TrainiumTarget, p: Problem, flat: int) -> dict[str, object]:
    return dict(structure_choices(t.space(p), flat))


#: parts with a small SBUF (and few PSUM banks), where the capacities bind on small problems
SMALL_PARTS: list[dict[str, object]] = [
    {"sbuf_partition_bytes": 4096},
    {"sbuf_partition_bytes": 16384, "psum_banks": 2},
]
PARTS = [{}, *SMALL_PARTS]


@pytest.mark.parametrize("seed", range(9))
def test_every_feasible_point_is_no_better_than_one_of_its_structures_cells(seed: int) -> None:
    rng = random.Random(seed)  # each problem on one part, the parts in turn
    p, t = random_problem(rng), every_tile_target(rng.choice(["trn1", "trn2"]), **PARTS[seed % len(PARTS)])
    total = int(np.prod([len(q.choices) for q in t.space(p).params[:4]]))
    checked = 0
    for flat in sorted({rng.randrange(total) for _ in range(12)}):
        cells = t.structure_front_cells(p, _fixed(t, p, flat), OBJECTIVES)
        assert cells is not None and cells.shape[1] == len(OBJECTIVES)
        points = _structure_points(t, p, flat)
        # each point has a cell no worse on every objective (the cells are admissible); points that share a
        # value vector share the answer, so each distinct vector is tested once (tens of thousands of points
        # hold a few thousand distinct vectors here)
        distinct = np.unique(points, axis=0)
        covered = np.all(cells[None, :, :] <= distinct[:, None, :] * (1 + RTOL), axis=2).any(axis=1)
        assert covered.all(), (p.label, t.name, flat, distinct[~covered][:3])
        checked += len(points)
        if len(points):  # not vacuous: a cell is within 2x of the structure's least latency
            assert np.isfinite(cells[:, 0]).any() and cells[:, 0].min() * 2 >= points[:, 0].min()
    assert checked > 0


@pytest.mark.parametrize("seed", range(6))
def test_every_feasible_point_is_no_better_than_its_own_cell(seed: int) -> None:
    """`structure_cell_of_points` names the cell (core split) whose vector bounds each point: live-cell scoring
    leaves out the points of dominated cells on that word (without footprint: its cells are finer)."""
    rng = random.Random(100 + seed)  # each problem on one part, the parts in turn
    p, t = random_problem(rng), every_tile_target(rng.choice(["trn1", "trn2"]), **PARTS[seed % len(PARTS)])
    space = t.space(p)
    total = int(np.prod([len(q.choices) for q in space.params[:4]]))
    checked, cells_hit = 0, set()
    for flat in sorted({rng.randrange(total) for _ in range(12)}):
        fixed = _fixed(t, p, flat)
        codes = structure_codes(space, flat)
        # footprint's cells are a split's loop-order cases, which the code columns do not tell apart
        assert t.structure_cell_of_points(p, fixed, codes, OBJECTIVES) is None
        cells = t.structure_front_cells(p, fixed, SPLIT_OBJECTIVES)
        at = t.structure_cell_of_points(p, fixed, codes, SPLIT_OBJECTIVES)
        assert cells is not None and at is not None and at.shape == (len(codes["cores"]),)
        s = t.score_codes(p, codes)
        feas = np.asarray(s.feasible)
        pts = np.stack([np.asarray(s.objectives[o], dtype=np.float64) for o in SPLIT_OBJECTIVES], axis=1)[feas]
        own = cells[at[feas]]
        assert (own <= pts * (1 + RTOL)).all(), (p.label, t.name, flat)
        checked += len(pts)
        cells_hit |= {(flat, int(c)) for c in at[feas]}
    assert checked > 0 and len(cells_hit) > 12  # points of several cells per structure, not one


def test_the_cells_of_every_structure_are_the_cells_of_each_alone() -> None:
    """Without footprint, `structure_front_cell_blocks` gives each structure its own cells; with it, the blocks
    keep one cell per core split (the pass's rows: the loop-order cases are the visits'), still a floor of
    every point of the structure."""
    p = einsum("mk,kn->mn", {"m": 70, "k": 130, "n": 90}, dtype="bf16", weight=1)
    t = every_tile_target("trn2")
    names = TILE_PARAMS
    total = int(np.prod([len(q.choices) for q in t.space(p).params[:4]]))
    for objectives in (SPLIT_OBJECTIVES, OBJECTIVES):
        rows: dict[int, list[np.ndarray]] = {}
        blocks = t.structure_front_cell_blocks(p, names, objectives)
        assert blocks is not None
        for first, block in blocks:
            for i in range(len(block)):
                rows.setdefault(first + i, []).append(block[i])
        assert sorted(rows) == list(range(total))
        for flat in random.Random(1).sample(range(total), 20):
            together = np.array(rows[flat])
            if objectives == SPLIT_OBJECTIVES:
                alone = t.structure_front_cells(p, _fixed(t, p, flat), objectives)
                assert alone is not None
                key = lambda a: sorted(map(tuple, a[np.isfinite(a[:, 0])].tolist()))  # noqa: E731
                assert key(together) == key(alone)
            else:
                points = _structure_points(t, p, flat)
                covered = np.all(together[None, :, :] <= points[:, None, :] * (1 + RTOL), axis=2).any(axis=1)
                assert covered.all() and len(together) < len(t.structure_front_cells(p, _fixed(t, p, flat), objectives))
    # objectives without cells, or another split of the parameters: no cells
    assert t.structure_front_cell_blocks(p, names, ("latency", "macs")) is None
    assert t.structure_front_cell_blocks(p, names[::-1], OBJECTIVES) is None
    assert t.structure_front_cells(p, _fixed(t, p, 0), ("macs",)) is None


@pytest.mark.parametrize("seed", range(3))
def test_a_front_given_to_the_blocks_leaves_the_same_structures_live(seed: int) -> None:
    """With a front, `cell_blocks` bounds each (tile_stat, tile_mov) over every tile_k first and prices tile by
    tile only the tile_stat choices a group of which the front leaves open: the live structures are the same."""
    from mapper.pareto import pareto_front

    rng = random.Random(200 + seed)
    p, t = random_problem(rng), every_tile_target(rng.choice(["trn1", "trn2"]))
    objectives = OBJECTIVES[: rng.choice([2, 3])]
    total = int(np.prod([len(q.choices) for q in t.space(p).params[:4]]))
    every = t.structure_front_cell_blocks(p, TILE_PARAMS, objectives)
    assert every is not None
    rows = np.concatenate([block for _, block in every])
    sample = rows[np.isfinite(rows[:, 0])][:: max(1, len(rows) // 50)] * 1.02  # a front above some cells
    front = sample[pareto_front(sample)]
    plain = live_structures(t.structure_front_cell_blocks(p, TILE_PARAMS, objectives), total, front)
    blocks = t.structure_front_cell_blocks(p, TILE_PARAMS, objectives, front)
    assert blocks is not None
    runs = list(blocks)
    given = live_structures(iter(runs), total, front)
    assert plain is not None and given is not None
    # (the structures that repeat another point for point are left out: `test_trainium_repeats`)
    repeats = repeated_structures(p, {q.name: q.choices for q in t.space(p).params[:4]}).reshape(-1)
    assert np.array_equal(plain & ~repeats, given) and 0 < plain.sum() < total
    assert sum(len(r) for _, r in runs) < len(rows)  # rows of dominated groups left out


@pytest.mark.parametrize("objectives", [OBJECTIVES[:2], OBJECTIVES[:3]])
def test_a_pass_whose_front_dominates_every_cell_can_stop_between_splits(objectives: tuple[str, ...]) -> None:
    """Every group dominated, no row is open: each split still yields a block (empty), so the pass asks whether to
    stop after each (a trn1 8191x3x65537 fp8 GEMM with three objectives once ran 16 s past a 1 s budget in one
    pass whose blocks came only at its end)."""
    t = every_tile_target("trn1")
    p = einsum("mk,kn->mn", {"m": 61, "k": 3, "n": 127}, dtype="bf16", weight=1)
    total = int(np.prod([len(q.choices) for q in t.space(p).params[:4]]))
    front = np.zeros((1, len(objectives)))  # (dominates every row)
    runs = list(t.structure_front_cell_blocks(p, TILE_PARAMS, objectives, front) or [])
    assert len(runs) >= 2 and all(len(rows) == 0 for _, rows in runs)
    asked: list[int] = []
    cut = live_structures(iter(runs), total, front, stop=lambda: asked.append(1) is None and len(asked) > 1)
    assert cut is None and len(asked) == 2  # stopped at the second block: the pass is abandoned
    whole = live_structures(iter(runs), total, front, stop=lambda: False)
    assert whole is not None and not whole.any()


@pytest.mark.parametrize(
    ("preset", "problem"),
    [
        ("trn1", einsum("mk,kn->mn", {"m": 6, "k": 5, "n": 7}, dtype="bf16", weight=1)),
        ("trn2", conv2d(batch=1, in_channels=2, out_channels=3, input_height=4, input_width=4, kernel=3)),
    ],
)
@pytest.mark.parametrize(
    "objectives",
    [("latency", "offchip_bytes"), ("latency", "energy"), ("latency", "footprint"), ("energy", "footprint"),
     ("offchip_bytes", "footprint")],
)  # fmt: skip
def test_two_objective_bestfirst_returns_the_enumerations_exact_front(
    preset: str, problem: Problem, objectives: tuple[str, str]
) -> None:
    """With latency or without it (then the structures go in latency-bound order until the first pass, which
    comes after a few of them): the exact front, every structure scored or left out once."""
    t = every_tile_target(preset)
    settings = dict(objectives=objectives, max_seconds=600)
    exact = tune(problem, t, SearchSettings(strategy="exhaustive", **settings), validate=False)
    bb = tune(problem, t, SearchSettings(strategy="bestfirst", **settings), validate=False)
    values = lambda r: sorted(tuple(q.values[o] for o in objectives) for q in r.pareto)  # noqa: E731
    assert len(values(bb)) == len(values(exact))
    np.testing.assert_allclose(np.array(values(bb)), np.array(values(exact)), rtol=1e-12)
    assert len(set(values(bb))) == len(bb.pareto)  # no duplicate entries
    cert = bb.certificate
    assert cert is not None and cert.unexplored == 0 and cert.pruned_by_bound > 0
    assert cert.scored + cert.pruned_by_bound == cert.structures_total
    assert any("a pass over every structure's cells" in n for n in bb.notes)


def test_a_pass_keeps_a_structure_with_one_undominated_cell() -> None:
    front = np.array([[1.0, 10.0], [5.0, 2.0]])
    # three structures, two cells each: both dominated; one cell faster than the front at few bytes; infeasible
    blocks = [
        (0, np.array([[1.0, 11.0], [2.0, 30.0], [np.inf, np.inf]])),
        (0, np.array([[6.0, 2.0], [3.0, 9.0], [np.inf, np.inf]])),
    ]
    live = live_structures(iter(blocks), 3, front)
    assert live is not None and live.tolist() == [False, True, False]
    assert live_structures(iter(blocks), 3, front, stop=lambda: True) is None
    # every structure live after the first block: the pass ends there
    gen = iter([(0, np.array([[0.5, 1.0]])), (0, np.array([[0.0, 0.0]]))])
    assert live_structures(gen, 1, front) is not None and next(gen, None) is not None


def test_every_loop_order_fetches_one_operand_again_when_both_roles_have_several_blocks() -> None:
    """What `refetch.refetch_cases` rests on: with s and m both blocked, no order keeps both operands."""
    from costmodels.trainium.orders import ORDERS, distinct_orders
    from costmodels.trainium.scoring import order_effects

    orders = ORDERS
    assert set(distinct_orders("skm")) == set(ORDERS)  # every order the space can offer
    eff = order_effects(orders)
    for k_blocked in (0, 1):
        both = eff["m_in_stat"][:, 1, 1, k_blocked] | eff["s_in_mov"][:, 1, 1, k_blocked]
        assert both.all(), [o for o, b in zip(orders, both, strict=True) if not b]
    # with one role unblocked an order keeps both operands: the floor then has no second fetch
    assert not (eff["m_in_stat"][:, 0, 1, 0] | eff["s_in_mov"][:, 0, 1, 0]).all()


def test_a_split_no_cores_and_shard_choice_reaches_is_a_cell_without_points() -> None:
    """`bounds.reachable_splits` is `bounds.point_split` over every choice; a split it does not reach is inf."""
    from costmodels.trainium.bounds import core_splits, point_split, reachable_splits, role_tiles
    from costmodels.trainium.nest import roles_of

    p = einsum("bmk,bkn->bmn", {"b": 3, "m": 70, "k": 130, "n": 300}, dtype="bf16")
    t = every_tile_target("trn2")
    space = t.space(p)
    ch = {q.name: q.choices for q in space.params}
    st = ch["stationary"][0]
    roles = roles_of(p, str(st))
    sizes = {r: [p.axes[a] for a in roles.axes[r]] for r in "bsm"}
    reach = reachable_splits(sizes, ch)
    stat, mov = ch["tile_stat"][::7], ch["tile_mov"][::11]  # a sample of the tile choices
    for i, ts in enumerate(ch["tile_stat"]):
        if ts not in stat:
            continue
        for j, tm in enumerate(ch["tile_mov"]):
            if tm not in mov:
                continue
            got = {point_split(sizes, int(ts), int(tm), int(c), str(s)) for c in ch["cores"] for s in ch["shard"]}
            assert {k for k, v in reach.items() if v[i, j]} == got
    # the cells of one structure: finite only for the splits its points reach
    fixed = {
        "stationary": st,
        "tile_stat": ch["tile_stat"][-1],
        "tile_mov": ch["tile_mov"][-1],
        "tile_k": ch["tile_k"][0],
    }
    cells = t.structure_front_cells(p, fixed, SPLIT_OBJECTIVES)
    _, ns = role_tiles(sizes["s"], (fixed["tile_stat"],))
    _, nm = role_tiles(sizes["m"], (fixed["tile_mov"],))
    splits = core_splits(max(ch["cores"]), 3, int(ns[0]), int(nm[0]))
    reached = {point_split(sizes, int(fixed["tile_stat"]), int(fixed["tile_mov"]), int(c), str(s))
               for c in ch["cores"] for s in ch["shard"]}  # fmt: skip
    assert cells is not None and len(cells) == len(splits) > len(reached)
    for split, row in zip(splits, cells, strict=True):
        assert np.isfinite(row[0]) == (split in reached), split
    # with footprint, each split's cells are its loop-order cases (`refetch.footprint_cases`), split by split
    cases = t.structure_front_cells(p, fixed, OBJECTIVES)
    per = len(cases) // len(splits)
    assert per > 1 and per * len(splits) == len(cases)
    for at, split in enumerate(splits):
        assert np.isfinite(cases[at * per : (at + 1) * per, 0]).any() == (split in reached), split


@pytest.mark.parametrize("seed", range(3))
def test_cells_read_from_a_groups_cells_are_the_structures_own(seed: int) -> None:
    """`front_cells.CellMemo`: a structure's rows taken from its (stationary, tile_stat) group's arrays are the
    rows of the structure priced alone, value for value; a memo too small for a group still answers, and one
    that prices a group after some asks answers alone until then."""
    from costmodels.trainium.front_cells import CellMemo, structure_cells

    rng = random.Random(300 + seed)
    p, t = random_problem(rng), every_tile_target(rng.choice(["trn1", "trn2"]), **PARTS[seed % len(PARTS)])
    space = t.space(p)
    consts = t._run_consts(p)  # the target's own consts, as `structure_front_cells` passes them
    total = int(np.prod([len(q.choices) for q in space.params[:4]]))
    memo, tiny, later = CellMemo(after=0), CellMemo(limit_bytes=1, after=0), CellMemo(after=2)
    for flat in sorted({rng.randrange(total) for _ in range(15)}):
        fixed = _fixed(t, p, flat)
        alone = structure_cells(p, t.hardware, space, consts, fixed, OBJECTIVES)
        assert alone is not None
        for m in (memo, tiny, later):
            got = structure_cells(p, t.hardware, space, consts, fixed, OBJECTIVES, m)
            assert got is not None and np.array_equal(got, alone), (p.label, flat)


def test_footprint_cells_do_not_put_the_fastest_loop_order_beside_the_smallest_footprint() -> None:
    """A decode-like GEMM: the fastest mapping of a structure keeps every output tile of a core open across
    the k blocks (a large footprint), the smallest re-reads the moving operand per stationary block (slower).
    With footprint each core split is cut into its loop-order and block cases (`refetch.footprint_cases`),
    so no cell claims the least latency beside the least footprint, and the structure's own front is
    bounded cell by cell (hardware-facts.md §2.2 step 5: the refetches; `cost.accumulation`: the footprint)."""
    p = einsum("bk,kn->bn", {"b": 1, "k": 2048, "n": 4096}, dtype="bf16", weight=1)
    t = every_tile_target("trn1")
    space = t.space(p)
    ch = {q.name: q.choices for q in space.params}
    fixed = {"stationary": "weight", **{n: max(ch[n]) for n in ("tile_stat", "tile_mov", "tile_k")}}
    flat = int(np.ravel_multi_index([ch[n].index(fixed[n]) for n in TILE_PARAMS], [len(ch[n]) for n in TILE_PARAMS]))
    s = t.score_codes(p, structure_codes(space, flat))
    feas = np.asarray(s.feasible)
    points = np.stack([np.asarray(s.objectives[o], dtype=np.float64)[feas] for o in ("latency", "footprint")], axis=1)
    fastest, smallest = points[:, 0].min(), points[:, 1].min()
    assert points[points[:, 0].argmin(), 1] > smallest  # the trade-off exists in this structure
    cells = t.structure_front_cells(p, fixed, ("latency", "footprint"))
    assert cells is not None
    assert not ((cells[:, 0] <= fastest * (1 + RTOL)) & (cells[:, 1] <= smallest * (1 + RTOL))).any()
    covered = np.all(cells[None, :, :] <= points[:, None, :] * (1 + RTOL), axis=2).any(axis=1)
    assert covered.all()


def test_with_footprint_a_front_given_to_the_blocks_leaves_out_only_structures_whose_points_it_dominates() -> None:
    """With footprint, `cell_blocks` bounds its (tile_stat, tile_mov) groups by the loop-order cases: on a
    decode-shaped GEMM it leaves live fewer structures than the plain pass and none the plain pass leaves
    out, and every point of a structure it leaves out besides is dominated by (or equal to) a front point."""
    from mapper.pareto import pareto_front

    p = einsum("bk,kn->bn", {"b": 1, "k": 2048, "n": 4096}, dtype="bf16", weight=1)
    t = every_tile_target("trn1")
    objectives = ("latency", "footprint")
    total = int(np.prod([len(q.choices) for q in t.space(p).params[:4]]))
    scored = []
    for flat in random.Random(0).sample(range(total), 60):  # a front of real points
        s = t.score_codes(p, structure_codes(t.space(p), flat))
        feas = np.asarray(s.feasible)
        scored.append(np.stack([np.asarray(s.objectives[o], dtype=np.float64)[feas] for o in objectives], axis=1))
    points = np.concatenate(scored)
    front = points[pareto_front(points)]
    plain = live_structures(t.structure_front_cell_blocks(p, TILE_PARAMS, objectives), total, front)
    given = live_structures(t.structure_front_cell_blocks(p, TILE_PARAMS, objectives, front), total, front)
    assert plain is not None and given is not None
    assert not (given & ~plain).any() and given.sum() < plain.sum()
    out = plain & ~given & ~repeated_structures(p, {q.name: q.choices for q in t.space(p).params[:4]}).reshape(-1)
    for flat in np.flatnonzero(out)[:: max(1, int(out.sum()) // 8)][:8].tolist():
        s = t.score_codes(p, structure_codes(t.space(p), flat))
        feas = np.asarray(s.feasible)
        pts = np.stack([np.asarray(s.objectives[o], dtype=np.float64)[feas] for o in objectives], axis=1)
        assert dominated_rows(pts, front).all(), flat


def test_with_footprint_a_later_pass_prices_the_live_structures_case_by_case() -> None:
    """Given the structures still live (`live`), `cell_blocks` prices them by their loop-order and block-size
    cases (`front_cells._live_cases`): a structure comes out live exactly when one of its own cells
    (`structure_front_cells`, a split's cases) is not dominated by the front, which leaves out structures the
    pass without `live` kept; a structure outside `live` comes out not live (its outcome is not asked)."""
    from mapper.pareto import pareto_front

    p = einsum("bk,kn->bn", {"b": 1, "k": 2048, "n": 4096}, dtype="bf16", weight=1)
    t = every_tile_target("trn1")
    objectives = ("latency", "footprint")
    params = t.space(p).params[:4]
    total = int(np.prod([len(q.choices) for q in params]))
    scored = []
    for flat in random.Random(1).sample(range(total), 60):
        s = t.score_codes(p, structure_codes(t.space(p), flat))
        feas = np.asarray(s.feasible)
        scored.append(np.stack([np.asarray(s.objectives[o], dtype=np.float64)[feas] for o in objectives], axis=1))
    points = np.concatenate(scored)
    front = points[pareto_front(points)]
    given = live_structures(t.structure_front_cell_blocks(p, TILE_PARAMS, objectives, front), total, front)
    assert given is not None
    rng = np.random.default_rng(0)
    asked = np.zeros(total, dtype=bool)
    asked[rng.choice(np.flatnonzero(given), size=min(300, int(given.sum())), replace=False)] = True
    asked[rng.choice(total, size=100, replace=False)] = True  # some the earlier pass left out too
    again = live_structures(t.structure_front_cell_blocks(p, TILE_PARAMS, objectives, front, asked), total, front)
    assert again is not None and not (again & ~asked).any()
    repeats = repeated_structures(p, {q.name: q.choices for q in params}).reshape(-1)
    for flat in np.flatnonzero(asked).tolist():
        codes = np.unravel_index(flat, [len(q.choices) for q in params])
        fixed = {q.name: q.choices[int(c)] for q, c in zip(params, codes, strict=True)}
        cells = t.structure_front_cells(p, fixed, objectives)
        assert cells is not None
        assert again[flat] == (not repeats[flat] and not dominated_rows(cells, front).all()), fixed
    assert (asked & given & ~again).any()  # the cases leave out structures the pass without them kept
