"""Floors of several objectives per Ascend cube structure (ascend/floors.py, `cube_structure_front_floors`).

Admissible: no feasible point of a structure beats its row on any objective (each structure's box of
points priced by the model itself, `cost.cube_scores`). Useful: most rows are above the whole
problem's floors, which is what lets a search with several objectives leave structures out unscored.
"""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest

from costmodels.ascend import cost as cc
from costmodels.ascend.bounds import box
from costmodels.ascend.cube_tables import CUBE_ORDER
from costmodels.ascend.floors import FRONT_FLOORED, cube_structure_floors, cube_structure_front_floors
from costmodels.ascend.target import CELL_NAMES, cell_names
from costmodels.param_tables import grid_fields
from costmodels.registry import get_target
from mapper.enumerate import subspace_codes
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import split_params
from tests.costmodels.space_scan import sample_product
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

OBJECTIVES = ("latency", "offchip_bytes", "energy", "footprint")


def _problems(seed: int) -> list[Problem]:
    rng = random.Random(seed)
    out: list[Problem] = [
        # inputs beyond L2 (192 MiB on the A2/A3 parts): off-chip bytes then depend on the grid and the blocks
        einsum("mk,kn->mn", {"m": 65537, "k": 2048, "n": 300}, dtype="bf16", weight=1),
        conv2d(batch=2, in_channels=17, out_channels=40, input_height=14, input_width=14, kernel=3, padding=1),
    ]
    for _ in range(5):
        sizes = {a: rng.randint(1, 700) for a in "mkn"}
        if rng.random() < 0.3:
            out.append(einsum("bmk,bkn->bmn", {**sizes, "b": rng.randint(2, 5)}, dtype="f16", weight=1))
        else:
            out.append(einsum("mk,kn->mn", sizes, dtype=rng.choice(["f16", "bf16", "i8", "f32"]), weight=1))
    return out


@pytest.mark.parametrize("preset", ["ascend-910b", "ascend-a5"])
def test_no_feasible_point_of_a_structure_beats_its_floors(preset: str) -> None:
    t = get_target(preset)
    rng = random.Random(7)
    checked = above = empty = 0
    for p in _problems(seed=len(preset)):
        prep = t.prepared(p)
        space = prep.space
        names = [q.name for q in space.params]
        subsets = [tuple(q.name for q in split_params(space, inner)[0]) for inner in (256, 4096)]
        subsets += [tuple(n for n in names if rng.random() < 0.5) for _ in range(2)]
        subsets += [("core_grid", "double_buffer"), ()]
        for fixed_names in subsets:
            table = cube_structure_front_floors(prep, fixed_names, OBJECTIVES)
            choices = [space.params[names.index(n)].choices for n in fixed_names]
            sizes = [len(c) for c in choices]
            assert table.shape == (int(np.prod(sizes)), len(OBJECTIVES))
            # the latency column is the floors best-first orders by
            assert np.array_equal(table[:, 0], cube_structure_floors(prep, fixed_names).reshape(-1))
            whole = table.min(axis=0)
            for combo in sample_product(rng, sizes, 12):
                fixed = {n: c[i] for n, c, i in zip(fixed_names, choices, combo, strict=True)}
                lo, hi = box(prep, fixed)
                res = cc.cube_scores(prep.consts, grid_fields(prep.tables, lo, hi, CUBE_ORDER), energy=prep.energy)
                row = table[int(np.ravel_multi_index(combo, sizes)) if sizes else 0]
                if not res["ok"].any():  # no feasible point: every floor says so (`floors._feasible`)
                    assert np.isinf(row).all(), (p.label, fixed, row)
                    empty += 1
                    continue
                best = np.array([np.min(res[o][res["ok"]]) for o in OBJECTIVES])
                assert (best >= row * (1 - 1e-12)).all(), (
                    p.label,
                    fixed,
                    dict(zip(OBJECTIVES, row, strict=True)),
                    best,
                )
                assert np.isfinite(row).all()
                checked += 1
                above += bool((row[2:] > whole[2:] * (1 + 1e-9)).any())
    assert checked > 100 and empty > 10
    assert above > checked // 4  # energy or footprint floors that differ between structures


