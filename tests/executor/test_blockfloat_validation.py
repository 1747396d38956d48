"""The executor on tt-metal's block-float inputs: packed inputs, fidelity phases, the bound it names, mutants.

Sources: workload/blockfloat.py (tt-metal ``blockfloat_common.cpp``), executor/fidelity.py (tt-isa
``ELWMUL.md`` phase bits; hardware-facts.md §4.1 row "Fidelity per dtype": "FP8/BFP4/BFP2 need only
phase 0 (LoFi)").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodels.ir import flat_mapping
from costmodels.registry import get_target
from executor import fidelity, mutations
from executor.tiled import run_mapping
from executor.validate import validate, validate_as_run
from tests.costmodels.tenstorrent.points import BASE
from workload import blockfloat
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.reference import evaluate, random_inputs

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
        assert "format bound (bfloat8_b x bfloat8_b" in r.tolerance_reason and "within it" in r.tolerance_reason


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


def test_the_phase_error_bounds_follow_the_isa_masks() -> None:
    """format_bound.PHASE_ERROR: SrcA's phase-0 part keeps 1+4 bits, SrcB's 1+6 (tt-isa ELWMUL.md masks)."""
    import ml_dtypes

    from executor import format_bound

    x = np.arange(0, 2**16, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    x = x[np.isfinite(x) & (np.abs(x) >= np.finfo(np.float32).tiny)]
    a_lo = np.abs(fidelity.srca_bits(x, 1) / x).max()
    b_lo = np.abs(fidelity.srcb_bits(x, 2) / x).max()
    # bf16 has 7 mantissa bits: SrcA leaves 3 of them to phase 1, SrcB leaves 1 to phase 2
    assert 2**-5 < a_lo < format_bound.PHASE_ERROR[1] and 2**-8 < b_lo < format_bound.PHASE_ERROR[2]
    assert a_lo * b_lo < format_bound.PHASE_ERROR[3]
    assert format_bound.fidelity_error("HiFi4", False) == 0 and format_bound.fidelity_error("LoFi", True) == 0
    assert format_bound.fidelity_error("HiFi3", False) == 2.0**-10


@pytest.mark.parametrize(("fmt", "fid"), [("bfloat8_b", "LoFi"), ("bfloat4_b", "HiFi4"), ("bf16", "LoFi")])
def test_the_report_names_the_format_bound_and_a_result_outside_it_fails(fmt: str, fid: str) -> None:
    from executor import format_bound
    from executor.tolerance import derive

    p = _gemm(fmt)
    m = flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": fid}})
    r = validate(p, m)
    assert r.passed and f"format bound ({fmt} x {fmt}, {fid}) against the exact result of the unpacked" in (
        r.tolerance_reason
    )
    assert "within it" in r.tolerance_reason
    # the bound trips: the exact result of the packed values, moved by twice the packing/phase allowance
    originals = random_inputs(p, np.random.default_rng(0), pack_blocks=False)
    packed = random_inputs(p, np.random.default_rng(0))
    tol = derive(p)[0]
    plan = fidelity.plan(p, m, packed)
    assert plan is not None
    truth = evaluate(p, originals)
    ok, _ = format_bound.check(p, originals, packed, truth.astype(np.float32), tol, None, fid, plan.exact)
    assert ok
    far = truth + 4096.0  # above K * (2 * 2 * 0.5 + 2 * 2 * 0.5): inputs within 2, units within 0.5
    ok, text = format_bound.check(p, originals, packed, far.astype(np.float32), tol, None, fid, plan.exact)
    assert not ok and "elements outside it" in text


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 40),
    k=st.integers(1, 70),
    n=st.integers(1, 40),
    fmts=st.tuples(st.sampled_from(["bfloat8_b", "bfloat4_b", "bf16"]), st.sampled_from(["bfloat8_b", "bfloat4_b"])),
    fid=st.sampled_from([None, *FIDELITIES]),
    seed=st.integers(0, 2**16),
)
def test_any_block_float_gemm_passes_and_its_dropped_tile_fails(
    m: int, k: int, n: int, fmts: tuple[str, str], fid: str | None, seed: int
) -> None:
    p = einsum("mk,kn->mn", {"m": m, "k": k, "n": n}, dtype={"A": fmts[0], "B": fmts[1]}, weight=1)
    flat = flat_mapping(p)
    mapping = flat if fid is None else flat.model_copy(update={"knobs": {"math_fidelity": fid}})
    r = validate(p, mapping, seed=seed)
    assert r.passed, r.reason
    assert "format bound" in r.tolerance_reason and "within it" in r.tolerance_reason
    broken = mutations.drop_tile(p, mapping)
    if broken is not None:
        assert validate(p, broken, seed=seed).status == "failed"
