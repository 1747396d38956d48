"""The error a mapping's number formats cost, bounded a priori: packing into block floats and fidelity phases.

`executor.validate` judges a mapping first against the exact reference *of the same packed values and
the same fidelity phases* (so a wrong loop nest shows); this module judges the result once more against
the exact result of the *unpacked* inputs (the float32 values before block-float packing, with every
significand bit multiplied), within a bound derived from the formats alone:

- **Packing** (block floats, `workload.blockfloat`): each packed value lies within one unit of its
  block, ``|a' - a| <= u_a`` (``2**(shared - 127 - (W-1))``; tests/workload/test_blockfloat.py), its
  block being the one the run packed it in (`workload.block_layout.block_packing`: a grouped conv's
  activation along its channels C = g x ci), so a product moves by ``|a*b - a'*b'| <= |a| u_b + |b'| u_a``.
  Non-block inputs are their own values (u = 0).
- **Fidelity phases** (`executor.fidelity`): a phase left out multiplies a SrcA part and a SrcB part. From
  the masks of tt-isa ``ELWMUL.md``: SrcA's phase-0 part keeps the implicit 1 and 4 mantissa bits, so the
  rest is below ``2**-4 |a'|``; SrcB's phases-0/1 part keeps 1 + 6 bits, the rest below ``2**-6 |b'|``.
  The phase left out costs at most ``2**-4`` (phase 1: SrcA low x SrcB high), ``2**-6`` (phase 2) and
  ``2**-10`` (phase 3) of ``|a'| |b'|``; a plan whose phases cover every bit (`fidelity.Plan.exact`) costs 0.
- plus the accumulation and output bound of `executor.tolerance` (``sum|terms|`` of the packed values).

Per output element: ``sum_k (|a| u_b + |b'| u_a + e_F |a'| |b'|)``, evaluated as three contractions of
the problem. It holds for binary sums of products (the only problems fidelity and block floats concern).
"""

from __future__ import annotations

import numpy as np

from executor import fidelity
from executor.tolerance import Tolerance
from workload import blockfloat, dtypes
from workload.block_layout import block_packing
from workload.problem import Problem
from workload.reference import evaluate

#: relative cost of each fidelity phase left out, as a share of |a'| |b'| (module docstring)
PHASE_ERROR: dict[int, float] = {1: 2.0**-4, 2: 2.0**-6, 3: 2.0**-10}


def fidelity_error(fid: str | None, exact: bool) -> float:
    """Relative product error of the phases `fid` leaves out (0 for no fidelity, HiFi4 or an exact plan)."""
    if fid is None or exact or fid not in fidelity.PHASES:
        return 0.0
    return sum(PHASE_ERROR[p] for p in range(fidelity.PHASES[fid], 4))


def applies(problem: Problem, fid: str | None, exact: bool) -> bool:
    """Does the format bound say anything here (block-float inputs or a lossy fidelity, on a sum of products)?"""
    if not problem.is_binary or problem.reduce_op != "add":
        return False
    return any(dtypes.is_block(o.dtype) for o in problem.inputs) or fidelity_error(fid, exact) > 0


def _units(problem: Problem, originals: list[np.ndarray]) -> list[np.ndarray]:
    """Per element, the most packing can move each input (one unit of its block, the blocks where the run
    packed them: `workload.block_layout.block_packing`; 0 for other formats)."""
    out = []
    for i, (op, x) in enumerate(zip(problem.inputs, originals, strict=True)):
        block = dtypes.is_block(op.dtype)
        out.append(blockfloat.unit(x, op.dtype, block_packing(problem, i)) if block else np.zeros(np.shape(x)))
    return out


def check(
    problem: Problem,
    originals: list[np.ndarray],
    packed: list[np.ndarray],
    values: np.ndarray,
    tolerance: Tolerance,
    abs_sum: np.ndarray | None,
    fid: str | None,
    exact: bool,
) -> tuple[bool, str]:
    """Is the result within the formats' bound of the exact result of the unpacked inputs, and the text saying so.

    Args:
        problem: a binary sum of products.
        originals: the inputs before block-float packing (float32).
        packed: the inputs the run read.
        values: the run's output.
        tolerance: the accumulation and output tolerance of the run (`executor.tolerance.derive`).
        abs_sum: ``sum|terms|`` of the packed inputs per output element (the accumulation scale).
        fid: the mapping's fidelity (None without one); exact: the plan covers every significand bit.
    """
    a, b = (np.asarray(x, dtype=np.float64) for x in originals)
    ap, bp = (np.abs(np.asarray(x, dtype=np.float64)) for x in packed)
    ua, ub = _units(problem, originals)
    e_f = fidelity_error(fid, exact)
    truth = evaluate(problem, [a, b]).astype(np.float64)
    bound = evaluate(problem, [np.abs(a), ub]) + evaluate(problem, [ua, bp])
    if e_f:
        bound = bound + e_f * evaluate(problem, [ap, bp])
    bound = bound + tolerance.bound(truth, abs_sum)
    with np.errstate(invalid="ignore"):
        err = np.abs(values.astype(np.float64) - truth)
        ok = err <= bound
    formats = " x ".join(o.dtype for o in problem.inputs)
    parts = []
    if any(dtypes.is_block(o.dtype) for o in problem.inputs):
        parts.append("packing within one unit of each block (|a| u_b + |b'| u_a per term)")
    if e_f:
        parts.append(f"{fid} phases left out ({e_f:.4g} |a'||b'| per term)")
    worst = float(np.nanmax(err / np.where(bound > 0, bound, np.inf))) if err.size else 0.0
    text = (
        f"format bound ({formats}{', ' + fid if fid else ''}) against the exact result of the unpacked inputs: "
        f"{' + '.join(parts)} + the accumulation bound; "
        f"{'within it' if ok.all() else f'{int((~ok).sum())} elements outside it'} "
        f"(largest error {float(np.nanmax(err)) if err.size else 0.0:.3g}, {worst:.3g} of the bound)"
    )
    return bool(ok.all()), text
