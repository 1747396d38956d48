"""What every family's target shares, written once.

A family's target class derives from `FamilyTarget` and writes only what is its own: how to
prepare a problem (`_prepare`: its space, coder and priced tables, kept for the last few problems
in a `ProblemMemo`), how to price prepared points by code (`_score_codes`) and, where it has them,
the general formulas for values outside the space (`_score_values`). The base class gives the
protocol's `space`, `score_codes` and `score_batch`, with the guard every family needs: a problem
the target cannot run scores every point infeasible.

Also here: the problem-level checks most families make (`ProblemRules`: two inputs, a sum of
products, input dtypes allowed), reading a point back from a mapping's knobs (`point_of`, with the
one ``knobs`` violation when a knob is missing) and zero fill for padding on reduced axes
(`zero_fill`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

import numpy as np

from costmodels.choice_codes import ScoreFn, SpaceCoder, score_values
from costmodels.ir import Fill, Level, Mapping
from costmodels.problem_memo import ProblemMemo
from costmodels.protocol import BatchScore, Choice, SearchSpace, Violation
from workload import dtypes
from workload.problem import Problem

#: the objectives every family prices
OBJECTIVES: tuple[str, ...] = ("latency", "offchip_bytes", "footprint")
#: the codes of `ProblemRules` and of `knobs_violation`, in every family's list of codes
RULE_CODES: tuple[str, ...] = ("unary", "reduce-op", "dtype")
KNOBS = "knobs"


class Prepared(Protocol):
    """The per-problem preparation a family keeps: why the problem cannot run here (empty: it can),
    its space and the coder of that space (both None when it cannot run)."""

    @property
    def reasons(self) -> tuple[Violation, ...]: ...

    @property
    def space(self) -> SearchSpace | None: ...

    @property
    def coder(self) -> SpaceCoder | None: ...


P = TypeVar("P", bound=Prepared)


def rows(columns: dict[str, Any]) -> int:
    """Number of points in a dict of equal-length columns (0 when it has none)."""
    return len(next(iter(columns.values()))) if columns else 0


class FamilyTarget(Generic[P]):
    """Base of every family's target: preparation kept per problem, and scoring behind one guard.

    Subclasses set `family`, write `_prepare`, `_score_codes` and (optionally) `_score_values`,
    and the protocol's `supports`, `mapping`, `check`, `cost`, `lower_bound`, `warm_starts` and
    `render`.
    """

    family: str = ""
    objectives: tuple[str, ...] = OBJECTIVES
    #: problems whose preparation is kept
    keep: int = 8

    def __init__(self, name: str, hardware: Any) -> None:
        self.name = name
        self.hardware = hardware
        self._memo: ProblemMemo[P] = ProblemMemo(self._prepare, size=self.keep)

    # ---- what a family writes ------------------------------------------------------------------
    def _prepare(self, problem: Problem) -> P:
        """The point-independent work of one problem (done once, then kept)."""
        raise NotImplementedError

    def _score_codes(self, problem: Problem, prep: P, codes: dict[str, np.ndarray]) -> BatchScore:
        """Price points of a problem this target runs, given as choice codes."""
        raise NotImplementedError

    def _score_values(self, problem: Problem, prep: P) -> ScoreFn | None:
        """The general formulas for value columns outside the space (None: such a value is a ``ValueError``)."""
        return None

    # ---- what every family shares --------------------------------------------------------------
    def prepared(self, problem: Problem) -> P:
        """The kept preparation of `problem` (built on first use)."""
        return self._memo.get(problem)

    def _reasons(self, problem: Problem) -> tuple[Violation, ...]:
        """Why the target cannot run `problem` (empty: it can). A family whose `_prepare` builds its
        space and tables at once writes this without them, so that asking costs no preparation."""
        return self._memo.get(problem).reasons

    def supports(self, problem: Problem) -> list[Violation]:
        kept = self._memo.peek(problem)
        return list(kept.reasons if kept is not None else self._reasons(problem))

    def space(self, problem: Problem) -> SearchSpace:
        prep = self._memo.get(problem)
        if prep.space is None:
            raise ValueError("; ".join(v.message for v in prep.reasons))
        return prep.space

    def score_codes(self, problem: Problem, codes: dict[str, np.ndarray]) -> BatchScore:
        prep = self._memo.get(problem)
        if prep.reasons:
            return BatchScore.infeasible(rows(codes), self.objectives)
        return self._score_codes(problem, prep, codes)

    def score_batch(self, problem: Problem, columns: dict[str, np.ndarray]) -> BatchScore:
        prep = self._memo.get(problem)
        n = rows(columns)
        if prep.reasons or prep.coder is None or n == 0:
            return BatchScore.infeasible(n, self.objectives)

        def by_codes(codes: dict[str, np.ndarray]) -> BatchScore:
            return self._score_codes(problem, prep, codes)

        return score_values(prep.coder, columns, by_codes, self._score_values(problem, prep))


@dataclass(frozen=True)
class ProblemRules:
    """The problem-level checks most families make, each with the family's own reason.

    A unary problem gets `unary` (and, when `unary_only`, nothing else); a reduction other than
    add gets `reduce_op` (``{op}`` is the reduce op); each input whose dtype is not in `dtypes`
    gets `dtype` (``{name}``: the input, ``{dtype}``: its canonical dtype, ``{allowed}``: the list).
    """

    unary: str
    reduce_op: str
    dtype: str
    unary_only: bool = True

    def violations(self, problem: Problem, allowed: Iterable[str]) -> list[Violation]:
        out: list[Violation] = []
        if not problem.is_binary:
            out.append(Violation(code="unary", message=self.unary))
            if self.unary_only:
                return out
        if problem.reduce_op != "add":
            out.append(Violation(code="reduce-op", message=self.reduce_op.format(op=problem.reduce_op)))
        ok = tuple(allowed)
        for op in problem.inputs:
            name = dtypes.canonical_dtype(op.dtype)
            if name not in ok:
                text = block_float_refusal(op.name, name) or self.dtype.format(
                    name=op.name, dtype=name, allowed=", ".join(ok)
                )
                out.append(Violation(code="dtype", message=text))
        return out


#: the family whose targets take tt-metal's block-float formats (bfloat8_b, bfloat4_b)
BLOCK_FLOAT_FAMILY = "tenstorrent"


def block_float_refusal(operand: str, dtype: str) -> str | None:
    """The message refusing a block-float operand on a target of another family (None: not a block float)."""
    if not dtypes.is_block(dtype):
        return None
    from costmodels.presets import preset_family, preset_names

    takers = [p for p in preset_names() if preset_family(p) == BLOCK_FLOAT_FAMILY]
    return (
        f"operand {operand} is {dtype}, tt-metal's block-float format (16 values share one exponent), which only "
        f"the Tenstorrent targets take ({', '.join(takers)}): run it there, or declare {operand} as bf16"
    )


def point_of(mapping: Mapping, names: Iterable[str]) -> dict[str, Choice] | None:
    """The point a mapping's knobs record (the parameters `names`), or None when a knob is missing."""
    keys = tuple(names)
    if any(k not in mapping.knobs for k in keys):
        return None
    return {k: cast(Choice, mapping.knobs[k]) for k in keys}


def knobs_violation(mapping: Mapping, names: Iterable[str]) -> Violation:
    """The one reason a mapping whose knobs lack some of the space's parameters cannot be checked."""
    missing = [k for k in names if k not in mapping.knobs]
    return Violation(
        code=KNOBS,
        message=f"the mapping lacks this target's point knobs ({', '.join(missing)}): "
        "build it with target.mapping(problem, point)",
    )


def zero_fill(
    problem: Problem,
    levels: tuple[Level, ...],
    axes: Iterable[str],
    operands: Callable[[str], bool] | None = None,
    padded_only: bool = True,
) -> dict[str, dict[str, Fill]]:
    """Zero fill on reduced `axes`: every input holding an axis (or those `operands` accepts) fills
    its padding points there with zeros; with `padded_only`, only axes the loop nest pads."""
    probe = Mapping(levels=levels, acc_dtype="f32")
    out: dict[str, dict[str, Fill]] = {}
    for a in axes:
        if padded_only:
            v = probe.visits(a)
            if not (v.size and int(v.max()) >= problem.axes[a]):
                continue
        for op in problem.inputs:
            if a in op.axes and (operands is None or operands(op.name)):
                out.setdefault(op.name, {})[a] = "zero"
    return out
