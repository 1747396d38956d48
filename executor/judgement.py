"""The verdict of one validation run: the run's output against the exact reference, in words.

`judge` turns a mapping's output (`executor.tiled`, `executor.halo_exec`) into the report's fields,
status and reason: the tolerance of the mapping's accumulator (`executor.tolerance`), the declared
one where the mapping accumulates in a narrower format (`narrower_accumulator`), the fidelity phases
or why they were not checked, then the formats' a-priori bound for block floats and reduced
fidelity (`executor.format_bound`). `executor.validate` and `executor.folded` (a folded conv judged
against its original problem) both judge with it; the verdict's three values are described in
`executor.validate`.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from costmodels.ir import Mapping
from executor import fidelity as fidelity_mod
from executor import format_bound, numerics
from executor.tiled import TiledResult
from executor.tolerance import Tolerance, derive
from workload import dtypes
from workload.problem import Problem
from workload.reference import cast_output, evaluate

Status = Literal["passed", "failed", "not-checked"]


def compare(
    problem: Problem,
    result: TiledResult,
    ref: np.ndarray,
    abs_sum: np.ndarray | None,
    acc_dtype: str | None = None,
) -> dict[str, object]:
    """Element-wise comparison of a tiled result with the exact reference (`evaluate` output).

    `acc_dtype` is the mapping's accumulator (`executor.tolerance.derive`); the returned
    ``within`` is True when every element lies within the tolerance.
    """
    tol, reason = derive(problem, acc_dtype)
    expected = cast_output(problem, ref)
    y = result.values.astype(np.float64)
    r = ref.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(y - r)
        if tol.exact:
            ok = result.values.astype(np.int64) == expected.astype(np.int64)
        else:
            bound = tol.bound(r, abs_sum)
            e = expected.astype(np.float64)
            ok = (err <= bound) | (y == e) | (np.isnan(y) & np.isnan(e))
        ok &= result.written
        rel = err / np.maximum(np.abs(r), np.finfo(np.float64).tiny)
    err = np.where(np.isnan(err), np.inf, err)
    rel = np.where(np.isnan(rel), np.inf, rel)
    bad = np.argwhere(~ok)
    return {
        "within": bool(ok.all()),
        "elements_compared": int(ok.size),
        "max_abs_error": float(err.max()) if err.size else 0.0,
        "max_rel_error": float(rel.max()) if rel.size else 0.0,
        "failing_elements": int(bad.shape[0]),
        "tolerance": tol,
        "tolerance_reason": reason,
        "first_failing_index": tuple(int(i) for i in bad[0]) if bad.size else None,
    }


def reference_abs_sum(problem: Problem, operand_sets: list[list[np.ndarray]]) -> np.ndarray | None:
    """``sum |terms|`` per output element (the scale of add-accumulation rounding).

    With several operand sets (fidelity phases) this is the sum over the sets: an upper bound.
    """
    if problem.reduce_op != "add" or derive(problem)[0].exact:
        return None
    total: np.ndarray | None = None
    for ops in operand_sets:
        one = evaluate(problem, [np.abs(np.asarray(x).astype(np.float64)) for x in ops]).astype(np.float64)
        total = one if total is None else total + one
    return total


def _reference(problem: Problem, operand_sets: list[list[np.ndarray]]) -> np.ndarray:
    """The exact result: the sum over the operand sets (one set, the inputs, without fidelity phases)."""
    total: np.ndarray | None = None
    for ops in operand_sets:
        one = evaluate(problem, ops)
        total = one if total is None else total + one
    assert total is not None
    return total


def narrower_accumulator(problem: Problem, acc_dtype: str) -> bool:
    """Does `acc_dtype` keep less than the problem's declared accumulator (`Problem.acc_dtype`)?"""
    mine, declared = dtypes.info(acc_dtype), dtypes.info(problem.acc_dtype)
    if declared.is_int:
        return not mine.is_int or mine.bits < declared.bits
    if mine.is_int:
        return False  # not a float format at all: the numbers judge it
    return bool(numerics.unit_roundoff(acc_dtype) > numerics.unit_roundoff(problem.acc_dtype))