def test_a_structure_whose_chunks_fit_l1_only_apart_has_no_floor() -> None:
    """L1 must hold both chunks at once (`cost.cube_checks`): a structure whose every point fails only that check,
    each chunk fitting alone, is infeasible, and its floors say so (inf) rather than a value no point reaches."""
    t = get_target("ascend-910b")
    p = einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, dtype="bf16", weight=1)
    prep = t.prepared(p)
    params = {q.name: q for q in prep.space.params}
    names = [n for n in params if n in ("base_k", "l1_k", "l1_m", "l1_n", "double_buffer")]
    rows = cube_structure_front_floors(prep, tuple(names), OBJECTIVES)
    found = 0
    for bk, lk, lm, ln in itertools.product(
        params["base_k"].choices, params["l1_k"].choices, params["l1_m"].choices, params["l1_n"].choices
    ):
        fixed = {"base_k": bk, "l1_k": lk, "l1_m": lm, "l1_n": ln, "double_buffer": True}
        lo, hi = box(prep, fixed)
        fields = grid_fields(prep.tables, lo, hi, CUBE_ORDER)
        res = cc.cube_scores(prep.consts, fields, energy=prep.energy)
        checks = cc.cube_checks(
            prep.consts, fields, {"acc": fields["acc_m"] * fields["acc_n"], "l1": fields["l1a"] + fields["l1b"]}
        )
        others = np.logical_and.reduce(
            [np.broadcast_to(v, res["ok"].shape) for k, v in checks.items() if k != "l1-capacity"]
        )
        h = fields["h"]
        apart = np.broadcast_to(
            (fields["l1a"] * h <= prep.consts.l1) & (fields["l1b"] * h <= prep.consts.l1), others.shape
        )
        if res["ok"].any() or not (others & apart).any():
            continue
        at = int(
            np.ravel_multi_index(
                [params[n].choices.index(fixed[n]) for n in names], [len(params[n].choices) for n in names]
            )
        )
        assert np.isinf(rows[at]).all(), fixed
        found += 1
    assert found > 0


def test_the_joint_gm_floor_lifts_the_energy_floors_where_the_chunks_bind() -> None:
    """`floors._gm_all_joint` takes each chunk's bytes with the blocks over the points that pass every check: on an
    attention-shaped batched GEMM (one K chunk) it is above the per-side floor on many cells, which is what
    lets a latency + energy front close them (admissibility: the test above, against every feasible point)."""
    from costmodels.ascend.floors import FloorGrid, _gm_all_joint, _terms

    t = get_target("ascend-910b")
    p = einsum("bmk,bkn->bmn", {"b": 32, "m": 2048, "k": 128, "n": 2048}, dtype="f16", weight=1)
    prep = t.prepared(p)
    names = tuple(q.name for q in prep.space.params if q.name in ("core_grid", *CELL_NAMES))
    g = FloorGrid(prep, names)
    joint, loose = g.laid_out(_gm_all_joint(g)).reshape(-1), g.laid_out(_terms(g)["gm_all"]).reshape(-1)
    both = np.isfinite(joint) & np.isfinite(loose)
    assert both.sum() > 1000
    assert (joint[both] > 1.2 * loose[both]).mean() > 0.1


