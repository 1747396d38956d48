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
from pydantic import BaseModel, ConfigDict

from executor import numerics
from workload import dtypes
from workload.problem import Problem

#: Safety factor on the random-walk accumulation bound (see the module docstring).
SIGMA_FACTOR = 4.0


class Tolerance(BaseModel):
    """``|y - ref| <= atol + rtol * |ref| + sum_rtol * sum|terms|`` per output element."""

    model_config = ConfigDict(frozen=True)
    atol: float
    rtol: float
    sum_rtol: float = 0.0
    exact: bool = False


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
    acc = problem.acc_dtype
    u_acc = numerics.unit_roundoff(acc) or numerics.unit_roundoff("f32")
    acc_text = f"{acc}, u={u_acc:.3g}"
    if acc_dtype is not None and numerics.unit_roundoff(acc_dtype) > u_acc:
        u_acc = numerics.unit_roundoff(acc_dtype)
        acc_text = f"{acc_dtype}, u={u_acc:.3g}: the mapping accumulates in {acc_dtype}, the problem declares {acc}"
    u_prod = numerics.unit_roundoff("f32") if any(o.dtype == "f32" for o in problem.inputs) else 0.0
    blocks = [f"{o.name} {o.dtype}" for o in problem.inputs if dtypes.is_block(o.dtype)]
    packed = (
        f"inputs packed as tt-metal packs them ({', '.join(blocks)}: one exponent per 16 values along the last "
        "dimension, mantissas rounded to nearest even, saturating), the same packed values in the run and the "
        "reference, so the bound is the accumulation's: "
        if blocks
        else ""
    )
    info = dtypes.info(out)
    u_out = 0.0 if info.is_int else numerics.unit_roundoff(out)
    atol = 0.5 if info.is_int else float(ml_dtypes.finfo(info.numpy).smallest_subnormal) / 2.0
    out_part = f"output rounding to {out} (u={u_out:.3g})"
    if problem.reduce_op == "add":
        sum_rtol = SIGMA_FACTOR * math.sqrt(k) * u_acc + u_prod
        reason = packed + (
            f"{SIGMA_FACTOR:g}*sqrt(K={k})*u_acc({acc_text}) of sum|terms|"
            f"{' plus f32 product rounding' if u_prod else ' (products exact)'}, plus {out_part}"
        )
        return Tolerance(atol=atol, rtol=u_out, sum_rtol=sum_rtol), reason
    if problem.reduce_op == "mul":
        rtol = k * u_acc + u_prod * k + u_out
        return Tolerance(atol=atol, rtol=rtol), f"{packed}K={k} roundings of a product in {acc_text}, plus {out_part}"
    return (
        Tolerance(atol=atol, rtol=u_prod + u_out),
        f"{packed}{problem.reduce_op} selects one product (exact{' but for f32 product rounding' if u_prod else ''}), "
        f"plus {out_part}",
    )
