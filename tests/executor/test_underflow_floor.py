"""Results that underflow: the tolerance's absolute floor below the accumulator's smallest normal."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from costmodels.ir import Level, Loop, Mapping
from executor import mutations
from executor.tolerance import derive
from executor.validate import validate
from workload.einsum import einsum

TINY32 = float(ml_dtypes.finfo(np.float32).smallest_normal)
S32 = float(ml_dtypes.finfo(np.float32).smallest_subnormal)


def row_product(i: int, j: int, tile: int, acc: str = "f32") -> Mapping:
    """Rows of ``ij->i`` in one tile, ``j`` walked ``tile`` columns at a time."""
    return Mapping(
        levels=(
            Level(name="o", loops=(Loop(axis="j", factor=j // tile),)),
            Level(name="t", loops=(Loop(axis="i", factor=i), Loop(axis="j", factor=tile))),
        ),
        acc_dtype=acc,
    )


CASES = [("f32", 7, 4093, 1), ("f16", 1, 4093, 1), ("f32", 2000, 2500, 1)]


@pytest.mark.parametrize(("dtype", "i", "j", "tile"), CASES)
def test_a_long_row_product_that_underflows_passes(dtype: str, i: int, j: int, tile: int) -> None:
    p = einsum("ij->i", {"i": i, "j": j}, dtype=dtype, reduce_op="mul")
    r = validate(p, row_product(i, j, tile))
    # a float32 chain sticks at the smallest subnormal while its exact product is far below it
    assert r.max_abs_error > 0 and r.max_rel_error > 1e20
    assert r.passed, r.reason
    assert "underflow floor tiny_F+K*s_F" in r.tolerance_reason


@pytest.mark.parametrize("brk", ["drop_tile", "repeat_reduction_tile", "wrong_stride"])
def test_broken_row_products_still_fail_where_values_do_not_underflow(brk: str) -> None:
    p = einsum("ij->i", {"i": 7, "j": 256}, dtype="f32", reduce_op="mul")  # products ~1e-5: normal
    good = row_product(7, 256, 32)
    assert validate(p, good).passed
    broken = getattr(mutations, brk)(p, good)
    assert broken is not None
    r = validate(p, broken)
    assert not r.passed and r.failing_elements >= 1, r.reason  # the numbers show it, not only coverage


def test_the_floor_applies_only_below_the_accumulators_smallest_normal() -> None:
    tol, _ = derive(einsum("ij->i", {"i": 2, "j": 1000}, dtype="f32", reduce_op="mul"))
    assert tol.floor_below == TINY32 and tol.floor == TINY32 + 1000 * S32
    ref = np.array([0.0, TINY32, 2 * TINY32, 1.0])
    extra = tol.bound(ref, None) - (tol.atol + tol.rtol * ref)
    assert np.allclose(extra, [tol.floor, tol.floor, 0.0, 0.0], rtol=0, atol=1e-60)
    # a result of 3 tiny where the exact one underflows is outside it
    assert tol.bound(np.array([0.0]), None)[0] < 3 * TINY32


def test_floor_per_reduction_and_accumulator() -> None:
    add, _ = derive(einsum("mk,kn->mn", {"m": 2, "k": 100, "n": 2}, dtype="f32"))
    assert add.floor == 100 * S32  # K roundings of s/2 at most, never amplified
    top, _ = derive(einsum("ij->i", {"i": 2, "j": 100}, dtype="f32", reduce_op="max"))
    assert top.floor == S32  # one product, rounded once to f32 and once to the accumulator
    f16 = ml_dtypes.finfo(np.float16)
    narrow, reason = derive(einsum("ij->i", {"i": 2, "j": 31}, dtype="f16", reduce_op="mul"), "f16")
    assert narrow.floor_below == float(f16.smallest_normal)
    assert narrow.floor == float(f16.smallest_normal) + 31 * float(f16.smallest_subnormal)
    assert "s_F=5.96e-08" in reason