def test_front_cells_are_the_floors_of_the_cell_parameters_left_free() -> None:
    """A structure's cells: one per combination of the `cell_names` parameters of the objectives it leaves free (the
    M and N instruction tiles and the N tiles per L1 tile; the M tiles per L1 tile with energy, double buffering with
    footprint), read from the floors of the structures with those fixed too, in the C order of their choices (the
    space's order of the parameters)."""
    t = get_target("ascend-910b")
    p = einsum("mk,kn->mn", {"m": 600, "k": 300, "n": 200}, dtype="bf16", weight=1)
    prep = t.prepared(p)
    params = {q.name: q for q in prep.space.params}
    order = list(params)
    assert set(CELL_NAMES) <= set(order)
    assert cell_names(("latency", "offchip_bytes")) == set(CELL_NAMES)
    assert cell_names(("footprint", "energy")) == {*CELL_NAMES, "double_buffer", "l1_m"}
    fixed = {"core_grid": params["core_grid"].choices[3], "double_buffer": True}
    cells = t.structure_front_cells(p, fixed, ("energy", "latency"))
    free = [n for n in order if n in cell_names(("energy",)) and n not in fixed]
    assert free == ["base_m", "base_n", "l1_m", "l1_n"]
    assert cells is not None and cells.shape == (int(np.prod([len(params[n].choices) for n in free])), 2)
    names = (*(n for n in order if n in fixed), *free)
    table = cube_structure_front_floors(prep, names, ("energy", "latency"))
    sizes = [len(params[n].choices) for n in names]
    at = [params[n].choices.index(fixed[n]) for n in names[:2]]
    first = int(np.ravel_multi_index((*at, *(0 for _ in free)), sizes))
    assert np.array_equal(cells, table[first : first + len(cells)])
    assert len(np.unique(cells, axis=0)) > 1  # the free parameters change the floors
    # a structure that fixes the M tile too has one cell per (N tile, M and N tiles per L1 tile); one fixing them all,
    # one; with off-chip bytes the M tiles per L1 tile are no cell parameter
    m0, n0 = params["base_m"].choices[0], params["base_n"].choices[-1]
    got = t.structure_front_cells(p, {**fixed, "base_m": m0}, ("energy",))
    l1 = len(params["l1_m"].choices) * len(params["l1_n"].choices)
    assert got is not None and got.shape == (len(params["base_n"].choices) * l1, 1)
    got = t.structure_front_cells(p, {**fixed, "base_m": m0}, ("offchip_bytes",))
    assert got is not None and got.shape == (len(params["base_n"].choices) * len(params["l1_n"].choices), 1)
    every = {"base_m": m0, "base_n": n0, "l1_n": params["l1_n"].choices[0], "double_buffer": False}
    one = t.structure_front_cells(p, every, ("footprint",))
    assert one is not None and one.shape == (1, 1) and one[0, 0] > 0
    free = t.structure_front_cells(p, {"core_grid": params["core_grid"].choices[3]}, ("footprint",))
    assert free is not None and free.shape == (
        len(params["base_n"].choices) * len(params["l1_n"].choices) * 2 * len(params["base_m"].choices),
        1,
    )


@pytest.mark.parametrize("preset", ["ascend-910b", "ascend-a5"])
def test_every_point_is_bounded_by_its_own_cell(preset: str) -> None:
    """`structure_cell_of_points` places each point of a structure in the cell whose row bounds it, on every
    objective (the points priced by the target itself); a point moved to another cell is caught."""
    t = get_target(preset)
    rng = random.Random(3)
    checked = tight = 0
    for p in _problems(seed=11):
        prep = t.prepared(p)
        space = prep.space
        for inner in (256, 4096):
            structural, rest = split_params(space, inner)
            names = [q.name for q in structural]
            for combo in sample_product(rng, [len(q.choices) for q in structural], 4):
                fixed = {q.name: q.choices[i] for q, i in zip(structural, combo, strict=True)}
                rows = t.structure_front_cells(p, fixed, OBJECTIVES)
                assert rows is not None
                codes = subspace_codes(
                    space, {q.name: q.choices.index(fixed[q.name]) for q in structural}, tuple(q.name for q in rest)
                )
                at = t.structure_cell_of_points(p, fixed, codes, OBJECTIVES)
                assert at is not None and at.shape == (len(codes[names[0]]),) and at.max() < len(rows)
                score = t.score_codes(p, codes)
                ok = np.asarray(score.feasible, dtype=bool)
                if not ok.any():
                    continue
                vals = np.stack([np.asarray(score.objectives[o])[ok] for o in OBJECTIVES], axis=1)
                own = rows[at[ok]]
                assert (vals >= own * (1 - 1e-12)).all(), (p.label, fixed)
                checked += 1
                # the cells are not all one row: some point would break a neighbouring cell's row
                wrong = rows[(at[ok] + 1) % len(rows)]
                tight += bool((vals < wrong * (1 - 1e-9)).any())
    assert checked > 20
    assert tight > checked // 3


