"""The Trainium space of every tile count (rule T1) searched with a proof (issue #12).

- `bounds.tile_bounds` is admissible: on random small problems every structure (stationary input
  and the three tiles fixed) has no feasible point below its bound, checked by pricing the whole
  space;
- `subgrid.SubgridScorer` (the scorer of spaces too large to price whole) gives the whole grid's values;
- best-first over the tile structures finds the enumeration's optimum, proven;
- the space of every tile count is never worse than the ladder offered before (`space.LADDER`).
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from costmodels.registry import get_target
from costmodels.trainium import bounds as tile_bound_module
from costmodels.trainium.bounds import FLOAT_MARGIN, TILE_PARAMS, core_splits, split_cells, tile_bounds
from costmodels.trainium.scoring import GridScorer, price_grid
from costmodels.trainium.space import LADDER, build_space, problem_consts
from costmodels.trainium.subgrid import STRUCTURAL, SubgridScorer
from costmodels.trainium.target import TrainiumTarget
from mapper.bounds import RTOL
from mapper.search import tune
from mapper.settings import SearchSettings
from tests.costmodels.trainium.tile_structures import every_tile_target, structure_codes
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem


def _random_problem(rng: random.Random) -> Problem:
    kind = rng.choice(["gemm", "bgemm", "fp32", "conv", "fp8"])
    m, k, n = rng.randint(1, 300), rng.randint(1, 300), rng.randint(1, 700)
    if kind == "bgemm":
        return einsum("bmk,bkn->bmn", {"b": rng.randint(2, 3), "m": m, "k": k, "n": n}, dtype="bf16")
    if kind == "conv":
        side, kernel = rng.randint(3, 12), rng.choice([1, 3])
        return conv2d(batch=1, in_channels=rng.randint(8, 40), out_channels=rng.randint(4, 70),
                      input_height=side + 2, input_width=side, kernel=kernel)  # fmt: skip
    dtype = {"fp32": "f32", "fp8": "f8e4m3"}.get(kind, "bf16")
    return einsum("mk,kn->mn", {"m": m, "k": k, "n": n}, dtype=dtype, weight=1)


def _structure_minimum(t: TrainiumTarget, p: Problem, flat: int) -> float:
    """The best feasible latency (s) of one structure (by its number in C order), its whole sub-space scored."""
    score = t.score_codes(p, structure_codes(t.space(p), flat))
    lat = np.where(score.feasible, np.asarray(score.objectives["latency"], dtype=np.float64), np.inf)
    return float(lat.min())


def _sample(t: TrainiumTarget, p: Problem, rng: random.Random) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(structure numbers, bounds, exact minima): the 15 lowest bounds and 25 random structures."""
    bound = t.structure_bounds(p, TILE_PARAMS).reshape(-1)
    low = np.argsort(bound, kind="stable")[:15].tolist()
    picks = sorted(set(low) | {rng.randrange(bound.size) for _ in range(25)})
    best = np.array([_structure_minimum(t, p, i) for i in picks])
    return np.asarray(picks), bound[picks], best


@pytest.mark.parametrize("seed", range(12))
def test_tile_bounds_are_admissible_on_random_problems(seed: int) -> None:
    rng = random.Random(seed)
    p = _random_problem(rng)
    t = every_tile_target(rng.choice(["trn1", "trn2"]))
    _, bound, best = _sample(t, p, rng)
    feasible = np.isfinite(best)
    assert feasible.any()
    assert np.all(bound[feasible] <= best[feasible] * (1 + RTOL)), (p.label, t.name)
    # not vacuous: the bound is within 2x of the structure's best on most structures
    assert np.median(best[feasible] / bound[feasible]) < 2.0


