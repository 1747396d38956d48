"""The executor on tt-metal's block-float inputs: packed inputs, fidelity phases, the bound it names, mutants.

Sources: workload/blockfloat.py (tt-metal ``blockfloat_common.cpp``), executor/fidelity.py (tt-isa
``ELWMUL.md`` phase bits; hardware-facts.md §4.1 row "Fidelity per dtype": "FP8/BFP4/BFP2 need only
phase 0 (LoFi)").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from costmodels.ir import flat_mapping
from costmodels.registry import get_target
from executor import fidelity, mutations
from executor.tiled import run_mapping
from executor.validate import validate, validate_as_run
from tests.costmodels.tenstorrent.points import BASE
from workload import blockfloat
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.reference import random_inputs

FIDELITIES = ["LoFi", "HiFi2", "HiFi3", "HiFi4"]


def _gemm(dtype: str | dict[str, str], k: int = 256) -> Any:
    return einsum("mk,kn->mn", {"m": 32, "k": k, "n": 48}, dtype=dtype, out_dtype="f32", weight=1)


@pytest.mark.parametrize("fmt", ["bfloat8_b", "bfloat4_b"])
def test_random_inputs_are_packed_along_each_tensors_last_axis(fmt: str) -> None:
    p = _gemm(fmt)
    for x in random_inputs(p, np.random.default_rng(3)):
        np.testing.assert_array_equal(blockfloat.quantize(x, fmt), x)  # already packed
        # every value is a whole number of its block's units, at most 2**W - 1 of them
        units = x.astype(np.float64) / blockfloat.unit(x, fmt)
        np.testing.assert_array_equal(units, np.round(units))
        assert np.abs(units).max() <= 2 ** blockfloat.FORMATS[fmt].mantissa_bits - 1
        assert len(np.unique(x)) < x.size / 8  # far fewer distinct values than bf16 would give


def test_phases_that_cover_every_bit_are_reported_exact() -> None:
    # hardware-facts.md §4.1: BFP4 needs only phase 0; a bfloat8_b significand (1+6 bits) needs SrcA phases 0-1
    cases = {("bfloat4_b", "LoFi"): True, ("bfloat8_b", "LoFi"): False, ("bfloat8_b", "HiFi2"): True}
    for (fmt, fid), exact in cases.items():
        p = _gemm(fmt)
        m = flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": fid}})
        plan = fidelity.plan(p, m, random_inputs(p, np.random.default_rng(0)))
        assert plan is not None and plan.exact is exact, (fmt, fid)
    p = _gemm("bf16")
    lofi = flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": "HiFi2"}})
    assert not fidelity.plan(p, lofi, random_inputs(p, np.random.default_rng(0))).exact  # type: ignore[union-attr]


@pytest.mark.parametrize("fid", FIDELITIES)
@pytest.mark.parametrize("fmt", ["bfloat8_b", "bfloat4_b"])
def test_block_float_at_every_fidelity_is_checked_and_names_its_bound(fmt: str, fid: str) -> None:
    p = _gemm(fmt)
    m = flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": fid}})
    r = validate(p, m)
    assert r.passed and r.status == "passed", r.reason
    assert "not checked" not in r.reason
    assert f"inputs packed as tt-metal packs them (A {fmt}, B {fmt}" in r.tolerance_reason
    assert f"math fidelity {fid}" in r.tolerance_reason and f"{fmt} x {fmt}" in r.tolerance_reason


def test_lofi_on_bfloat8_b_drops_bits_and_the_reference_drops_the_same() -> None:
    p = _gemm("bfloat8_b")
    x = random_inputs(p, np.random.default_rng(0))
    lofi = flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": "LoFi"}})
    exact = run_mapping(p, flat_mapping(p), x).values
    emulated = run_mapping(p, lofi, x).values
    assert np.abs(emulated - exact).max() > 1e-3 * np.abs(exact).max()  # SrcA keeps 1+4 of 1+6 bits
    assert validate(p, lofi).passed


def test_mixed_formats_bf16_activations_and_bfloat8_b_weights() -> None:
    p = _gemm({"A": "bf16", "B": "bfloat8_b"})
    m = flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": "LoFi"}})
    r = validate(p, m)
    assert r.passed and "(B bfloat8_b:" in r.tolerance_reason and "bf16 x bfloat8_b" in r.tolerance_reason


def test_a_tenstorrent_bfloat8_b_lofi_conv_validates_as_it_runs() -> None:
    t = get_target("wormhole-n150", {"fidelities": ["LoFi", "HiFi4"]})
    p = conv2d(
        batch=1, in_channels=32, out_channels=32, input_height=8, input_width=8, kernel=3, padding=1, dtype="bfloat8_b"
    )
    for fid in ("LoFi", "HiFi4"):
        m = t.mapping(p, {**BASE, "math_fidelity": fid})
        assert t.check(p, m) == []
        r = validate_as_run(p, m)
        assert r.passed, r.reason
        assert r.method == ("halo" if fid == "HiFi4" else "full")  # the halo executor multiplies exact products


def test_mutants_of_a_bfloat8_b_lofi_mapping_all_fail() -> None:
    t = get_target("wormhole-n150", {"fidelities": ["LoFi"]})
    p = einsum("mk,kn->mn", {"m": 64, "k": 2048, "n": 64}, dtype="bfloat8_b", weight=1)
    m = t.mapping(p, {**BASE, "layout": "height/2", "math_fidelity": "LoFi"})
    assert validate(p, m).passed
    found = mutations.mutants(p, m)
    assert found, "no mutant applies"
    for name, broken in found:
        assert validate(p, broken).status == "failed", name
    # the accumulator mutant is caught by the numbers alone (its loop nest covers every point)
    narrow = validate(p, mutations.narrow_accumulator(m))
    assert narrow.status == "failed" and not narrow.reason.startswith("coverage")
