"""Tiled execution against the exact reference: every reduce op, convs, integer and low-precision formats."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.ir import Level, Loop, Mapping, flat_mapping
from executor.tiled import plan_reduction, run_mapping
from executor.validate import validate
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem
from workload.reference import cast_output, evaluate, random_inputs


def split(
    problem: Problem, tiles: dict[str, int], fill: dict[str, dict[str, str]] | None = None, acc: str = ""
) -> Mapping:
    """Outer loops ceil(size/tile) around an instruction tile, for every axis."""
    outer = [Loop(axis=a, factor=-(-s // min(tiles.get(a, s), s))) for a, s in problem.axes.items()]
    inner = [Loop(axis=a, factor=min(tiles.get(a, s), s)) for a, s in problem.axes.items()]
    return Mapping(
        levels=(Level(name="outer", loops=tuple(outer)), Level(name="tile", loops=tuple(inner))),
        acc_dtype=acc or problem.acc_dtype,
        fill=fill or {},
    )


@pytest.mark.parametrize("op", ["add", "mul", "max", "min"])
def test_binary_reduce_ops_match_reference(op: str) -> None:
    p = einsum("mk,kn->mn", {"m": 12, "k": 20, "n": 9}, dtype="f32", reduce_op=op)
    report = validate(
        p, split(p, {"m": 5, "k": 8, "n": 4}, fill={"A": {"k": "zero"}, "B": {"k": "zero"}} if op == "add" else None)
    )
    if op != "add":  # non-add reductions cannot be padded: use divisor tiles
        report = validate(p, split(p, {"m": 4, "k": 5, "n": 3}))
    assert report.passed, report


@pytest.mark.parametrize("op", ["add", "mul", "max", "min"])
def test_unary_reduce_ops_match_reference(op: str) -> None:
    p = einsum("ij->i", {"i": 10, "j": 24}, dtype="bf16", reduce_op=op)
    assert validate(p, split(p, {"i": 5, "j": 6})).passed


def test_tile_order_is_the_mappings_order() -> None:
    p = einsum("mk,kn->mn", {"m": 4, "k": 64, "n": 4}, dtype="f32")
    plan = plan_reduction(p, split(p, {"k": 16}))
    assert plan.steps == 4 and plan.tile["k"].tolist() == list(range(16))
    spatial = Mapping(
        levels=(
            Level(name="core", loops=(Loop(axis="k", factor=2, spatial=True),)),
            Level(name="t", loops=(Loop(axis="k", factor=4),)),
            Level(name="i", loops=(Loop(axis="m", factor=4), Loop(axis="n", factor=4), Loop(axis="k", factor=8))),
        ),
        acc_dtype="f32",
    )
    sp = plan_reduction(p, spatial)
    assert sp.spatial["k"].tolist() == [0, 32] and [s for _, _, s in sp.temporal] == [8]


@pytest.mark.parametrize(
    "kw",
    [
        {"kernel": 3, "stride": 2, "padding": 1},
        {"kernel": 3, "dilation": 2, "padding": 2},
        {"kernel": (3, 2), "stride": (1, 2), "padding": (1, 0), "groups": 4},
        {"kernel": 1, "groups": 8},
    ],
)
def test_conv_tiled_matches_reference(kw: dict[str, object]) -> None:
    p = conv2d(batch=2, in_channels=8, out_channels=16, input_height=11, input_width=9, **kw)  # type: ignore[arg-type]
    report = validate(
        p, split(p, {"oh": 4, "ow": 3, "ci": 2, "co": 4, "fh": 2}, fill={"W": {"fh": "zero", "ci": "zero"}})
    )
    assert report.passed, report


@pytest.mark.parametrize("dtype", ["i4", "i8"])
def test_integer_mappings_match_exactly(dtype: str) -> None:
    p = einsum("mk,kn->mn", {"m": 16, "k": 96, "n": 12}, dtype=dtype, weight=1)
    x = random_inputs(p, np.random.default_rng(1))
    res = run_mapping(p, split(p, {"m": 8, "k": 32, "n": 5}), x)
    np.testing.assert_array_equal(res.values, cast_output(p, evaluate(p, x)))
    assert validate(p, split(p, {"m": 8, "k": 32, "n": 5})).tolerance.exact


@pytest.mark.parametrize("dtype", ["f8e4m3", "f8e5m2", "bf16", "f16"])
def test_low_precision_within_tolerance_and_output_rounded(dtype: str) -> None:
    p = einsum("mk,kn->mn", {"m": 16, "k": 256, "n": 8}, dtype=dtype, out_dtype=dtype)
    report = validate(p, split(p, {"k": 64, "m": 8}))
    assert report.passed, report
    assert report.max_abs_error > 0  # the output is rounded to the low format: error exists, and is bounded


def test_zero_padding_on_k_is_harmless_and_dummy_padding_on_free_axes_is_dropped() -> None:
    p = einsum("mk,kn->mn", {"m": 10, "k": 30, "n": 7}, dtype="bf16")
    m = split(p, {"m": 4, "k": 8, "n": 3}, fill={"B": {"k": "zero"}})  # A keeps # on k: 1+1# x 1+1z = 1
    x = random_inputs(p, np.random.default_rng(0))
    res = run_mapping(p, m, x)
    assert res.written.all() and np.isfinite(res.values.astype(np.float32)).all()
    assert validate(p, m).passed


def test_dummy_padding_on_both_operands_reaches_the_result() -> None:
    p = einsum("mk,kn->mn", {"m": 4, "k": 30, "n": 4}, dtype="bf16")
    res = run_mapping(p, split(p, {"k": 8}), random_inputs(p, np.random.default_rng(0)))
    assert np.abs(res.values.astype(np.float32)).min() > 1e30


def test_unvisited_output_points_stay_nan_and_unwritten() -> None:
    p = einsum("mk,kn->mn", {"m": 8, "k": 4, "n": 4}, dtype="f32")
    m = Mapping(
        levels=(Level(name="t", loops=(Loop(axis="m", factor=6), Loop(axis="n", factor=4), Loop(axis="k", factor=4))),),
        acc_dtype="f32",
    )
    res = run_mapping(p, m, random_inputs(p, np.random.default_rng(0)))
    assert res.written[:6].all() and not res.written[6:].any() and np.isnan(res.values[6:]).all()


def test_flat_mapping_of_a_batched_matmul() -> None:
    p = einsum("vmk,vnk->vmn", {"v": 3, "m": 8, "n": 6, "k": 10}, dtype="bf16", weight=1)
    assert validate(p, flat_mapping(p)).passed
