"""How far a correct tiled result may lie from the exact reference, derived from the number formats.

The executor and the reference read the *same* rounded inputs (`random_inputs` yields values
already in their storage formats), so input rounding cancels out. What remains:

- **Products**: exact in float32 for bf16/f16/f8 inputs (at most 2 x 11 significand bits), one
  float32 rounding ``u32 * |a*b|`` per term for f32 inputs; exact for integers.
- **Accumulation** (add): ``K`` additions in the accumulator format. Each rounding error is at most
  ``u_acc`` times a partial sum, and a partial sum is at most ``S = sum |a*b|``. Modelled as
  independent errors (uniform in ``[-u, u]``, standard deviation ``u/sqrt(3)``) the total has a
  standard deviation below ``u_acc * sqrt(K/3) * S``; the bound ``4 * sqrt(K) * u_acc * S`` is about
  seven of those, so a correct mapping does not fail by chance. A dropped or duplicated tile of
  ``k`` terms moves the sum by about ``sqrt(k) * |a*b|``, orders of magnitude more, and a bf16
  accumulator (``u = 2**-8`` instead of ``2**-24``) exceeds it on a long reduction.
- **mul**: ``K`` roundings of a product, relative error up to ``K * u_acc``.
- **max / min**: the result is one of the products: exact but for f32 product rounding.
- **Output**: one rounding to the output format, ``u_out * |y|``, plus half the smallest subnormal
  of the output format (absolute error of results that underflow).
- **Underflow floor**: the relative bounds above hold for roundings in the normal range. A rounding
  whose result lies below the smallest normal ``tiny_F`` of its format F is off by up to half the
  subnormal spacing ``s_F`` *absolutely*, however small the result. F is the accumulator (the
  coarser of the problem's and the mapping's; its ``s_F`` is at least float32's, so it covers the
  float32 products too). Only elements whose exact result satisfies ``|ref| <= tiny_F`` (zero
  included) get an absolute ``floor`` on top; a partial that underflows on the way to a normal
  result is covered by the relative bound (``u_F * tiny_F = s_F / 2``). Per reduction:

  - *add*: at most K roundings into F (a product of f32 inputs or a step's partial rounded into a
    narrower accumulator), each off by at most ``s_F / 2``, and an addition whose result is
    subnormal is exact, so nothing amplifies them: ``floor = K * s_F`` is a worst-case bound.
  - *max / min*: the result is one product rounded once to f32 and once to F: ``floor = s_F``.
  - *mul*: at most 2K roundings (a product per term, a multiplication per term), each off by at
    most ``s_F / 2`` and then scaled by the product of the factors multiplied in after it. That
    scale depends on the mapping's order and has no order-free bound (a partial that flushes to
    zero and is then multiplied by large factors misses by all of the result), so the floor is
    statistical, like the add bound: ``floor = tiny_F + K * s_F``. ``K * s_F`` is the sum of the
    rounding errors at scale 1 (the validation's mul inputs are uniform in [0.5, 1.5], mean 1, so
    each scale is 1 in expectation); ``tiny_F`` covers a chain that dips below its final value,
    where the subnormal format's few bits cost a relative error that the final value then carries
    (a flush to zero costs at most ``|ref| <= tiny_F``). Measured on sequential chains of seeded
    uniform [0.5, 1.5] factors (20,000 per K): the worst error beyond the relative bound was
    2.4e-4 of this floor in float32 (K = 1500 to 4093) and 0.55 of it in float16 (K = 150 to 400;
    float16 has 10 subnormal bits, float32 23: the narrower the format, the nearer the floor).
    ``K * s_F`` alone is not enough: the same f32 chains reached 0.81 of it, float16 2.4 times it.

  The floor cannot hide a wrong result where values do not underflow: it applies only to elements
  whose exact result is below ``tiny_F``, where the format itself keeps no relative precision.

Integer problems must match the reference exactly.

The accumulator is the wider (larger unit roundoff) of the problem's declared one
(`Problem.acc_dtype`) and the mapping's (`Mapping.acc_dtype`): a mapping that accumulates in bf16
is judged against a bf16-accumulation bound, and the reason says so. Whether a narrower
accumulator than the problem declares is acceptable at all is `executor.validate`'s verdict, not
the tolerance's.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from pydantic import BaseModel, ConfigDict

from executor import numerics
from workload import block_layout, dtypes
from workload.problem import Problem

#: Safety factor on the random-walk accumulation bound (see the module docstring).
SIGMA_FACTOR = 4.0


class Tolerance(BaseModel):
    """``|y - ref| <= atol + rtol * |ref| + sum_rtol * sum|terms|`` per output element, plus `floor`
    where ``|ref| <= floor_below`` (results that underflow the accumulator; module docstring)."""

    model_config = ConfigDict(frozen=True)
    atol: float
    rtol: float
    sum_rtol: float = 0.0
    exact: bool = False
    floor: float = 0.0
    floor_below: float = 0.0

    def bound(self, ref: np.ndarray, abs_sum: np.ndarray | None) -> np.ndarray:
        """The allowed ``|y - ref|`` per element of the exact reference `ref` (float64)."""
        r = np.abs(ref)
        out = self.atol + self.rtol * r
        if abs_sum is not None and self.sum_rtol:
            out = out + self.sum_rtol * abs_sum
        if self.floor:
            out = out + np.where(r <= self.floor_below, self.floor, 0.0)
        return np.asarray(out, dtype=np.float64)


def underflow_floor(problem: Problem, acc: str, k: int) -> tuple[float, float, str]:
    """(floor, the |ref| it applies below, its text) of accumulator `acc` (module docstring)."""
    plain = not dtypes.is_block(acc) and not dtypes.info(acc).is_int
    info = ml_dtypes.finfo(dtypes.info(acc).numpy if plain else np.float32)
    f32 = ml_dtypes.finfo(np.float32)
    s = max(float(info.smallest_subnormal), float(f32.smallest_subnormal))
    tiny = max(float(info.smallest_normal), float(f32.smallest_normal))
    if problem.reduce_op == "add":
        return k * s, tiny, f"K*s_F (s_F={s:.3g}) where |ref| <= tiny_F={tiny:.3g}"
    if problem.reduce_op == "mul":
        return tiny + k * s, tiny, f"tiny_F+K*s_F (s_F={s:.3g}) where |ref| <= tiny_F={tiny:.3g}"
    return s, tiny, f"s_F={s:.3g} where |ref| <= tiny_F={tiny:.3g}"


def _packed_text(problem: Problem) -> str:
    """What the reason says of block-float inputs: where each one's blocks of 16 lie (`block_layout.describe`)."""
    blocks = [i for i, o in enumerate(problem.inputs) if dtypes.is_block(o.dtype)]
    if not blocks:
        return ""
    names = ", ".join(f"{problem.inputs[i].name} {problem.inputs[i].dtype}" for i in blocks)
    where = {i: block_layout.describe(problem, i) for i in blocks}
    if set(where.values()) == {"along the last dimension"}:
        along = " along the last dimension,"
    else:
        along = ", " + "; ".join(f"{problem.inputs[i].name}'s {text}" for i, text in where.items()) + ";"
    return (
        f"inputs packed as tt-metal packs them ({names}: one exponent per 16 values{along} mantissas rounded "
        "to nearest even, saturating), the same packed values in the run and the reference, so the bound is the "
        "accumulation's: "
    )