def verdict(
    problem: Problem,
    mapping: Mapping,
    fields: dict[str, object],
    coverage: list[str],
    not_emulated: str | None,
    declared: dict[str, object] | None = None,
) -> tuple[Status, str]:
    """(status, reason) of a run: coverage, then emulation, then the numbers.

    `fields` compare against the mapping's accumulator bound; `declared`, given when the mapping
    accumulates in a narrower format than the problem declares, against the problem's bound.
    Such a mapping passes only within both: within its own bound it computes what it claims,
    within the problem's it also meets the problem's declared precision (an f16 row product
    rounding to an f16 output does; a bf16 accumulator over a long f32-output reduction does not).
    """
    n, bad = int(fields["elements_compared"]), int(fields["failing_elements"])  # type: ignore[call-overload]
    numbers = (
        f"all {n} compared elements within the tolerance"
        if fields["within"]
        else f"{bad} of {n} compared elements outside the tolerance (first at {fields['first_failing_index']})"
    )
    if coverage:
        return "failed", "coverage: " + "; ".join(coverage) + f" ({numbers})"
    if not_emulated:
        return "not-checked", f"not checked: {not_emulated} ({numbers} with exact products)"
    if not fields["within"]:
        return "failed", numbers
    if declared is not None:
        acc, mine = problem.acc_dtype, mapping.acc_dtype
        text = f"the mapping accumulates in {mine}, the problem declares {acc}: {numbers} of the {mine}-accumulation"
        if not declared["within"]:
            return "failed", (
                f"{text} bound, but {declared['failing_elements']} outside the problem's {acc}-accumulation bound"
            )
        return "passed", f"{text} bound and of the problem's {acc}-accumulation bound"
    return "passed", numbers


def judge(
    problem: Problem,
    run_problem: Problem,
    mapping: Mapping,
    operands: tuple[list[np.ndarray], list[np.ndarray]],
    operand_sets: list[list[np.ndarray]],
    result: TiledResult,
    phases: Any,
    coverage: list[str],
    not_emulated: str | None,
    notes: list[str],
) -> tuple[dict[str, Any], str, str]:
    """(report fields, status, reason) of `result`, the mapping run on `run_problem` (the problem or its
    proxy) from `operands` (the unpacked originals, the inputs as run), against the exact reference of
    `operand_sets`: the tolerance of the mapping's accumulator, the declared one where the mapping's is
    narrower, the fidelity phases or why they were not checked, then the format bound (block floats,
    reduced fidelity). `executor.folded` judges a folded run against its original problem with it too."""
    ref = _reference(run_problem, operand_sets)
    abs_sum = reference_abs_sum(run_problem, operand_sets)
    fields = compare(run_problem, result, ref, abs_sum, mapping.acc_dtype)
    narrow = narrower_accumulator(problem, mapping.acc_dtype)
    declared = compare(run_problem, result, ref, abs_sum) if narrow else None
    if phases is not None:
        fields["tolerance_reason"] = f"{fields['tolerance_reason']}; {phases.describe()}"
        notes.append(phases.describe())
    elif not_emulated:
        notes.append(f"not checked: {not_emulated}")
    status, reason = verdict(problem, mapping, fields, coverage, not_emulated, declared)
    if not not_emulated:
        exact = phases is not None and phases.exact
        status, reason = format_verdict(
            run_problem, mapping, operands, result, fields, abs_sum, exact, (status, reason), notes
        )
    return fields, status, reason


def format_verdict(
    problem: Problem,
    mapping: Mapping,
    operands: tuple[list[np.ndarray], list[np.ndarray]],
    result: TiledResult,
    fields: dict[str, object],
    abs_sum: np.ndarray | None,
    exact: bool,
    verdict_: tuple[Status, str],
    notes: list[str],
) -> tuple[Status, str]:
    """The verdict once the formats' bound is checked too (`executor.format_bound`), when it applies.

    `operands` are the inputs before and after block-float packing; the bound's text is added to the
    tolerance reason and the notes, and a passed run outside the bound fails.
    """
    fid = fidelity_mod.fidelity_of(mapping)
    if not format_bound.applies(problem, fid, exact):
        return verdict_
    tol = fields["tolerance"]
    assert isinstance(tol, Tolerance)
    originals, packed = operands
    within, text = format_bound.check(problem, originals, packed, result.values, tol, abs_sum, fid, exact)
    fields["tolerance_reason"] = f"{fields['tolerance_reason']}; {text}"
    notes.append(text)
    status, reason = verdict_
    if status == "passed" and not within:
        return "failed", f"{reason}, but outside the {text}"
    return status, reason
