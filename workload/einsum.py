"""Einsum front-end: the compact form and the structured form.

Compact form (single-letter axes, no spaces needed)::

    "vmk,vnk->vmn"          batched matmul
    "ij->i"                 unary reduction

Structured form (multi-letter axis names, affine indices with ``axis:coeff`` terms, optional
operand names and the reference's ``$( )`` wrapper)::

    "X[n, oh:2 + fh, ow:2 + fw, c], W[fh, fw, c, k] -> Y[n, oh, ow, k]"
    "[H, $(W:2 + Fw:2)], [Fw, C] -> [H, W, C]"

A string is structured when it contains ``[``. Spaces are ignored in both forms.
"""

from __future__ import annotations

import re
from collections.abc import Mapping as MappingT

from workload import dtypes
from workload.errors import ProblemError
from workload.problem import IndexExpr, Operand, Problem, ReduceOp, Term

_TERM = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)(?::(\d+))?$")
_OPERAND = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)?\[(.*)\]$")
DEFAULT_NAMES = ("A", "B")


def _split_top(text: str, sep: str) -> list[str]:
    """Split on `sep` outside brackets and parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
            if depth < 0:
                raise ProblemError("unbalanced bracket", token=ch, hint="close every [ and ( you open")
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ProblemError("unbalanced bracket", token=text, hint="close every [ and ( you open")
    parts.append("".join(cur))
    return parts


def _parse_expr(text: str) -> IndexExpr:
    body = text
    if body.startswith("$(") and body.endswith(")"):
        body = body[2:-1]
    elif body.startswith("(") and body.endswith(")"):
        body = body[1:-1]
    if not body:
        raise ProblemError("empty index expression", token=text, hint="index each dimension by an axis")
    terms = []
    for raw in body.split("+"):
        m = _TERM.match(raw)
        if not m:
            raise ProblemError(
                "malformed index term", token=raw or text, hint="write axis or axis:coeff, e.g. oh:2 + fh"
            )
        coeff = int(m.group(2)) if m.group(2) is not None else 1
        terms.append(Term(axis=m.group(1), coeff=coeff))
    return IndexExpr(terms=tuple(terms))


def _parse_structured(side: str, default_name: str) -> tuple[str, tuple[IndexExpr, ...]]:
    m = _OPERAND.match(side)
    if not m:
        raise ProblemError("malformed operand", token=side, hint="write name[axis, axis:2 + other, ...]")
    name = m.group(1) or default_name
    inner = m.group(2)
    if "[" in inner or "]" in inner:
        raise ProblemError(
            "malformed operand: brackets inside an operand's index list",
            token=side,
            hint="write one operand as name[axis, ...]; separate operands with ','",
        )
    pieces = _split_top(inner, ",") if inner else []
    if any(not d for d in pieces):
        raise ProblemError(
            f"empty index expression in operand {name}", token=side, hint="remove the stray ',' or index by an axis"
        )
    dims = tuple(_parse_expr(d) for d in pieces)
    return name, dims


def _parse_compact(side: str) -> tuple[IndexExpr, ...]:
    for ch in side:
        if not (ch.isascii() and ch.isalpha()):
            raise ProblemError(
                "compact einsum operands are runs of single-letter axes",
                token=ch,
                hint="use ASCII letters only, or the structured form name[axis, ...] for longer axis names",
            )
    return tuple(IndexExpr(terms=(Term(axis=ch),)) for ch in side)


def parse_einsum(
    expr: str,
) -> tuple[list[tuple[str, tuple[IndexExpr, ...]]], tuple[str, tuple[IndexExpr, ...]]]:
    """Parse an einsum string into ``(inputs, output)``, each ``(name, dims)``."""
    if not isinstance(expr, str) or not expr.strip():
        raise ProblemError("empty einsum", hint="write e.g. 'mk,kn->mn'")
    text = re.sub(r"\s+", "", expr)
    if text.count("->") != 1:
        raise ProblemError(
            "an einsum needs exactly one '->'", token=expr, hint="write inputs->output, e.g. 'mk,kn->mn'"
        )
    lhs, rhs = text.split("->")
    structured = "[" in text
    sides = _split_top(lhs, ",")
    if any(not s for s in sides):
        raise ProblemError("empty input operand", token=lhs, hint="remove the stray comma")
    if len(sides) > 2:
        raise ProblemError(
            f"{len(sides)} inputs", token=lhs, hint="a problem has one input (reduction) or two (contraction)"
        )
    if structured:
        ins = [_parse_structured(s, DEFAULT_NAMES[i]) for i, s in enumerate(sides)]
        out = _parse_structured(rhs, "Y") if rhs.startswith(("[",)) or _OPERAND.match(rhs) else None
        if out is None:
            raise ProblemError("malformed output", token=rhs, hint="write the output as name[axis, ...]")
    else:
        ins = [(DEFAULT_NAMES[i], _parse_compact(s)) for i, s in enumerate(sides)]
        out = ("Y", _parse_compact(rhs))
    names = [n for n, _ in ins] + [out[0]]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ProblemError("two operands share a name", token=dup, hint="name every operand differently")
    for name, dims in ins:
        if not dims:
            raise ProblemError(
                f"input {name} has no dimensions", token=name, hint="index every input by at least one axis"
            )
    in_axes = {t.axis for _, dims in ins for d in dims for t in d.terms}
    for d in out[1]:
        for t in d.terms:
            if t.axis not in in_axes:
                raise ProblemError(
                    f"output axis {t.axis} appears in no input",
                    token=t.axis,
                    hint="remove it from the output or index an input by it",
                )
    return ins, out


def _axis_sizes(sizes: object, used: list[str]) -> dict[str, int]:
    """Check the sizes mapping against the axes the einsum uses (sizes themselves are checked by `Problem`)."""
    if not isinstance(sizes, MappingT):
        raise ProblemError("sizes must map axis names to integers", token="sizes", hint='e.g. {"m": 64, "k": 32}')
    for a in used:
        if a not in sizes:
            raise ProblemError(f"axis {a} has no size", token=a, hint=f"add {a}=<size> to the sizes")
    for a in sizes:
        if a not in used:
            raise ProblemError(
                f"size given for axis {a}, which the einsum does not use", token=str(a), hint="remove it"
            )
    axes: dict[str, int] = {}
    for a in dict.fromkeys(used):
        s = sizes[a]
        if isinstance(s, bool) or not isinstance(s, int):
            raise ProblemError(
                f"size {s!r} of axis {a} is not an integer", token=a, hint="sizes are positive integers, e.g. 64"
            )
        axes[a] = s
    return axes


def _weight_index(weight: object, names: list[str]) -> int | None:
    """The weight input's index from an index, a digit string or an operand name."""
    if weight is None:
        return None
    if isinstance(weight, str) and weight.isdigit():
        weight = int(weight)
    if isinstance(weight, str):
        if weight not in names:
            raise ProblemError(f"weight {weight!r} is not an input", token=weight, hint=f"inputs: {names}")
        return names.index(weight)
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise ProblemError(
            f"weight {weight!r} is neither an input index nor an input name",
            token="weight",
            hint=f"give the index (0..{len(names) - 1}) or the name ({', '.join(names)}) of the weight input",
        )
    if not 0 <= weight < len(names):
        raise ProblemError(f"weight index {weight} names no input", token=str(weight), hint=f"use 0..{len(names) - 1}")
    return weight


