"""The problem model: an einsum over named axes with affine operand indices.

A `Problem` is an iteration space (named axes with sizes), one or two input operands and an
output operand. Each operand dimension is indexed by an affine expression of axes,
``sum(coeff * axis)``, which expresses sliding windows: a stride-2, dilation-2 convolution
reads its input at ``h:2 + fh:2`` (the reference notation writes ``$(H:2 + Fh:2)``, see
contraction-engine-rngd.txt, "2D Convolution").

Indices address the *padded* operand: a dimension with zero padding ``(lo, hi)`` holds
``lo`` zeros, the real data, then ``hi`` zeros. A negative ``hi`` means the real data runs
``-hi`` elements past the last index any point reads (a stride-2 window over an even input
skips the last row): those elements exist in the tensor but take no part in the result.
The output is indexed by plain axes.

Binary problems multiply their two inputs elementwise and reduce the product over every axis
not in the output with ``reduce_op``; unary problems reduce their one input.
"""

from __future__ import annotations

import math
import re
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workload import dtypes
from workload.errors import ProblemError

ReduceOp = Literal["add", "mul", "max", "min"]

#: Documented limits (README, "Problem format").
MAX_AXIS_SIZE = 1 << 24
MAX_AXES = 16
MAX_COEFF = 1024
AXIS_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class Term(BaseModel):
    """``coeff * axis`` inside an index expression."""

    model_config = ConfigDict(frozen=True)
    axis: str
    coeff: int = 1


class IndexExpr(BaseModel):
    """One operand dimension's index: ``sum(term.coeff * term.axis)``."""

    model_config = ConfigDict(frozen=True)
    terms: tuple[Term, ...]

    @classmethod
    def of(cls, *axes: str | tuple[str, int]) -> IndexExpr:
        """Build from axis names or ``(axis, coeff)`` pairs: ``IndexExpr.of(("h", 2), "fh")``."""
        terms = [Term(axis=a) if isinstance(a, str) else Term(axis=a[0], coeff=a[1]) for a in axes]
        return cls(terms=tuple(terms))

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(t.axis for t in self.terms)

    def is_plain(self) -> bool:
        """True for a single axis with coefficient 1."""
        return len(self.terms) == 1 and self.terms[0].coeff == 1

    def __str__(self) -> str:
        parts = [t.axis if t.coeff == 1 else f"{t.axis}:{t.coeff}" for t in self.terms]
        return " + ".join(parts)


class Operand(BaseModel):
    """A tensor of the problem: its dimensions' index expressions, dtype and zero padding."""

    model_config = ConfigDict(frozen=True)
    name: str
    dims: tuple[IndexExpr, ...]
    dtype: str
    pad: tuple[tuple[int, int], ...] | None = None  # per dim (lo, hi); None = no padding

    @property
    def axes(self) -> tuple[str, ...]:
        """Distinct axes this operand is indexed by, in order of appearance."""
        seen: dict[str, None] = {}
        for d in self.dims:
            for a in d.axes:
                seen.setdefault(a, None)
        return tuple(seen)

    def pads(self) -> tuple[tuple[int, int], ...]:
        return self.pad if self.pad is not None else tuple((0, 0) for _ in self.dims)