def test_front_cells_refuse_what_they_do_not_floor() -> None:
    t = get_target("ascend-910b")
    gemm = einsum("mk,kn->mn", {"m": 600, "k": 300, "n": 200}, dtype="bf16", weight=1)
    assert t.structure_front_cells(gemm, {}, ("latency", "cycles")) is None  # type: ignore[attr-defined]
    reduction = einsum("ij->i", {"i": 64, "j": 96}, dtype="f16", reduce_op="add")
    assert t.structure_front_cells(reduction, {}, ("latency", "energy")) is None
    with pytest.raises(ValueError, match="core_grid='1x1x99' is not a choice"):
        t.structure_front_cells(gemm, {"core_grid": "1x1x99"}, ("latency", "energy"))
    with pytest.raises(
        ValueError, match="no floor of 'cycles': the cube floors energy, footprint, latency, offchip_bytes"
    ):
        cube_structure_front_floors(t.prepared(gemm), (), ("cycles",))
    assert {"latency", "offchip_bytes", "energy", "footprint"} == FRONT_FLOORED


@pytest.mark.parametrize("objectives", [("latency", "footprint"), ("energy", "latency"), ("latency", "offchip_bytes")])
def test_bestfirst_with_the_floors_gives_the_enumerated_front(
    objectives: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Best-first with several objectives prices every structure's open cells in rounds
    (`mapper.strategies.cell_rounds`) and never a structure's exact bound (which prices its whole box): the front
    is the enumeration's."""
    p = conv2d(batch=1, in_channels=8, out_channels=12, input_height=5, input_width=5, kernel=3, padding=1)
    t = get_target("ascend-910b")
    s = SearchSettings(strategy="bestfirst", objectives=objectives, inner_points=2048, max_seconds=300)
    full = tune(p, t, s.model_copy(update={"strategy": "exhaustive"}), validate=False)
    asked: list[object] = []
    real = t.structure_bound
    monkeypatch.setattr(t, "structure_bound", lambda *a, **k: asked.append(a) or real(*a, **k))
    r = tune(p, t, s, validate=False)
    assert r.proven_optimal and full.proven_optimal
    assert [q.values for q in r.pareto] == [q.values for q in full.pareto]  # exact, no duplicate value
    cert = r.certificate
    assert cert is not None and cert.scored + cert.pruned_by_bound == cert.structures_total
    assert cert.pruned_by_bound > cert.structures_total // 5
    assert re.search(r"priced in ([\d,]+) rounds", " ".join(r.notes))
    left_out = re.search(r"([\d,]+) points in cells the front dominated", cert.bound_source)
    assert left_out is not None  # the points priced are the scored structures' points less those left out
    assert r.counts.points_scored == cert.inner_points * cert.scored - int(left_out.group(1).replace(",", ""))
    assert asked == []


def test_an_optuna_study_with_two_objectives_gives_the_enumerated_front_without_pricing_boxes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each trial's structure is tested against the front by its cells beside a vector that prices no point
    (`FrontBounds.cheap`): Ascend's exact structure bound, which prices the structure's box, is never asked."""
    p = conv2d(batch=1, in_channels=8, out_channels=12, input_height=5, input_width=5, kernel=3, padding=1)
    t = get_target("ascend-910b")
    objectives = ("latency", "energy")
    full = tune(p, t, SearchSettings(strategy="exhaustive", objectives=objectives), validate=False)
    asked: list[dict[str, object]] = []
    real = t.structure_bound
    monkeypatch.setattr(t, "structure_bound", lambda prob, fixed: asked.append(fixed) or real(prob, fixed))
    s = SearchSettings(strategy="random", objectives=objectives, inner_points=512, max_trials=5000, patience=0)
    r = tune(p, t, s, validate=False)
    assert r.proven_optimal and [q.values for q in r.pareto] == [q.values for q in full.pareto]
    cert = r.certificate
    assert cert is not None and cert.pruned_by_bound > 0
    assert [f for f in asked if f] == []  # no structure's box priced for its bound