def _pads(pad: object, ins: list[tuple[str, tuple[IndexExpr, ...]]]) -> dict[str, tuple[tuple[int, int], ...]]:
    """Validate the padding mapping: input name -> one (lo, hi) integer pair per dimension."""
    if pad is None:
        return {}
    if not isinstance(pad, MappingT):
        raise ProblemError(
            "pad must map input names to (lo, hi) pairs", token="pad", hint='e.g. {"A": [[1, 1], [0, 0]]}'
        )
    ndims = {name: len(dims) for name, dims in ins}
    out: dict[str, tuple[tuple[int, int], ...]] = {}
    for name, pairs in pad.items():
        if name not in ndims:
            raise ProblemError(
                f"padding given for {name}, which is not an input", token=str(name), hint=f"inputs: {list(ndims)}"
            )
        ok = isinstance(pairs, list | tuple) and all(
            isinstance(pr, list | tuple)
            and len(pr) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in pr)
            for pr in pairs
        )
        if not ok:
            raise ProblemError(
                f"padding of {name} is not a list of (lo, hi) integer pairs",
                token=str(name),
                hint=f"give one [lo, hi] pair per dimension of {name}, e.g. {[[0, 0]] * ndims[name]}",
            )
        if len(pairs) != ndims[name]:
            raise ProblemError(
                f"padding of {name} has {len(pairs)} pairs for {ndims[name]} dimensions",
                token=str(name),
                hint=f"give one [lo, hi] pair per dimension of {name}",
            )
        out[name] = tuple((int(lo), int(hi)) for lo, hi in pairs)
    return out


