"""Reference evaluation of any problem in numpy: the ground truth the executor is checked against.

The result is computed before the final cast. Float problems are evaluated in float64: inputs
upcast exactly and every product of two inputs (even f32 x f32) is exact, so only the float64
sums (or chains of products) round, far below any storage format's precision. Integer problems
are exact: sums whose partial sums provably stay below 2**53 run in float64 (BLAS), others in
int64; add/mul reductions wrap modulo 2**64, which keeps the value modulo 2**32 exact, so
`cast_output` to a wrapping i32 accumulator is exact too.

Index expressions are applied with stride tricks: each input is zero-padded, then viewed with
one dimension per axis it is indexed by (an axis's stride is the sum of ``coeff * stride`` over
the dimensions it appears in), so a sliding window ``oh:2 + fh:3`` costs no copy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from workload import blockfloat, dtypes
from workload.block_layout import block_packing
from workload.errors import ProblemError
from workload.problem import Problem

#: Elements of the broadcast product materialised at once by the mul/max/min path.
CHUNK_ELEMENTS = 1 << 20

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def padded_input(problem: Problem, index: int, array: np.ndarray) -> np.ndarray:
    """Apply input ``index``'s zero padding to its real tensor.

    Args:
        problem: the problem.
        index: which input (0 or 1).
        array: the real (unpadded) data, shape ``problem.shape(problem.inputs[index])``.

    Returns:
        A new C-contiguous array of ``problem.padded_shape(operand)`` in the array's dtype: ``lo``
        zeros, the data, ``hi`` zeros per dimension; a negative ``hi`` drops the trailing ``-hi``
        elements no index reads.
    """
    op = problem.inputs[index]
    want = problem.shape(op)
    arr = np.asarray(array)
    if arr.shape != want:
        raise ProblemError(
            f"input {op.name} has shape {arr.shape}, the problem expects {want}",
            token=op.name,
            hint="pass the real (unpadded) tensor",
        )
    pads = op.pads()
    crop = tuple(slice(0, n + min(hi, 0)) for n, (_, hi) in zip(arr.shape, pads, strict=True))
    widths = tuple((lo, max(hi, 0)) for lo, hi in pads)
    return np.array(np.pad(arr[crop], widths, mode="constant", constant_values=0), order="C")


def _round_to_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round float64 values to `dtype` with round-to-nearest-even (no double rounding)."""
    x = np.asarray(values, dtype=np.float64)
    target = dtypes.info(dtype).numpy
    if target == np.float32 or target == np.float64:
        return x.astype(target)
    # float64 -> float32 with round-to-odd, then float32 -> target with RNE, is correctly rounded
    # for any target with at least two bits less precision than float32 (all of ours).
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float32)
        inexact = np.isfinite(r) & (r.astype(np.float64) != x)
        toward_zero = inexact & (np.abs(r.astype(np.float64)) > np.abs(x))
        r = np.where(toward_zero, np.nextafter(r, np.float32(0)), r)
        bits = r.view(np.uint32)
        r = np.where(inexact, (bits | np.uint32(1)).view(np.float32), r)
    return np.asarray(r).astype(target)


def random_inputs(problem: Problem, rng: np.random.Generator, *, pack_blocks: bool = True) -> list[np.ndarray]:
    """Random real (unpadded) input tensors in their storage dtypes.

    Floats are uniform in [-2, 2] (in [0.5, 1.5] for a mul reduction, so products neither vanish
    nor overflow) rounded to the dtype (block floats: to float32, then packed in blocks of 16 where
    tt-metal packs the operand, `workload.block_layout.block_packing`: along its last dimension, a
    grouped conv's activation along its channels C = g x ci; with ``pack_blocks=False`` the same
    draws are returned as the float32 values before packing); i4 and i8 span their full range; i32 stays in
    [-1024, 1024] so that long integer sums cannot approach the accumulator's range (mul
    reductions of integers use [-2, 2]).
    """
    out: list[np.ndarray] = []
    for index, op in enumerate(problem.inputs):
        info = dtypes.info(op.dtype)
        shape = problem.shape(op)
        if info.is_int:
            if problem.reduce_op == "mul":
                lo, hi = -2, 2
            elif info.bits <= 8:
                lo, hi = -(1 << (info.bits - 1)), (1 << (info.bits - 1)) - 1
            else:
                lo, hi = -1024, 1024
            out.append(rng.integers(lo, hi, size=shape, endpoint=True).astype(info.numpy))
        else:
            lo_f, hi_f = (0.5, 1.5) if problem.reduce_op == "mul" else (-2.0, 2.0)
            values = _round_to_dtype(rng.uniform(lo_f, hi_f, size=shape), op.dtype)
            if info.block and pack_blocks:  # float32 values packed as tt-metal packs them (shared exponent per 16)
                values = blockfloat.quantize(values, op.dtype, block_packing(problem, index))
            out.append(values)
    return out