class Problem(BaseModel):
    """A validated tensor problem. Construct through the front-ends or directly."""

    model_config = ConfigDict(frozen=True)
    axes: dict[str, int] = Field(description="axis name -> size, in declaration order")
    inputs: tuple[Operand, ...]
    output: Operand
    reduce_op: ReduceOp = "add"
    weight: int | None = Field(default=None, description="index of the weight (stationary/TRF) input")
    label: str = Field(default="", description="a free-form name; not part of the content hash")

    @model_validator(mode="after")
    def _check(self) -> Problem:
        for err in semantic_errors(self):
            raise err
        return self

    # ---- derived facts -------------------------------------------------------------------
    @cached_property
    def free_axes(self) -> tuple[str, ...]:
        """Axes of the output, in output order."""
        return tuple(d.terms[0].axis for d in self.output.dims)

    @cached_property
    def reduction_axes(self) -> tuple[str, ...]:
        """Axes not in the output (contracted / reduced), in declaration order."""
        free = set(self.free_axes)
        return tuple(a for a in self.axes if a not in free)

    @property
    def is_binary(self) -> bool:
        return len(self.inputs) == 2

    @property
    def operands(self) -> tuple[Operand, ...]:
        """Inputs then output."""
        return (*self.inputs, self.output)

    @property
    def acc_dtype(self) -> str:
        """Accumulation type derived from the input dtypes (i32 for integers, else f32)."""
        return dtypes.accumulator_of([o.dtype for o in self.inputs])

    def extent(self, operand: Operand, dim: int) -> int:
        """Padded extent of one operand dimension: the largest index it is read at, plus one."""
        return sum(t.coeff * (self.axes[t.axis] - 1) for t in operand.dims[dim].terms) + 1

    def padded_shape(self, operand: Operand) -> tuple[int, ...]:
        return tuple(self.extent(operand, d) for d in range(len(operand.dims)))

    def shape(self, operand: Operand) -> tuple[int, ...]:
        """Shape of the real (unpadded) tensor data."""
        return tuple(e - lo - hi for e, (lo, hi) in zip(self.padded_shape(operand), operand.pads(), strict=True))

    @property
    def points(self) -> int:
        """Points of the iteration space (product of all axis sizes)."""
        return math.prod(self.axes.values())

    @property
    def macs(self) -> int:
        """Multiply-accumulates of a binary problem, reduction steps of a unary one."""
        return self.points

    def operand_bytes(self, operand: Operand) -> float:
        return dtypes.nbytes(operand.dtype, math.prod(self.shape(operand)))

    @property
    def input_bytes(self) -> tuple[float, ...]:
        return tuple(self.operand_bytes(o) for o in self.inputs)

    @property
    def output_bytes(self) -> float:
        return self.operand_bytes(self.output)

    @property
    def min_bytes(self) -> float:
        """Bytes any mapping must move: every input read once and the output written once."""
        return sum(self.input_bytes) + self.output_bytes

    def weight_operand(self) -> Operand | None:
        return None if self.weight is None else self.inputs[self.weight]

    def summary(self) -> str:
        ins = ", ".join(f"{o.name}[{', '.join(str(d) for d in o.dims)}]:{o.dtype}" for o in self.inputs)
        out = f"{self.output.name}[{', '.join(str(d) for d in self.output.dims)}]:{self.output.dtype}"
        sizes = " ".join(f"{a}={s}" for a, s in self.axes.items())
        return f"{ins} -> {out} ({self.reduce_op}; {sizes})"


