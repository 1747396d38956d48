"""Number formats of the executor: storage, compute and accumulator types, and dummy fill values.

All conversions go through numpy / ml_dtypes casts (``bfloat16``, ``float8_e4m3fn``,
``float8_e5m2``, ``int4``); there are no hand-written bit manipulations. Behaviour at the range
limits is that of ml_dtypes, which this module documents and the tests pin down:

- ``float8_e4m3fn`` has no infinity: a value that rounds past 448 (|x| > 464) becomes NaN;
  values in (448, 464] round down to 448 (464 is a tie, rounded to the even 448).
- ``float8_e5m2`` overflows to +-inf past 57344 (|x| >= 61440).
- ``bfloat16`` and ``float16`` overflow to +-inf.
- ``int4`` and ``int8`` *wrap* in two's complement when cast from wider integers (9 -> -7); an
  accumulator narrower than its sums therefore wraps, like the hardware's i32 accumulator does
  at 2**31. Narrowing an i32 *result* to an i8/i4 output saturates instead, like the reference's
  `cast_output` (requantisation clamps).

Operands are cast once to a *compute type* (`compute_dtype`): float32 for float inputs (products
of bf16/f16/f8 values are exact in float32, so a float32 BLAS call multiplies like the hardware
and accumulates in float32), float64 for integer contractions whose sums stay below 2**53 (exact,
and BLAS-fast), int64 otherwise.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from workload import blockfloat, dtypes
from workload.problem import Problem
from workload.reference import int_output

#: Largest power of two used as the dummy value of a float format (2**60 for bf16/f32):
#: large enough that a dummy reaching a sum is plainly visible, small enough that a dummy
#: times a dummy (2**120) stays finite in the float32 accumulator and dummy * 0 == 0.
_DUMMY_FLOAT_CAP = 2.0**60


def storage_dtype(name: str) -> np.dtype:
    """numpy/ml_dtypes storage dtype of a canonical dtype name."""
    return dtypes.info(name).numpy


def to_storage(values: np.ndarray, name: str, packing: blockfloat.Packing = blockfloat.ALONG_LAST) -> np.ndarray:
    """Convert `values` to the storage format `name` with one ml_dtypes/numpy cast.

    Floats round to nearest even; see the module docstring for overflow (NaN for e4m3fn, inf
    otherwise) and integer wrapping (int4/int8 wrap in two's complement). Block floats (bfloat8_b,
    bfloat4_b) are packed as tt-metal packs them (`workload.blockfloat.quantize`), held in float32,
    their blocks where `packing` puts them (an operand's: `workload.block_layout.block_packing`).
    """
    if dtypes.is_block(name):  # tt-metal's packing: shared exponent per 16 along the packed run
        return blockfloat.quantize(np.asarray(values, dtype=np.float64).astype(np.float32), name, packing)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values).astype(storage_dtype(name))


def dummy_value(name: str, reduce_op: str = "add") -> float:
    """The garbage value dummy (``#``) padding holds in format `name`.

    Finite (so that a dummy times a zero-filled ``z`` partner is exactly 0, as ``1+1#``
    contracted with ``1+1z`` requires) and as large as the format allows within
    `_DUMMY_FLOAT_CAP`, so that a dummy that reaches a result is visible. Negative for a
    ``min`` reduction, so that it wins the reduction when it leaks in.
    """
    info = dtypes.info(name)
    if info.is_int:
        value = float(ml_dtypes.iinfo(info.numpy).max) if info.bits < 32 else float(2**30)
    else:
        top = float(ml_dtypes.finfo(info.numpy).max)
        value = min(_DUMMY_FLOAT_CAP, 2.0 ** math.floor(math.log2(top)))
    return -value if reduce_op == "min" else value


def is_int_problem(problem: Problem) -> bool:
    """True when every input is an integer format (the problem accumulates in i32)."""
    return all(dtypes.info(o.dtype).is_int for o in problem.inputs)


def magnitude_bits(name: str) -> int:
    """Bits of the largest magnitude of an integer format (7 for i8, 3 for i4)."""
    return dtypes.info(name).bits - 1


def compute_dtype(problem: Problem) -> np.dtype:
    """The type operands are cast to once before execution (see the module docstring)."""
    if not is_int_problem(problem):
        return np.dtype(np.float32)
    if problem.reduce_op != "add":
        return np.dtype(np.int64)
    reduced = math.prod(problem.axes[a] for a in problem.reduction_axes)
    bits = sum(magnitude_bits(o.dtype) + 1 for o in problem.inputs) + math.ceil(math.log2(max(reduced, 1)))
    return np.dtype(np.float64) if bits <= 52 else np.dtype(np.int64)


def to_compute(array: np.ndarray, compute: np.dtype) -> np.ndarray:
    """Cast a storage-format array to the compute type (exact for every supported pair)."""
    return np.asarray(array).astype(compute)


def acc_numpy(acc_dtype: str) -> np.dtype:
    """numpy type partial sums are carried in: float32 for float accumulators, int64 for integers.

    Narrower accumulators (bf16, f16, i8...) are carried in these types and rounded or wrapped
    to their format after every accumulation step by `round_acc`.
    """
    return np.dtype(np.int64) if dtypes.info(acc_dtype).is_int else np.dtype(np.float32)


def round_acc(values: np.ndarray, acc_dtype: str) -> np.ndarray:
    """Round (floats) or wrap (integers) partial sums to the accumulator format.

    Integer partial sums arrive as exact int64 (or float64 holding an exact integer) and wrap
    modulo 2**bits in two's complement; float partial sums arrive in float32 and round to nearest
    even in the accumulator format, returned widened to float32.
    """
    info = dtypes.info(acc_dtype)
    arr = np.asarray(values)
    if info.is_int:
        ints = np.rint(arr).astype(np.int64) if arr.dtype.kind == "f" else arr.astype(np.int64)
        return ints.astype(info.numpy).astype(np.int64)
    f32 = arr.astype(np.float32)
    if info.numpy == np.float32:
        return f32
    with np.errstate(over="ignore", invalid="ignore"):
        return f32.astype(info.numpy).astype(np.float32)


def to_output(values: np.ndarray, out_dtype: str) -> np.ndarray:
    """Convert final accumulator values to the output format.

    Float outputs round once to nearest even from the float32 (or integer) accumulator. Integer
    outputs go through the reference's `int_output` (the accumulator has already wrapped to its
    own width): i32 keeps the value, i8/i4 saturate, float accumulators round to an integer first.
    """
    info = dtypes.info(out_dtype)
    arr = np.asarray(values)
    if not info.is_int:
        with np.errstate(over="ignore", invalid="ignore"):
            return arr.astype(info.numpy)
    return int_output(arr, out_dtype)


def unit_roundoff(name: str) -> float:
    """Unit roundoff ``u = 2**-p`` of a float format with p significand bits (0 for integers)."""
    info = dtypes.info(name)
    if info.is_int:
        return 0.0
    if info.block:  # relative to the block's largest value, whose leading 1 is the mantissa's top bit
        return 2.0 ** -(blockfloat.FORMATS[info.name].mantissa_bits)
    return float(ml_dtypes.finfo(info.numpy).eps) / 2.0
