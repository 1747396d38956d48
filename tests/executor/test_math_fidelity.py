"""Tenstorrent math fidelity: until a fidelity is emulated, its validation says "not checked", never "passed".

hardware-facts.md §4.1, rows "Math fidelity" and "Fidelity per dtype": LoFi = 1 phase ... HiFi4 =
4 phases of 5-bit (SrcA) x 7-bit (SrcB) significand products; only HiFi4 multiplies every bf16 bit.
"""

from __future__ import annotations

import pytest

from costmodels.ir import flat_mapping
from executor.validate import validate
from workload.einsum import einsum


def _gemm(dtype: str) -> object:
    return einsum("mk,kn->mn", {"m": 32, "k": 64, "n": 32}, dtype=dtype, out_dtype="f32", weight=1)


@pytest.mark.parametrize("fid", ["LoFi", "HiFi2", "HiFi3"])
def test_fewer_phases_than_hifi4_are_not_checked(fid: str) -> None:
    p = _gemm("bf16")
    r = validate(p, flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": fid}}))  # type: ignore[arg-type]
    assert not r.passed and r.status == "not-checked" and r.reason.startswith(f"not checked: {fid} not emulated")


def test_hifi4_on_bf16_is_the_exact_product_and_checked() -> None:
    p = _gemm("bf16")
    r = validate(p, flat_mapping(p).model_copy(update={"knobs": {"math_fidelity": "HiFi4"}}))  # type: ignore[arg-type]
    assert r.passed and r.status == "passed"
    q = _gemm("f32")
    r = validate(q, flat_mapping(q).model_copy(update={"knobs": {"math_fidelity": "HiFi4"}}))  # type: ignore[arg-type]
    assert r.status == "not-checked" and "f32 operands" in r.reason