def semantic_errors(p: Problem) -> list[ProblemError]:
    """Every reason the problem is malformed, first one first (empty when valid)."""
    errs: list[ProblemError] = []
    if not p.axes:
        return [ProblemError("the problem has no axes", hint="declare at least one axis with its size")]
    if len(p.axes) > MAX_AXES:
        errs.append(
            ProblemError(
                f"{len(p.axes)} axes exceed the limit of {MAX_AXES}",
                token=list(p.axes)[MAX_AXES],
                hint="merge axes that are always used together into one",
            )
        )
    for name, size in p.axes.items():
        if not isinstance(name, str) or not AXIS_NAME.fullmatch(name):
            errs.append(
                ProblemError("invalid axis name", token=name, hint="start with a letter; use letters, digits and _")
            )
        if isinstance(size, bool) or not isinstance(size, int):
            errs.append(ProblemError("axis size must be an integer", token=name, hint=f"give {name} a size"))
        elif size < 1:
            errs.append(ProblemError(f"axis size {size} is not positive", token=name, hint="sizes must be >= 1"))
        elif size > MAX_AXIS_SIZE:
            errs.append(
                ProblemError(
                    f"axis size {size} exceeds the limit of {MAX_AXIS_SIZE}",
                    token=name,
                    hint="split the axis into two axes",
                )
            )
    if errs:
        return errs
    if len(p.inputs) not in (1, 2):
        errs.append(
            ProblemError(
                f"{len(p.inputs)} inputs given",
                hint="a problem has one input (reduction) or two (contraction)",
            )
        )
    for op in p.operands:
        try:
            dtypes.canonical_dtype(op.dtype)
        except ValueError as e:
            errs.append(ProblemError(f"unknown dtype of operand {op.name}", token=op.dtype, hint=str(e)))
        else:
            if op is p.output and dtypes.is_block(op.dtype):
                errs.append(
                    ProblemError(
                        f"output {op.name} is {dtypes.canonical_dtype(op.dtype)}, a block-float input format",
                        token=op.dtype,
                        hint="block floats (bfloat8_b, bfloat4_b) are accepted as inputs only: give the output "
                        "bf16 or f32, or leave out_dtype to get the accumulator (f32)",
                    )
                )
        for d in op.dims:
            if not d.terms:
                errs.append(ProblemError("empty index expression", token=op.name, hint="index by an axis"))
            for t in d.terms:
                if t.axis not in p.axes:
                    errs.append(
                        ProblemError(
                            f"axis {t.axis} of operand {op.name} has no size",
                            token=t.axis,
                            hint=f"add {t.axis}=<size> to the sizes",
                        )
                    )
                if not 1 <= t.coeff <= MAX_COEFF:
                    errs.append(
                        ProblemError(
                            f"coefficient {t.coeff} out of range [1, {MAX_COEFF}]",
                            token=f"{t.axis}:{t.coeff}",
                            hint="strides and dilations must be between 1 and 1024",
                        )
                    )
        if op.pad is not None:
            if len(op.pad) != len(op.dims):
                errs.append(
                    ProblemError(
                        f"padding of {op.name} has {len(op.pad)} pairs for {len(op.dims)} dimensions",
                        token=op.name,
                        hint="give one (lo, hi) pair per dimension",
                    )
                )
            elif any(lo < 0 for lo, _ in op.pad):
                errs.append(
                    ProblemError(
                        f"negative low padding of {op.name}",
                        token=op.name,
                        hint="low padding must be >= 0 (only the high side may be negative)",
                    )
                )
    if errs:
        return errs
    out_axes: list[str] = []
    for d in p.output.dims:
        if not d.is_plain():
            errs.append(
                ProblemError("output dimensions must be single axes", token=str(d), hint="index the output by axes")
            )
        else:
            out_axes.append(d.terms[0].axis)
    if len(set(out_axes)) != len(out_axes):
        dup = next(a for a in out_axes if out_axes.count(a) > 1)
        errs.append(
            ProblemError(
                f"axis {dup} appears twice in the output",
                token=dup,
                hint="index each output dimension by a different axis",
            )
        )
    if p.output.pad is not None and any(lo or hi for lo, hi in p.output.pad):
        errs.append(ProblemError("the output cannot be padded", token=p.output.name, hint="pad the inputs instead"))
    in_axes = {a for o in p.inputs for a in o.axes}
    for a in out_axes:
        if a not in in_axes:
            errs.append(
                ProblemError(
                    f"output axis {a} appears in no input",
                    token=a,
                    hint="remove it from the output or index an input by it",
                )
            )
    for a in p.axes:
        if a not in in_axes and a not in out_axes:
            errs.append(ProblemError(f"axis {a} is used by no operand", token=a, hint="remove it from the sizes"))
    reduced = [a for a in p.axes if a not in out_axes]
    if p.reduce_op != "add" and not reduced:
        errs.append(
            ProblemError(
                f"reduce op {p.reduce_op} has nothing to reduce",
                token=p.reduce_op,
                hint="every axis is in the output; use add (or drop an output axis)",
            )
        )
    padded = any(lo or hi for o in p.inputs for lo, hi in o.pads())
    if padded and p.reduce_op != "add":
        errs.append(
            ProblemError(
                f"zero padding changes the result of a {p.reduce_op} reduction",
                token=p.reduce_op,
                hint="use reduce op add with padding, or remove the padding",
            )
        )
    if p.weight is not None and not 0 <= p.weight < len(p.inputs):
        errs.append(
            ProblemError(
                f"weight index {p.weight} names no input",
                token=str(p.weight),
                hint=f"use an input index 0..{len(p.inputs) - 1}, or no weight",
            )
        )
    if errs:
        return errs
    for o in p.inputs:
        for i, (lo, hi) in enumerate(o.pads()):
            ext = p.extent(o, i)
            if ext - lo - hi < 1:
                errs.append(
                    ProblemError(
                        f"operand {o.name} dimension {i} ({o.dims[i]}) reads {ext} positions but its padding is "
                        f"{lo}+{hi}: no real data is left",
                        token=str(o.dims[i]),
                        hint="the window is larger than the padded input: shrink the kernel or the padding",
                    )
                )
    return errs