def einsum(
    expr: str,
    sizes: MappingT[str, int],
    *,
    dtype: str | MappingT[str, str] = "bf16",
    out_dtype: str | None = None,
    reduce_op: ReduceOp | str = "add",
    weight: int | str | None = None,
    pad: MappingT[str, list[tuple[int, int]] | tuple[tuple[int, int], ...]] | None = None,
    label: str = "",
) -> Problem:
    """Build a `Problem` from an einsum string.

    Args:
        expr: compact (``"vmk,vnk->vmn"``) or structured einsum.
        sizes: axis name -> size. Every axis used must have one.
        dtype: one dtype for every input, or operand name -> dtype (inputs named A, B by default).
        out_dtype: output dtype; default the accumulation type (i32 / f32).
        reduce_op: add, mul, max or min.
        weight: the weight (stationary / TRF) input, by index or name.
        pad: operand name -> per-dimension (lo, hi) zero padding.
        label: a free-form name (not part of the content hash).

    Raises:
        ProblemError: naming the offending token and how to fix it, for any malformed argument.
    """
    ins, (out_name, out_dims) = parse_einsum(expr)
    if not isinstance(reduce_op, str) or reduce_op not in ("add", "mul", "max", "min"):
        raise ProblemError(f"unknown reduce op {reduce_op!r}", token=str(reduce_op), hint="use add, mul, max or min")
    if not isinstance(label, str):
        raise ProblemError("label must be a string", token="label", hint='e.g. "resnet50 conv1"')
    used = [t.axis for _, dims in ins for d in dims for t in d.terms] + [t.axis for d in out_dims for t in d.terms]
    axes = _axis_sizes(sizes, used)
    names = [n for n, _ in ins]

    def dtype_of(name: str) -> str:
        raw = dtype.get(name) if isinstance(dtype, MappingT) else dtype
        if raw is None:
            raise ProblemError(f"no dtype for operand {name}", token=name, hint=f"add {name} to the dtypes")
        try:
            return dtypes.canonical_dtype(raw)
        except ValueError as e:
            raise ProblemError(f"unknown dtype of operand {name}", token=str(raw), hint=str(e)) from None

    if isinstance(dtype, MappingT):
        for k in dtype:
            if k not in names:
                raise ProblemError(f"dtype given for {k}, which is not an input", token=str(k), hint=f"inputs: {names}")
    pads = _pads(pad, ins)
    inputs = [Operand(name=name, dims=dims, dtype=dtype_of(name), pad=pads.get(name)) for name, dims in ins]
    acc = dtypes.accumulator_of([o.dtype for o in inputs])
    try:
        odt = dtypes.canonical_dtype(out_dtype) if out_dtype else acc
    except ValueError as e:
        raise ProblemError("unknown output dtype", token=str(out_dtype), hint=str(e)) from None
    return Problem(
        axes=axes,
        inputs=tuple(inputs),
        output=Operand(name=out_name, dims=out_dims, dtype=odt),
        reduce_op=reduce_op,
        weight=_weight_index(weight, names),
        label=label,
    )