def reduction_length(problem: Problem) -> int:
    """Terms reduced into each output element (product of the reduction axis sizes)."""
    return math.prod(problem.axes[a] for a in problem.reduction_axes)


def derive(problem: Problem, acc_dtype: str | None = None) -> tuple[Tolerance, str]:
    """The tolerance of `problem` and the reason for it, from its dtypes and reduction length.

    Args:
        problem: the problem; its declared accumulator (`Problem.acc_dtype`) is the default.
        acc_dtype: the accumulator of the mapping being validated; when it rounds more coarsely
            than the problem's, the accumulation bound uses it and the reason names both.
    """
    out = problem.output.dtype
    if numerics.is_int_problem(problem) and dtypes.info(out).is_int:
        return Tolerance(atol=0.0, rtol=0.0, exact=True), "integer inputs and output: must match exactly"
    k = reduction_length(problem)
    acc = coarse = problem.acc_dtype
    u_acc = numerics.unit_roundoff(acc) or numerics.unit_roundoff("f32")
    acc_text = f"{acc}, u={u_acc:.3g}"
    if acc_dtype is not None and numerics.unit_roundoff(acc_dtype) > u_acc:
        u_acc, coarse = numerics.unit_roundoff(acc_dtype), acc_dtype
        acc_text = f"{acc_dtype}, u={u_acc:.3g}: the mapping accumulates in {acc_dtype}, the problem declares {acc}"
    u_prod = numerics.unit_roundoff("f32") if any(o.dtype == "f32" for o in problem.inputs) else 0.0
    packed = _packed_text(problem)
    info = dtypes.info(out)
    u_out = 0.0 if info.is_int else numerics.unit_roundoff(out)
    atol = 0.5 if info.is_int else float(ml_dtypes.finfo(info.numpy).smallest_subnormal) / 2.0
    floor, below, floor_text = underflow_floor(problem, coarse, k)
    out_part = f"output rounding to {out} (u={u_out:.3g}); underflow floor {floor_text}"
    under = {"floor": floor, "floor_below": below}
    if problem.reduce_op == "add":
        sum_rtol = SIGMA_FACTOR * math.sqrt(k) * u_acc + u_prod
        reason = packed + (
            f"{SIGMA_FACTOR:g}*sqrt(K={k})*u_acc({acc_text}) of sum|terms|"
            f"{' plus f32 product rounding' if u_prod else ' (products exact)'}, plus {out_part}"
        )
        return Tolerance(atol=atol, rtol=u_out, sum_rtol=sum_rtol, **under), reason
    if problem.reduce_op == "mul":
        rtol = k * u_acc + u_prod * k + u_out
        reason = f"{packed}K={k} roundings of a product in {acc_text}, plus {out_part}"
        return Tolerance(atol=atol, rtol=rtol, **under), reason
    return (
        Tolerance(atol=atol, rtol=u_prod + u_out, **under),
        f"{packed}{problem.reduce_op} selects one product (exact{' but for f32 product rounding' if u_prod else ''}), "
        f"plus {out_part}",
    )
