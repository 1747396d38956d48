"""The Tensix structure bound (costmodels/tenstorrent/bounds.py, issue #12): admissible for every structure
of random problems under every placement option, block float and fidelity policy; tight enough to prune
the layouts of the issue's GEMM and of ResNet-50 layers, with the answer of the full enumeration.

The compute term prices a tile product at the fidelity's cycles (hardware-facts.md §4.1, Math fidelity
row: LoFi 16, HiFi2 32, HiFi3 48, HiFi4 64 cycles per 32x32x32 tile); `test_fidelity_sets_the_compute_term`
checks the bound scales with them.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from costmodels.protocol import Choice, Target
from costmodels.registry import get_target
from costmodels.structure_bound import StructureBounded
from costmodels.tenstorrent.bounds import max_subblock_area
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import split_params
from tests.costmodels.space_scan import sample_product, space_latencies
from workload import named
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = ("wormhole-n150", "blackhole-p150")
DTYPES = ("bf16", "f32", "bfloat8_b", "bfloat4_b")
#: placement options and fidelity policies a request may set (issue #13 placement; README, fidelities)
OVERRIDES: tuple[dict[str, Any], ...] = (
    {},
    {"input_in_l1": True},
    {"input_in_l1": True, "input_layout": "height/4"},
    {"input_in_l1": True, "output_in_l1": True, "input_layout": "block/2x2"},
    {"input_in_l1": True, "output_in_l1": True, "l1_live_bytes": 600_000},
    {"output_in_l1": True, "input_layout": "width/3"},
    {"fidelities": ["LoFi", "HiFi2", "HiFi4"]},
    {"fidelities": ["HiFi3"], "bf16_accumulation": True},
)


def _random_problems(seed: int, n: int) -> list[Problem]:
    rng = random.Random(seed)
    out: list[Problem] = []
    for _ in range(n):
        dtype = rng.choice(DTYPES)
        if rng.random() < 0.4:
            hw, kernel = rng.choice([5, 9, 14, 20]), rng.choice([1, 3, 3, 5])
            out.append(
                conv2d(
                    batch=rng.choice([1, 2]), input_height=hw, input_width=hw, kernel=kernel,
                    padding=rng.choice([0, 1]), stride=rng.choice([1, 1, 2]),
                    in_channels=rng.choice([3, 8, 17, 64]), out_channels=rng.choice([8, 24, 40, 96]), dtype=dtype,
                )
            )  # fmt: skip
            continue
        sizes = {"m": rng.randint(1, 600), "k": rng.randint(1, 400), "n": rng.randint(1, 300)}
        if rng.random() < 0.3:
            out.append(einsum("bmk,bkn->bmn", {**sizes, "b": rng.randint(2, 4)}, dtype=dtype, weight=1))
        else:
            out.append(einsum("mk,kn->mn", sizes, dtype=dtype, weight=1))
    return out


def _bounded(t: Target) -> StructureBounded:
    assert isinstance(t, StructureBounded)
    return t


@pytest.mark.parametrize("preset", PRESETS)
def test_no_structure_beats_its_bound(preset: str) -> None:
    rng = random.Random(11)
    checked = tighter = infinite = 0
    for i, p in enumerate(_random_problems(seed=5 + len(preset), n=30)):
        t = get_target(preset, OVERRIDES[i % len(OVERRIDES)])
        bounded = _bounded(t)
        params, lat = space_latencies(t, p)
        names = [n for n, _ in params]
        generic = t.lower_bound(p).cycles / t.hardware.clock_hz  # type: ignore[attr-defined]
        # the mapper's own splits, the layout (core grid) with and without its memory, and random subsets
        subsets = [tuple(q.name for q in split_params(t.space(p), inner)[0]) for inner in (64, 1024, 1 << 16)]
        subsets += [("layout",), ("layout", "memory"), ("layout", "memory", "act_double_buffer")]
        subsets += [tuple(rng.sample(names, rng.randint(1, len(names)))) for _ in range(3)]
        for fixed_names in subsets:
            axes = [names.index(n) for n in fixed_names]
            for combo in sample_product(rng, [len(params[a][1]) for a in axes], 60):
                fixed = {names[a]: params[a][1][c] for a, c in zip(axes, combo, strict=True)}
                sel = tuple(combo[axes.index(j)] if j in axes else slice(None) for j in range(len(names)))
                best = float(lat[sel].min())
                bound = bounded.structure_bound(p, fixed)
                assert bound <= best, (p.label, t.hardware, fixed, bound, best)
                checked += 1
                tighter += bound > generic * (1 + 1e-9)
                infinite += bound == np.inf
        assert bounded.structure_bound(p, {}) <= float(lat.min())
    assert checked > 3000
    assert tighter > checked // 3  # padding, idle cores and un-overlapped stages show in most bounds
    assert infinite > 0  # some structures are proved infeasible (bounded out whatever the best)


def test_fidelity_sets_the_compute_term() -> None:
    t = get_target("wormhole-n150", {"fidelities": ["LoFi", "HiFi2", "HiFi3", "HiFi4"]})
    p = einsum("mk,kn->mn", {"m": 2048, "k": 8192, "n": 2048}, dtype="bf16", out_dtype="bf16", weight=1)
    # block/8x8 in L1 fits without the weights double buffer; it is then compute + weights bound
    fixed: dict[str, Choice] = {
        "layout": "block/8x8", "memory": "l1-sharded", "act_double_buffer": True, "weights_double_buffer": False
    }  # fmt: skip
    b = {f: _bounded(t).structure_bound(p, {**fixed, "math_fidelity": f}) for f in ("LoFi", "HiFi2", "HiFi3", "HiFi4")}
    assert b["HiFi4"] < np.inf
    # per core 8x8 output tiles x 256 K tiles, each tile product at the fidelity's cycles (hardware-facts.md
    # §4.1 Math fidelity row: LoFi 16, HiFi2 32, HiFi3 48, HiFi4 64); the other terms do not change with it
    for f, cyc in {"HiFi2": 32, "HiFi3": 48, "HiFi4": 64}.items():
        assert (b[f] - b["LoFi"]) * 1e9 == pytest.approx(8 * 8 * 256 * (cyc - 16), rel=1e-9)
    assert b["LoFi"] < b["HiFi2"] < b["HiFi3"] < b["HiFi4"]


def test_largest_subblock_within_the_destination_register() -> None:
    pn = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 8.0, 16.0, 6.0])
    # sb_w divides pn_t, sb_h > 1 only with sb_w == pn_t, area within dst (hardware-facts.md §4.2 step 2)
    assert max_subblock_area(pn, np.array(8)).tolist() == [8, 8, 6, 8, 5, 7, 8, 8, 6]
    assert max_subblock_area(pn, np.array(4)).tolist() == [4, 4, 3, 4, 1, 1, 4, 4, 3]


def test_choices_outside_the_space_are_refused_and_unsupported_problems_get_zero() -> None:
    t = get_target("wormhole-n150")
    p = einsum("mk,kn->mn", {"m": 600, "k": 300, "n": 200}, dtype="bf16", weight=1)
    with pytest.raises(ValueError, match="layout='height/999' is not a choice"):
        _bounded(t).structure_bound(p, {"layout": "height/999"})
    with pytest.raises(ValueError, match="no parameter 'tile'"):
        _bounded(t).structure_bound(p, {"tile": 16})
    unary = einsum("ij->i", {"i": 64, "j": 96}, dtype="bf16", reduce_op="add")
    assert t.supports(unary) and _bounded(t).structure_bound(unary, {}) == 0.0


def _branch_and_bound(t: Target, p: Problem) -> tuple[float, int, int]:
    """Best latency over the layouts taken in order of their bounds, stopping when the bound reaches it.

    Returns (best, layouts scored, layouts pruned by bound).
    """
    params, lat = space_latencies(t, p)
    layouts = params[0][1]
    assert params[0][0] == "layout"
    order = sorted(range(len(layouts)), key=lambda i: _bounded(t).structure_bound(p, {"layout": layouts[i]}))
    best, scored = np.inf, 0
    for n, i in enumerate(order):
        if _bounded(t).structure_bound(p, {"layout": layouts[i]}) >= best:
            return best, scored, len(order) - n
        best, scored = min(best, float(lat[i].min())), scored + 1
    return best, scored, 0


@pytest.mark.parametrize("preset", PRESETS)
def test_resnet50_layers_prune_layouts_and_keep_the_optimum(preset: str) -> None:
    t = get_target(preset)
    layers = named.load("resnet50", batch=16)
    picked = [layers[0], layers[2], layers[-3]]  # the 7x7 stem, a 3x3 and a 1x1 of the last stage
    for p in picked:
        best, scored, pruned = _branch_and_bound(t, p)
        full = float(space_latencies(t, p)[1].min())
        assert best == full, p.label
        assert pruned > 0 and scored + pruned == len(t.space(p).params[0].choices), p.label


def test_issue_gemm_is_pruned_by_the_mapper_with_the_enumeration_answer() -> None:
    t = get_target("wormhole-n150")
    p = einsum("mk,kn->mn", {"m": 4099, "k": 131, "n": 8191}, dtype="bf16", weight=1)
    optimum = tune(p, t, SearchSettings(strategy="exhaustive"), validate=False).values["latency"]
    best, _scored, pruned = _branch_and_bound(t, p)
    assert best == float(space_latencies(t, p)[1].min()) and pruned > 0
    # the mapper's own branch and bound: layouts structural (4096 inner points), TPE until every one is done
    s = SearchSettings(strategy="tpe", inner_points=4096, max_trials=5000, patience=0, seed=1, max_seconds=120)
    r = tune(p, t, s, validate=False)
    cert = r.certificate
    assert cert is not None and cert.bound_source == "target.structure_bound"
    assert cert.pruned_by_bound > 0 and r.counts.pruned_by_bound > 0
    if cert.complete:  # every structure scored or bounded out: the proof (a quiet machine gets here)
        assert r.proven_optimal and r.values["latency"] == optimum
    else:  # the time budget ended first (a loaded machine): the remaining bound and the gap still hold
        assert cert.best_remaining_bound is not None and cert.best_remaining_bound <= optimum
        assert cert.gap_bound is not None and r.values["latency"] / optimum - 1 <= cert.gap_bound
