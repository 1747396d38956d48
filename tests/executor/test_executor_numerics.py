"""Number formats of the executor: ml_dtypes conversions at their range limits, dummy values, rounding."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from executor import numerics
from workload.einsum import einsum


def test_e4m3fn_overflow_is_nan_and_values_up_to_464_round_to_448() -> None:
    y = numerics.to_storage(np.array([448.0, 464.0, 470.0, 1e6, np.inf], np.float32), "f8e4m3")
    assert y.dtype == ml_dtypes.float8_e4m3fn
    assert float(y[0]) == 448.0 and float(y[1]) == 448.0
    assert np.isnan(y[2:].astype(np.float32)).all()


def test_e5m2_and_bf16_overflow_to_inf() -> None:
    assert np.isinf(numerics.to_storage(np.array([61440.0]), "f8e5m2").astype(np.float32)).all()
    assert np.isinf(numerics.to_storage(np.array([1e39]), "bf16").astype(np.float32)).all()


def test_int4_and_int8_wrap_in_twos_complement() -> None:
    assert numerics.to_storage(np.array([7, 8, 9, -9, 16]), "i4").astype(int).tolist() == [7, -8, -7, 7, 0]
    assert numerics.to_storage(np.array([127, 128, -129]), "i8").astype(int).tolist() == [127, -128, 127]


@pytest.mark.parametrize("dtype", ["i4", "i8", "f8e4m3", "f8e5m2", "bf16", "f16", "f32"])
def test_dummy_value_is_finite_representable_and_vanishes_against_zero(dtype: str) -> None:
    d = numerics.dummy_value(dtype)
    stored = numerics.to_storage(np.array([d]), dtype).astype(np.float64)[0]
    assert stored == d and np.isfinite(d) and d > 0
    assert np.float32(d) * np.float32(0.0) == 0.0
    # dummy x dummy stays finite in the f32 accumulator, so a leak shows as a huge value, not NaN
    assert np.isfinite(np.float32(d) * np.float32(d))
    assert numerics.dummy_value(dtype, "min") == -d


def test_dummy_is_larger_than_any_random_float_input() -> None:
    assert numerics.dummy_value("bf16") >= 2.0**59 and numerics.dummy_value("f8e4m3") == 256.0


def test_round_acc_bf16_loses_what_bf16_loses_and_i8_wraps() -> None:
    x = np.array([1.0 + 2.0**-9, 256.0 + 1.0], np.float32)
    assert numerics.round_acc(x, "bf16").tolist() == [1.0, 256.0]
    assert numerics.round_acc(x, "f32").tolist() == x.tolist()
    assert numerics.round_acc(np.array([130, -130]), "i8").tolist() == [-126, 126]
    assert numerics.round_acc(np.array([2**31]), "i32").tolist() == [-(2**31)]


def test_to_output_saturates_narrow_integers_and_rounds_floats_once() -> None:
    assert numerics.to_output(np.array([300, -300, 5]), "i8").tolist() == [127, -128, 5]
    assert numerics.to_output(np.array([1.0 + 2.0**-8], np.float32), "bf16").astype(np.float32)[0] == 1.0


def test_compute_type_exact_for_integer_sums_and_float32_for_floats() -> None:
    p8 = einsum("mk,kn->mn", {"m": 4, "k": 4096, "n": 4}, dtype="i8")
    assert numerics.compute_dtype(p8) == np.float64
    p32 = einsum("mk,kn->mn", {"m": 4, "k": 4096, "n": 4}, dtype="i32")
    assert numerics.compute_dtype(p32) == np.int64
    assert numerics.compute_dtype(einsum("mk,kn->mn", {"m": 4, "k": 4, "n": 4}, dtype="bf16")) == np.float32


def test_unit_roundoff_of_formats() -> None:
    assert numerics.unit_roundoff("f32") == 2.0**-24
    assert numerics.unit_roundoff("bf16") == 2.0**-8
    assert numerics.unit_roundoff("f8e4m3") == 2.0**-4
    assert numerics.unit_roundoff("i8") == 0.0