def test_tile_bounds_are_tight_on_a_compute_bound_gemm() -> None:
    # 512^3 bf16 on trn1: the lowest-bound structure's best is its bound up to the fill and DMA tail
    p = einsum("mk,kn->mn", {"m": 512, "k": 512, "n": 512}, dtype="bf16", weight=1)
    t = every_tile_target("trn1")
    _, bound, best = _sample(t, p, random.Random(0))
    i = int(np.argmin(bound))
    assert bound[i] <= best[i] <= bound[i] * 1.10


@pytest.mark.parametrize(
    ("preset", "problem"),
    [
        ("trn2", einsum("bmk,bkn->bmn", {"b": 3, "m": 97, "k": 300, "n": 1000}, dtype="f8e4m3")),
        ("trn1", einsum("mk,kn->mn", {"m": 4099, "k": 131, "n": 700}, dtype="bf16", weight=1)),
        ("trn2", conv2d(batch=2, in_channels=40, out_channels=70, input_height=14, input_width=13, kernel=3)),
    ],
)
def test_tile_bounds_a_few_rows_at_a_time_are_the_whole_grids_table(
    preset: str, problem: Problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `tile_bounds` prices `TILE_BOUND_ROWS` tile_stat choices at a time and skips the core splits no (cores, shard)
    # choice gives with them: the table must be the least over every split of the whole grid, entry for entry
    t = every_tile_target(preset)
    space = t.space(problem)
    consts = lambda r: problem_consts(problem, t.hardware, r, supported=True)  # noqa: E731
    choices = {q.name: q.choices for q in space.params}
    assert len(choices["tile_stat"]) > 8  # several row blocks, the last one short
    whole = np.full(tuple(len(choices[n]) for n in TILE_PARAMS), np.inf)
    skipped = 0
    for at, _, latency, _ in split_cells(problem, t.hardware, choices, consts, offchip=False):
        np.minimum(whole[at], latency, out=whole[at])
        skipped += bool(np.isinf(latency).all())
    whole *= 1 - FLOAT_MARGIN
    assert np.isfinite(whole).any()
    for rows in (1, 3, 8, 10_000):
        monkeypatch.setattr(tile_bound_module, "TILE_BOUND_ROWS", rows)
        got = tile_bounds(problem, t.hardware, space, consts)
        assert np.array_equal(got, whole), rows
    # the splits left out give no point with any tiles; a row block gets fewer splits than the whole grid
    reachable = list(split_cells(problem, t.hardware, choices, consts, offchip=False, reachable=True))
    every = list(split_cells(problem, t.hardware, choices, consts, offchip=False))
    assert len(reachable) == len(every) - skipped
    assert {s for _, s, _, _ in reachable} <= {s for _, s, _, _ in every}


def test_core_splits_cover_every_split_within_the_cores() -> None:
    splits = core_splits(8, batch=3, most_s=4, most_m=100)
    assert (1, 1, 1) in splits and (1, 4, 2) in splits and (2, 1, 4) in splits and (1, 1, 8) in splits
    assert (1, 8, 1) not in splits  # s has only 4 tiles: no more than 4 cores on it
    assert all(cb * cs * cm <= 8 and cb <= 3 and cs <= 4 for cb, cs, cm in splits)
    assert len(set(splits)) == len(splits)


def test_structure_bounds_reduce_and_broadcast_over_names() -> None:
    p = einsum("mk,kn->mn", {"m": 200, "k": 300, "n": 150}, dtype="bf16", weight=1)
    t = every_tile_target("trn2")
    ch = {q.name: q.choices for q in t.space(p).params}
    full = t.structure_bounds(p, TILE_PARAMS)
    sub = t.structure_bounds(p, ("cores", "tile_k"))
    assert sub.shape == (len(ch["cores"]), len(ch["tile_k"]))
    assert np.array_equal(sub[0], full.min(axis=(0, 1, 2)))
    assert np.array_equal(sub[-1], sub[0])  # the bound does not use the cores: the same along them
    k = ch["tile_k"][1]
    assert t.structure_bound(p, {"tile_k": k, "order": ch["order"][0]}) >= float(full[:, :, :, 1].min())
    with pytest.raises(ValueError, match="no parameter"):
        t.structure_bounds(p, ("tile_q",))
    with pytest.raises(ValueError, match="no parameter"):
        t.structure_bound(p, {"tile_q": 1})


@pytest.mark.parametrize("seed", range(4))
def test_subgrid_scorer_gives_the_whole_grids_values(seed: int) -> None:
    rng = random.Random(100 + seed)
    p = _random_problem(rng)
    t = every_tile_target(rng.choice(["trn1", "trn2"]))
    space = t.space(p)
    if space.size > 3_000_000:
        pytest.skip("space too large to price whole in a test")
    consts = lambda r: problem_consts(p, t.hardware, r, supported=True)  # noqa: E731
    grid = price_grid(p, t.hardware, space, consts)
    nrng = np.random.default_rng(seed)
    codes = {q.name: nrng.integers(0, len(q.choices), size=3000) for q in space.params}
    whole = GridScorer(grid)(codes)
    sub = SubgridScorer(p, t.hardware, space, consts)
    for limit in (None, 1):  # one product sub-grid, and grouped by structure (`STRUCTURAL`)
        if limit is not None:
            import costmodels.trainium.subgrid as sg

            old, sg.SUBGRID_LIMIT = sg.SUBGRID_LIMIT, limit
        try:
            got = sub(codes)
        finally:
            if limit is not None:
                sg.SUBGRID_LIMIT = old
        assert np.array_equal(got.feasible, whole.feasible)
        for o in ("latency", "offchip_bytes", "footprint", "energy"):
            assert np.array_equal(got.objectives[o], whole.objectives[o]), o
    assert STRUCTURAL == TILE_PARAMS


def test_structures_alike_but_for_tile_mov_are_priced_as_one_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scattered structures (two tile groups, three tile_mov each, one with half its points) too many for one
    product: each group that uses the same other choices is one product over its tile_mov choices."""
    import costmodels.trainium.subgrid as sg

    p = PROBLEMS[0]
    t = every_tile_target("trn1")
    space = t.space(p)
    consts = lambda r: problem_consts(p, t.hardware, r, supported=True)  # noqa: E731
    dims = [len(q.choices) for q in space.params[:4]]
    parts = []
    for stat, mov in itertools.product((1, 2), (0, 3, 5)):
        codes = structure_codes(space, int(np.ravel_multi_index((0, stat, mov, 1), dims)))
        if (stat, mov) == (2, 5):  # other (cores, shard) choices than its group's: its own product
            keep = codes["cores"] == 0
            codes = {k: v[keep] for k, v in codes.items()}
        parts.append(codes)
    codes = {k: np.concatenate([c[k] for c in parts]) for k in parts[0]}
    per_structure = len(parts[0]["cores"])
    monkeypatch.setattr(sg, "SUBGRID_LIMIT", 3 * per_structure)  # a group fits, both do not
    calls: list[int] = []
    real = sg.SubgridScorer._product

    def counted(self: object, part: dict[str, np.ndarray], used: dict[str, np.ndarray]) -> object:
        calls.append(len(part["cores"]))
        return real(self, part, used)  # type: ignore[arg-type]

    monkeypatch.setattr(sg.SubgridScorer, "_product", counted)
    got = SubgridScorer(p, t.hardware, space, consts)(codes)
    assert sorted(calls) == sorted([3 * per_structure, 2 * per_structure, len(parts[-1]["cores"])])
    whole = GridScorer(price_grid(p, t.hardware, space, consts))(codes)
    assert np.array_equal(got.feasible, whole.feasible)
    for o in ("latency", "offchip_bytes", "footprint", "energy"):
        assert np.array_equal(got.objectives[o], whole.objectives[o]), o


#: small enough to enumerate every tile count (0.4-2.0 M points; every tile count makes even these spaces large)
PROBLEMS = [
    einsum("mk,kn->mn", {"m": 6, "k": 5, "n": 7}, dtype="bf16", weight=1),
    einsum("bmk,bkn->bmn", {"b": 2, "m": 4, "k": 6, "n": 5}, dtype="bf16"),
    conv2d(batch=1, in_channels=2, out_channels=3, input_height=4, input_width=4, kernel=3),
    einsum("mk,kn->mn", {"m": 1, "k": 7, "n": 6}, dtype="f32", weight=1),
]
CASES = [("trn1", i) for i in range(4)] + [("trn2", 2), ("trn2", 3)]


@pytest.mark.parametrize(("preset", "index"), CASES)
def test_bestfirst_on_the_full_space_proves_the_enumerations_optimum(preset: str, index: int) -> None:
    p, t = PROBLEMS[index], every_tile_target(preset)
    exact = tune(p, t, SearchSettings(strategy="exhaustive", max_seconds=600), validate=False)
    bb = tune(p, t, SearchSettings(strategy="bestfirst", max_seconds=600), validate=False)
    assert exact.cost is not None and bb.cost is not None
    assert bb.cost.seconds == pytest.approx(exact.cost.seconds, rel=1e-12)
    cert = bb.certificate
    assert cert is not None and cert.unexplored == 0 and cert.gap_bound == 0.0
    assert cert.structures_total == math.prod(len(q.choices) for q in t.space(p).params[:4])
    assert cert.scored + cert.pruned_by_bound == cert.structures_total
    assert cert.scored < cert.structures_total  # the bound pruned something


def _ladder_best(t: TrainiumTarget, p: Problem) -> float:
    space = build_space(p, t.hardware, tiles=LADDER)
    grid = price_grid(p, t.hardware, space, lambda r: problem_consts(p, t.hardware, r, supported=True))
    return float(grid.latency.min())


@pytest.mark.parametrize(
    ("preset", "problem"),
    [
        ("trn1", einsum("mk,kn->mn", {"m": 4095, "k": 4095, "n": 4095}, dtype="bf16", weight=1)),
        ("trn2", einsum("mk,kn->mn", {"m": 1000, "k": 3001, "n": 777}, dtype="bf16", weight=1)),
        ("trn2", conv2d(batch=1, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3)),
    ],
)
def test_every_tile_count_is_never_worse_than_the_ladder(preset: str, problem: Problem) -> None:
    t = every_tile_target(preset)
    old = _ladder_best(t, problem)
    r = tune(problem, t, SearchSettings(max_seconds=120), validate=False)
    assert r.cost is not None and r.certificate is not None and r.certificate.unexplored == 0
    assert r.cost.seconds <= old * (1 + 1e-12)


def test_a_problem_trainium_cannot_run_gets_no_bulk_structures() -> None:
    from mapper.strategies.bestfirst import bulk_params

    t = every_tile_target("trn2")
    p = einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 8}, dtype="i8", weight=1)
    assert t.supports(p)
    assert bulk_params(p, t, t.space(p)) is None
    assert tile_bounds is not None


def test_the_tile_space_is_chosen_per_request() -> None:
    """``tile_space`` (an override): every tile count by default, the ladder on request; a bad value is refused."""
    from workload.errors import ProblemError

    p = einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, dtype="bf16", weight=1)
    ladder, every = get_target("trn2", {"tile_space": "ladder"}), get_target("trn2")
    assert ladder.hardware.tile_space == "ladder" and every.hardware.tile_space == "every"
    assert ladder.space(p).size == build_space(p, every.hardware, tiles=LADDER).size < every.space(p).size
    a = tune(p, ladder, SearchSettings(), validate=False)
    b = tune(p, every, SearchSettings(), validate=False)
    assert a.proven_optimal and b.proven_optimal and b.certificate is not None
    la, lb = a.best_value("latency"), b.best_value("latency")
    assert la is not None and lb is not None and lb <= la
    with pytest.raises(ProblemError, match="tile_space"):
        get_target("trn2", {"tile_space": "all"})
