"""tt-metal's block-float formats: hand-computed packings, the layout of the blocks, and properties.

Facts (see workload/blockfloat.py): tt-metal ``blockfloat_common.cpp`` ``convert_u32_to_bfp`` (the
24-bit significand shifted right by ``shared_exp - exp``, rounded to 7 bits (bfloat8_b) / 3 bits
(bfloat4_b) to nearest with ties to even, saturating at ``2**W - 1``), ``get_max_exp`` (the block's
largest exponent), ``pack_fp32_vec_as_bfp_tiles`` (blocks are 16 values of a face row);
``tt-metalium/constants.hpp`` ``BFLOAT8_B_TILE_HW = TILE_HW + 64``, ``BFLOAT4_B_TILE_HW = TILE_HW / 2 + 64``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from workload import blockfloat, dtypes
from workload.einsum import einsum
from workload.errors import ProblemError


def _block(*head: float) -> np.ndarray:
    """A block of 16 whose largest value is 1.0 (shared exponent 127), `head` first."""
    return np.array([*head, *([1.0] * (16 - len(head)))], dtype=np.float32)


@pytest.mark.parametrize(
    ("x", "bf8", "bf4"),
    [
        (1.0 + 2**-7, 1.0, 1.0),  # bf8: 64.5 units of 2**-6: a tie, rounded to the even 64
        (1.0 + 3 * 2**-7, 1.0 + 2**-5, 1.0),  # bf8: 65.5, a tie rounded up to the even 66
        (1.999, 127 / 64, 7 / 4),  # rounds to 2**W: saturates at the largest mantissa, exponent unchanged
        (2**-8, 0.0, 0.0),  # 2**15 left after the shift, under half a unit: underflows to zero
        (1.5 * 2**-7, 2**-6, 0.0),  # bf8: 0.75 of a unit rounds up to one unit
        (-0.5, -0.5, -0.5),  # exact values keep their sign
        (0.3, 19 / 64, 0.25),  # 0.3 * 64 = 19.2 -> 19; 0.3 * 4 = 1.2 -> 1
        (1.3, 83 / 64, 1.25),  # 83.2 -> 83; 5.2 -> 5
    ],
)
def test_hand_computed_packings(x: float, bf8: float, bf4: float) -> None:
    values = _block(x)
    assert blockfloat.quantize(values, "bfloat8_b")[0] == np.float32(bf8)
    assert blockfloat.quantize(values, "bfloat4_b")[0] == np.float32(bf4)


def test_a_block_is_16_values_along_the_last_axis() -> None:
    small = np.float32(1.0 + 2**-9)  # alone in its block it keeps 7 significant bits: 1.0
    row = np.array([small * 2**-10] * 16 + [1.0] * 16, dtype=np.float32)
    q = blockfloat.quantize(row, "bfloat8_b")
    # the first block's exponent is its own (2**-10), so its values keep their precision
    np.testing.assert_array_equal(q[:16], np.float32(2**-10))
    mixed = row.copy()
    mixed[15] = 1.0  # now the first block's largest value is 1.0: 2**-10 is far below half a unit
    assert blockfloat.quantize(mixed, "bfloat8_b")[:15].tolist() == [0.0] * 15
    # blocks run along the last axis: the same numbers down a column each get their own exponent
    col = row.reshape(32, 1)
    np.testing.assert_array_equal(blockfloat.quantize(col, "bfloat8_b").ravel()[:16], np.float32(2**-10))
    np.testing.assert_array_equal(blockfloat.shared_exponents(row), [117, 127])


def test_a_short_last_block_is_padded_with_zeros() -> None:
    x = np.array([*([1.0] * 16), 0.3], dtype=np.float32)  # 0.3 alone: exponent 125, 0.3 * 2**8 = 76.8 -> 77
    q = blockfloat.quantize(x, "bfloat8_b")
    assert q.shape == x.shape and q[-1] == np.float32(77 / 256)


def test_zeros_and_shapes() -> None:
    assert not blockfloat.quantize(np.zeros((2, 3, 17)), "bfloat4_b").any()
    assert blockfloat.quantize(np.float32(1.3), "bfloat8_b") == np.float32(83 / 64)
    neg = blockfloat.quantize(np.array([-0.0, 1.0], np.float32), "bfloat8_b")
    assert neg.tolist() == [0.0, 1.0]


def test_tile_bytes_include_the_exponent_section() -> None:
    assert dtypes.info("bfloat8_b").bytes * 1024 == 1088  # constants.hpp BFLOAT8_B_TILE_HW
    assert dtypes.info("bfloat4_b").bytes * 1024 == 576  # constants.hpp BFLOAT4_B_TILE_HW
    assert dtypes.nbytes("bfloat8_b", 32 * 32 * 3) == 3 * 1088
    assert dtypes.canonical_dtype("bfp8_b") == "bfloat8_b" and dtypes.canonical_dtype("BF4_B") == "bfloat4_b"
    assert dtypes.accumulator_of(["bfloat8_b", "bfloat4_b"]) == "f32"


def test_a_block_float_output_is_refused_with_a_fix() -> None:
    with pytest.raises(ProblemError) as e:
        einsum("mk,kn->mn", {"m": 4, "k": 4, "n": 4}, dtype="bfloat8_b", out_dtype="bfloat8_b")
    assert "inputs only" in str(e.value.hint) and "bf16" in str(e.value.hint)


FINITE = st.floats(-(2.0**100), 2.0**100, allow_nan=False, width=32).filter(lambda v: v == 0 or abs(v) > 1e-30)


@settings(max_examples=200, deadline=None)
@given(x=arrays(np.float32, st.integers(1, 40), elements=FINITE), fmt=st.sampled_from(["bfloat8_b", "bfloat4_b"]))
def test_packing_is_idempotent_odd_and_within_one_unit_of_its_block(x: np.ndarray, fmt: str) -> None:
    q = blockfloat.quantize(x, fmt)
    np.testing.assert_array_equal(blockfloat.quantize(q, fmt), q)  # a packed value packs to itself
    np.testing.assert_array_equal(blockfloat.quantize(-x, fmt), -q)  # rounding is symmetric in the sign
    np.testing.assert_array_equal(blockfloat.shared_exponents(q), blockfloat.shared_exponents(x))
    unit = blockfloat.unit(x, fmt)
    err = np.abs(q.astype(np.float64) - x.astype(np.float64))
    assert (err <= unit).all()  # saturation can cost up to one unit of the block
    # without saturation, half a unit plus the bits the exponent shift dropped (below 2**-17 units)
    top = (1 << blockfloat.FORMATS[fmt].mantissa_bits) - 1
    unsaturated = np.abs(q) < top * unit
    assert (err[unsaturated] <= unit[unsaturated] * (0.5 + 2.0**-16)).all()
