"""Canonical form and content hash of a problem.

Two problems that differ only in how they are written (axis names, operand names, spacing, the
order of terms inside an index expression, the order axes were declared in, the label) have the
same canonical form and hence the same hash. Everything that changes the computation is kept:
axis sizes, the operand structure (which dimension is indexed by which axes with which
coefficients), the operand order, every dtype (inputs and output), the zero padding, the reduce
op and the weight operand.

Axes are renamed to their position in a canonical order. Each axis is described by its
*occurrences*: the (operand, dimension, coefficient) triples it appears in, with the output
ranked first, then the inputs in order. Axes are sorted by (occurrences, size). The output's
axes therefore come first, in output order, and the reduced axes follow in order of their
first use by the inputs. Two axes that tie on this key appear in exactly the same index
expressions with the same coefficients and have the same size, so swapping them maps the
problem onto itself: the order between them cannot change the canonical form.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from workload import dtypes
from workload.problem import IndexExpr, Operand, Problem

#: Bumped whenever the canonical form changes shape, so old hashes never collide with new ones.
CANONICAL_VERSION = 1

Occurrence = tuple[int, int, int]  # (operand rank: 0 = output, 1.. = inputs, dimension, coefficient)


def _merged_terms(expr: IndexExpr) -> dict[str, int]:
    """Coefficient of each axis in an index expression (``m + m`` is ``m:2``)."""
    coeffs: dict[str, int] = {}
    for t in expr.terms:
        coeffs[t.axis] = coeffs.get(t.axis, 0) + t.coeff
    return coeffs


def _ranked_operands(problem: Problem) -> list[tuple[int, Operand]]:
    """Operands with their rank in the occurrence key: the output first, then the inputs in order."""
    return [(0, problem.output)] + [(i + 1, o) for i, o in enumerate(problem.inputs)]


def axis_order(problem: Problem) -> dict[str, int]:
    """Canonical index of every axis (see the module docstring).

    Args:
        problem: a validated problem.

    Returns:
        axis name -> position in the canonical order (0-based).
    """
    occurrences: dict[str, list[Occurrence]] = {a: [] for a in problem.axes}
    for rank, op in _ranked_operands(problem):
        for d, expr in enumerate(op.dims):
            for axis, coeff in _merged_terms(expr).items():
                occurrences[axis].append((rank, d, coeff))
    keyed = sorted(problem.axes, key=lambda a: (sorted(occurrences[a]), problem.axes[a]))
    return {a: i for i, a in enumerate(keyed)}


def _canonical_operand(problem: Problem, op: Operand, order: dict[str, int]) -> dict[str, Any]:
    dims = [sorted([order[a], c] for a, c in _merged_terms(expr).items()) for expr in op.dims]
    return {
        "dims": dims,
        "dtype": dtypes.canonical_dtype(op.dtype),
        "pad": [list(p) for p in op.pads()],
    }


def canonical_form(problem: Problem) -> dict[str, Any]:
    """A JSON-ready description of the problem that ignores how it was written.

    Axes become integers (their canonical position), operands lose their names, index
    expressions are sums of ``[axis, coeff]`` pairs in axis order, padding is explicit
    (``[0, 0]`` where none was given) and dtypes are canonical names.

    Args:
        problem: a validated problem.

    Returns:
        ``{"version", "sizes", "inputs", "output", "reduce_op", "weight"}``; each operand is
        ``{"dims": [[[axis, coeff], ...], ...], "dtype", "pad": [[lo, hi], ...]}``.
    """
    order = axis_order(problem)
    sizes = [0] * len(order)
    for axis, position in order.items():
        sizes[position] = problem.axes[axis]
    return {
        "version": CANONICAL_VERSION,
        "sizes": sizes,
        "inputs": [_canonical_operand(problem, o, order) for o in problem.inputs],
        "output": _canonical_operand(problem, problem.output, order),
        "reduce_op": problem.reduce_op,
        "weight": problem.weight,
    }


def canonical_json(problem: Problem) -> str:
    """The canonical form as compact JSON with sorted keys (the bytes that are hashed)."""
    return json.dumps(canonical_form(problem), sort_keys=True, separators=(",", ":"))


def content_hash(problem: Problem) -> str:
    """SHA-256 hex digest of the canonical JSON: equal for problems that compute the same thing."""
    return hashlib.sha256(canonical_json(problem).encode("utf-8")).hexdigest()
