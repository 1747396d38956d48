"""Tenstorrent math fidelity in the executor: emulated for bf16 operands, "not checked" otherwise.

Sources (see executor/fidelity.py):
- tt-isa-documentation, WormholeB0/TensixTile/TensixCoprocessor/ELWMUL.md, functional model,
  ``SrcAFidelityBits`` (even phases: implicit 1 + 4 mantissa bits, mask 0xfff80000; odd phases:
  the next 5 bits) and ``SrcBFidelityBits`` (phases 0-1: implicit 1 + 6 bits, mask 0xfffe0000;
  phases 2-3: the next 4 bits); MVMUL.md: ``Dst += SrcB @ SrcA``, 5-bit SrcA x 7-bit SrcB multipliers.
- hardware-facts.md §4.1 rows "Math fidelity" (LoFi 1 phase ... HiFi4 4) and "Fidelity per dtype".
- tt-buda documentation "Data Formats and Math Fidelity", section "Math Fidelity": phase 0 SrcA
  MSBs x SrcB MSBs, phase 1 SrcA LSBs x SrcB MSBs, phase 2 SrcA MSBs x SrcB LSBs, phase 3 both LSBs.
- tt-metal llk_unpack_AB_matmul_api.h: "In0 -> srcB", "In1 -> srcA".
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from costmodels.ir import flat_mapping
from costmodels.registry import get_target
from executor import fidelity
from executor.tiled import run_mapping
from executor.validate import validate
from tests.costmodels.tenstorrent.points import BASE
from workload.conv2d import conv2d
from workload.einsum import einsum

# in0 (SrcB) a = 1.0000101b: SrcB MSBs (1 + 6 bits) 1.000010b = 1.03125, LSBs 2**-7
# in1 (SrcA) b = 1.0001001b: SrcA MSBs (1 + 4 bits) 1.0001b = 1.0625, LSBs 2**-7
A, B = 1.0390625, 1.0703125
EXPECTED = {
    "LoFi": 1.03125 * 1.0625,  # phase 0: SrcB MSBs x SrcA MSBs = 1.095703125
    "HiFi2": 1.03125 * (1.0625 + 2**-7),  # + phase 1: SrcA LSBs x SrcB MSBs
    "HiFi3": 1.03125 * (1.0625 + 2**-7) + 2**-7 * 1.0625,  # + phase 2: SrcA MSBs x SrcB LSBs
    "HiFi4": A * B,  # + phase 3: every bf16 bit, the exact product
}

#: a point of the Tenstorrent space (height sharding over 8 cores, L1, fp32 accumulation)
POINT: dict[str, Any] = dict(BASE)


def test_phase_masks_follow_the_isa_functional_model() -> None:
    a, b = np.array([A, -A], np.float32), np.array([B, -B], np.float32)
    assert fidelity.srcb_bits(a, 0).tolist() == [1.03125, -1.03125]
    assert fidelity.srcb_bits(a, 2).tolist() == [2**-7, -(2**-7)]
    assert fidelity.srca_bits(b, 0).tolist() == [1.0625, -1.0625]
    assert fidelity.srca_bits(b, 1).tolist() == [2**-7, -(2**-7)]
    # for every bf16 value the parts add back to the value (HiFi4 is exact for bf16)
    x = np.arange(0, 2**16, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    x = x[np.isfinite(x) & (np.abs(x) >= np.finfo(np.float32).tiny)]  # denormals are flushed by the FPU
    np.testing.assert_array_equal(fidelity.srca_bits(x, 0) + fidelity.srca_bits(x, 1), x)
    np.testing.assert_array_equal(fidelity.srcb_bits(x, 0) + fidelity.srcb_bits(x, 2), x)


@pytest.mark.parametrize("fid", sorted(EXPECTED))
def test_executor_multiplies_the_bits_each_fidelity_consumes(fid: str) -> None:
    p = einsum("mk,kn->mn", {"m": 1, "k": 1, "n": 1}, dtype="bf16", out_dtype="f32", weight=1)
    m = flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": fid}})
    x = [np.array([[A]], ml_dtypes.bfloat16), np.array([[B]], ml_dtypes.bfloat16)]
    assert float(run_mapping(p, m, x).values[0, 0]) == EXPECTED[fid]
    if fid == "LoFi":  # in0 goes to SrcB (1 + 6 bits), in1 to SrcA (1 + 4 bits): the order matters
        assert float(run_mapping(p, m, x[::-1]).values[0, 0]) == 1.0625 * 1.0
        swapped = einsum("mk,kn->mn", {"m": 1, "k": 1, "n": 1}, dtype="bf16", out_dtype="f32", weight=0)
        sm = flat_mapping(swapped).model_copy(update={"knobs": {"math_fidelity": fid}})
        assert float(run_mapping(swapped, sm, x).values[0, 0]) == 1.0 * 1.0625  # the weight input is SrcA


@pytest.mark.parametrize("fid", ["LoFi", "HiFi2", "HiFi3", "HiFi4"])
def test_bf16_mapping_at_each_fidelity_is_checked_against_the_same_phase_products(fid: str) -> None:
    p = einsum("mk,kn->mn", {"m": 32, "k": 256, "n": 32}, dtype="bf16", out_dtype="f32", weight=1)
    m = flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": fid}})
    r = validate(p, m)
    assert r.passed and r.status == "passed", r
    assert f"math fidelity {fid}" in r.tolerance_reason
    exact = run_mapping(p, flat_mapping(p), [*_inputs(p)]).values
    emulated = run_mapping(p, m, [*_inputs(p)]).values
    if fid == "HiFi4":
        np.testing.assert_array_equal(emulated, exact)
    else:  # the emulation is real: far outside the f32 accumulation error (HiFi3 misses only 2**-14 terms)
        assert np.abs(emulated - exact).max() > 2e-5 * np.abs(exact).max()


def _inputs(p: Any) -> list[np.ndarray]:
    from workload.reference import random_inputs

    return random_inputs(p, np.random.default_rng(0))


def test_tenstorrent_lofi_mapping_carries_and_validates_its_fidelity() -> None:
    t = get_target("wormhole-n150", {"fidelities": ["LoFi", "HiFi4"]})
    p = conv2d(batch=1, in_channels=16, out_channels=32, input_height=8, input_width=8, kernel=3, padding=1)
    m = t.mapping(p, {**POINT, "math_fidelity": "LoFi"})
    assert m.knobs["math_fidelity"] == "LoFi"
    r = validate(p, m)
    assert r.status == "passed" and "math fidelity LoFi emulated" in r.tolerance_reason


@pytest.mark.parametrize("fid", ["LoFi", "HiFi2", "HiFi3", "HiFi4"])
def test_f32_operands_at_any_fidelity_are_not_checked(fid: str) -> None:
    t = get_target("wormhole-n150", {"fidelities": ["LoFi", "HiFi2", "HiFi3", "HiFi4"]})
    p = conv2d(
        batch=1, in_channels=16, out_channels=32, input_height=8, input_width=8, kernel=3, padding=1, dtype="f32"
    )
    m = t.mapping(p, {**POINT, "math_fidelity": fid})
    r = validate(p, m)
    assert not r.passed and r.status == "not-checked"
    assert r.reason.startswith(f"not checked: {fid} not emulated on f32 operands")


def test_an_unknown_fidelity_is_not_checked() -> None:
    p = einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 8}, dtype="bf16", weight=1)
    r = validate(p, flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": "MedFi"}}))
    assert r.status == "not-checked" and "'MedFi' is unknown" in r.reason


def test_a_structural_failure_wins_over_not_checked() -> None:
    from executor import mutations

    t = get_target("wormhole-n150", {"fidelities": ["LoFi", "HiFi4"]})
    p = einsum("mk,kn->mn", {"m": 64, "k": 128, "n": 64}, dtype="f32", weight=1)
    m = t.mapping(p, {**POINT, "layout": "height/2", "math_fidelity": "LoFi"})
    broken = mutations.drop_tile(p, m)
    assert broken is not None
    assert validate(p, m).status == "not-checked" and validate(p, broken).status == "failed"