def _is_int_problem(problem: Problem) -> bool:
    return problem.acc_dtype == "i32"


def _axis_view(problem: Problem, index: int, array: np.ndarray, work: type) -> tuple[np.ndarray, tuple[str, ...]]:
    """Input `index` converted to `work`, padded and viewed per axis (see `axis_view`)."""
    return axis_view(problem, index, padded_input(problem, index, np.asarray(array).astype(work)))


def axis_view(problem: Problem, index: int, padded: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """A padded input viewed with one dimension per axis it is indexed by, in `operand.axes` order (no copy)."""
    op = problem.inputs[index]
    axes = op.axes
    strides = dict.fromkeys(axes, 0)
    for d, expr in enumerate(op.dims):
        for t in expr.terms:
            strides[t.axis] += t.coeff * padded.strides[d]
    shape = tuple(problem.axes[a] for a in axes)
    view = as_strided(padded, shape=shape, strides=tuple(strides[a] for a in axes), writeable=False)
    return view, axes


def aligned(view: np.ndarray, axes: Sequence[str], order: Sequence[str]) -> np.ndarray:
    """Transpose a view to the global axis order and insert size-1 dimensions for absent axes."""
    perm = sorted(range(len(axes)), key=lambda i: order.index(axes[i]))
    v = view.transpose(perm)
    missing = tuple(i for i, a in enumerate(order) if a not in axes)
    return np.expand_dims(v, missing) if missing else v


def _block_sizes(problem: Problem, budget: int) -> dict[str, int]:
    """Block size per axis so that one block has at most `budget` points; reduction axes fill first."""
    pref = list(problem.free_axes) + list(problem.reduction_axes)
    blk: dict[str, int] = {}
    room = max(1, budget)
    for a in reversed(pref):
        blk[a] = max(1, min(problem.axes[a], room))
        room = max(1, room // blk[a])
    return blk


def _reduce_chunked(problem: Problem, views: list[np.ndarray], work: type) -> np.ndarray:
    """mul/max/min reduction of the elementwise product, a bounded block of points at a time."""
    order = list(problem.axes)
    ufunc = {"mul": np.multiply, "max": np.maximum, "min": np.minimum}[problem.reduce_op]
    free = [a for a in order if a in problem.free_axes]
    red_pos = tuple(i for i, a in enumerate(order) if a not in problem.free_axes)
    if problem.reduce_op == "mul":
        ident: float | int = 1
    elif work is np.int64:
        ident = int(np.iinfo(np.int64).min if problem.reduce_op == "max" else np.iinfo(np.int64).max)
    else:
        ident = -math.inf if problem.reduce_op == "max" else math.inf
    result: np.ndarray = np.full(tuple(problem.axes[a] for a in free), ident, dtype=work)
    blk = _block_sizes(problem, CHUNK_ELEMENTS)
    starts = [range(0, problem.axes[a], blk[a]) for a in order]
    for start in itertools.product(*starts):
        sl = [slice(s, s + blk[a]) for s, a in zip(start, order, strict=True)]
        block: np.ndarray | None = None
        for v in views:
            part = v[tuple(sl[i] if v.shape[i] > 1 else slice(None) for i in range(len(order)))]
            block = part if block is None else block * part
        assert block is not None
        reduced = ufunc.reduce(block, axis=red_pos)
        out_sl = tuple(sl[order.index(a)] for a in free)
        result[out_sl] = ufunc(result[out_sl], reduced)
    perm = [free.index(a) for a in problem.free_axes]
    return result.transpose(perm)


_F64_EXACT = 1 << 53


def _sum_bound(problem: Problem, inputs: Sequence[np.ndarray]) -> int:
    """An upper bound of |any partial sum| of an add problem: max |product| times the points reduced."""
    peak = 1
    for arr in inputs:
        a = np.asarray(arr)
        peak *= int(np.abs(a.astype(np.int64)).max()) if a.size else 0
    return peak * math.prod(problem.axes[a] for a in problem.reduction_axes)


def _einsum_add(problem: Problem, inputs: Sequence[np.ndarray], work: type) -> np.ndarray:
    """Sum of the elementwise product over the reduction axes, by np.einsum on the axis views."""
    views = [_axis_view(problem, i, arr, work) for i, arr in enumerate(inputs)]
    letter = {a: _LETTERS[i] for i, a in enumerate(problem.axes)}
    subs = ",".join("".join(letter[a] for a in axes) for _, axes in views)
    subs += "->" + "".join(letter[a] for a in problem.free_axes)
    operands = [v for v, _ in views]
    return np.asarray(np.einsum(subs, *operands, optimize=len(operands) > 1))


def evaluate(problem: Problem, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """The exact result of `problem` on `inputs`, before the cast to the output dtype.

    Args:
        problem: any valid problem (unary or binary, any reduce op, affine indices, padding).
        inputs: the real (unpadded) input tensors, one per input, any numeric dtype.

    Returns:
        An array of the output's shape: float64 for float problems, int64 for integer ones.
    """
    if len(inputs) != len(problem.inputs):
        raise ProblemError(f"{len(inputs)} input tensors given, the problem has {len(problem.inputs)}")
    work: type = np.int64 if _is_int_problem(problem) else np.float64
    if problem.reduce_op != "add":
        views = [_axis_view(problem, i, arr, work) for i, arr in enumerate(inputs)]
        order = list(problem.axes)
        result = _reduce_chunked(problem, [aligned(v, axes, order) for v, axes in views], work)
    elif work is np.int64 and _sum_bound(problem, inputs) < _F64_EXACT:
        # Every partial sum is an integer below 2**53 in magnitude, so float64 (BLAS) is exact.
        result = np.rint(_einsum_add(problem, inputs, np.float64)).astype(np.int64)
    else:
        result = _einsum_add(problem, inputs, work)
    return np.array(result, dtype=work, order="C").reshape(problem.shape(problem.output))


def cast_output(problem: Problem, result: np.ndarray) -> np.ndarray:
    """Convert an exact result to the output dtype.

    Floats round to nearest even (correctly, from float64; f8e4m3 overflows to NaN as the format
    has no infinity). Integer outputs follow `int_output`: an integer problem's result first wraps
    to its i32 accumulator (like the executor's accumulator), then i32 keeps it and i8/i4 saturate.
    """
    dt = problem.output.dtype
    info = dtypes.info(dt)
    arr = np.asarray(result)
    if not info.is_int:
        return _round_to_dtype(arr.astype(np.float64), dt)
    acc = dtypes.info(problem.acc_dtype)
    return int_output(arr, dt, wrap_bits=acc.bits if acc.is_int else None)


def int_output(values: np.ndarray, out_dtype: str, *, wrap_bits: int | None = None) -> np.ndarray:
    """Narrow accumulated values to an integer output format (shared by the reference and the executor).

    In order: float values round to the nearest integer (NaN reads as 0, magnitudes clip at
    2**62); the integer wraps in two's complement to `wrap_bits` (the integer accumulator's width,
    None when it is already in range); an i32 output keeps the value modulo 2**32; i8 and i4
    outputs saturate (requantisation clamps). Wrapping therefore happens only in the accumulator
    and saturation only at the narrowing to the output, in the reference and the executor alike.
    """
    info = dtypes.info(out_dtype)
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        limit = float(2**62)
        arr = np.clip(np.nan_to_num(np.rint(arr), nan=0.0), -limit, limit)
    ints = arr.astype(np.int64)
    if wrap_bits is not None and wrap_bits < 64:
        ints = _wrap(ints, wrap_bits)
    if info.bits == 32:
        return ints.astype(np.int32)  # numpy integer casts wrap modulo 2**32
    lo, hi = -(1 << (info.bits - 1)), (1 << (info.bits - 1)) - 1
    return np.clip(ints, lo, hi).astype(info.numpy)


def _wrap(ints: np.ndarray, bits: int) -> np.ndarray:
    """Two's complement wrap of int64 values to `bits` bits."""
    span = np.int64(1) << np.int64(bits)
    half = np.int64(1) << np.int64(bits - 1)
    return ((ints + half) & (span - 1)) - half
