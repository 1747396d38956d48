"""Property tests (hypothesis): parse -> canonical form -> hash raises nothing but ProblemError, and the
hash is stable under rewriting and sensitive to every semantic change."""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workload.canonical import canonical_form, content_hash
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.problem import Problem
from workload.spec import problem_from_dict

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = ("i4", "i8", "i32", "f8e4m3", "f8e5m2", "bf16", "f16", "f32")
#: what a corrupted field may hold: every dtype, the block floats (inputs only) included
ANY_DTYPE = (*DTYPES, "bfloat8_b", "bfloat4_b")
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _parse_and_hash(build: Any) -> None:
    """Run build() -> canonical form -> hash; only ProblemError may escape."""
    try:
        p = build()
    except ProblemError as e:
        assert isinstance(e.message, str) and e.message
        return
    canonical_form(p)
    assert len(content_hash(p)) == 64


# ---- (a) arbitrary input -----------------------------------------------------------------------
EINSUM_CHARS = "abkmnXYW_[](),:+->$ 0123\t"


@SETTINGS
@given(text=st.one_of(st.text(max_size=40), st.text(alphabet=EINSUM_CHARS, max_size=40)), size=st.integers(-2, 5))
def test_arbitrary_text_raises_only_problem_error(text: str, size: int) -> None:
    sizes = {tok: size for tok in _IDENT.findall(text)}
    _parse_and_hash(lambda: einsum(text, sizes))
    _parse_and_hash(lambda: einsum(text, {c: 2 for c in text if c.isalpha()}, reduce_op="max"))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
EINSUM_FIELDS = ("expr", "sizes", "dtype", "out_dtype", "reduce_op", "weight", "pad", "label")
CONV_FIELDS = (
    "batch",
    "in_channels",
    "out_channels",
    "input_height",
    "input_width",
    "kernel",
    "stride",
    "padding",
    "dilation",
    "groups",
    "dtype",
    "weights_dtype",
    "out_dtype",
    "label",
)
GOOD_EINSUM: dict[str, Any] = {
    "kind": "einsum",
    "expr": "X[m:2 + k, c], W[k, c] -> Y[m]",
    "sizes": {"m": 3, "k": 2, "c": 4},
    "dtype": "i8",
    "weight": 1,
    "pad": {"X": [[1, 0], [0, 0]]},
}
GOOD_CONV: dict[str, Any] = {
    "kind": "conv2d",
    "in_channels": 4,
    "out_channels": 4,
    "input_height": 6,
    "input_width": 5,
    "kernel": 3,
    "padding": 1,
    "stride": 2,
    "groups": 2,
}


@pytest.mark.slow
@SETTINGS
@given(data=st.dictionaries(st.text(max_size=8), JSON, max_size=5))
def test_arbitrary_dicts_raise_only_problem_error(data: dict[str, Any]) -> None:
    _parse_and_hash(lambda: problem_from_dict(data))


@SETTINGS
@given(
    base=st.sampled_from([GOOD_EINSUM, GOOD_CONV]),
    field=st.sampled_from(EINSUM_FIELDS + CONV_FIELDS + ("kind",)),
    value=st.one_of(JSON, st.integers(-3, 40), st.sampled_from((*ANY_DTYPE, "add", "mul", "max", "X", "W", "Y"))),
)
def test_valid_specs_with_one_field_corrupted_raise_only_problem_error(
    base: dict[str, Any], field: str, value: Any
) -> None:
    _parse_and_hash(lambda: problem_from_dict({**base, field: value}))


@SETTINGS
@given(field=st.sampled_from(EINSUM_FIELDS), value=st.one_of(JSON, st.integers(-3, 40), st.sampled_from(ANY_DTYPE)))
def test_einsum_front_end_with_any_argument_raises_only_problem_error(field: str, value: Any) -> None:
    args = {k: v for k, v in GOOD_EINSUM.items() if k != "kind"}
    args[field] = value
    _parse_and_hash(lambda: einsum(**args))


@SETTINGS
@given(field=st.sampled_from(CONV_FIELDS), value=st.one_of(JSON, st.integers(-3, 40), st.sampled_from(ANY_DTYPE)))
def test_conv2d_front_end_with_any_argument_raises_only_problem_error(field: str, value: Any) -> None:
    args = {k: v for k, v in GOOD_CONV.items() if k != "kind"}
    args[field] = value
    _parse_and_hash(lambda: conv2d(batch=1, **args) if field != "batch" else conv2d(**args))


# ---- (b) generated valid problems ----------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """A problem independent of names and spacing: axes are integers."""

    sizes: tuple[int, ...]
    inputs: tuple[tuple[tuple[tuple[int, int], ...], ...], ...]  # input -> dim -> (axis, coeff) terms
    output: tuple[int, ...]
    dtypes: tuple[str, ...]
    out_dtype: str | None
    reduce_op: str
    weight: int | None
    pads: tuple[tuple[tuple[int, int], ...], ...]  # input -> dim -> (lo, hi)

    def extent(self, terms: tuple[tuple[int, int], ...]) -> int:
        return sum(c * (self.sizes[a] - 1) for a, c in terms) + 1


def _random_shape(rng: random.Random) -> Shape:
    """A random valid shape; sizes and coefficients lean to the edges (1, small)."""
    n_axes = rng.randint(1, 6)
    sizes = tuple(rng.choice([1, 1, 2, 3, 4, 5, 7, 9]) for _ in range(n_axes))
    n_in = rng.randint(1, 2)

    def dim() -> tuple[tuple[int, int], ...]:
        axes = rng.sample(range(n_axes), min(n_axes, rng.choice([1, 1, 1, 2])))
        return tuple((a, rng.choice([1, 1, 2, 3])) for a in axes)

    inputs = [tuple(dim() for _ in range(rng.randint(1, 4))) for _ in range(n_in)]
    used = {a for op in inputs for d in op for a, _ in d}
    inputs[0] = inputs[0] + tuple(((a, 1),) for a in range(n_axes) if a not in used)  # every axis used
    output = tuple(rng.sample(range(n_axes), rng.randint(0, n_axes)))
    base = Shape(sizes, tuple(inputs), output, tuple(rng.choice(DTYPES) for _ in range(n_in)), None, "add", None, ())
    pads = []
    for op in inputs:
        per = []
        for d in op:
            ext = base.extent(d)
            lo = rng.randint(0, 2) if ext > 2 and rng.random() < 0.3 else 0
            hi = rng.randint(-1, 1) if ext - lo > 2 and rng.random() < 0.3 else 0
            per.append((lo, hi))
        pads.append(tuple(per))
    padded = any(lo or hi for op in pads for lo, hi in op)
    ops = ["add"] + (["mul", "max", "min"] if len(output) < n_axes and not padded else [])
    return replace(
        base,
        out_dtype=rng.choice([None, None, *DTYPES]),
        reduce_op=rng.choice(ops),
        weight=rng.choice([None, *range(n_in)]),
        pads=tuple(pads),
    )


def shapes() -> st.SearchStrategy[Shape]:
    """Valid shapes, drawn from one seed (hypothesis draws per axis were too slow for the time budget)."""
    return st.integers(0, 2**32).map(lambda seed: _random_shape(random.Random(seed)))


_FIRST = string.ascii_letters
_REST = string.ascii_letters + string.digits + "_"


def _render(shape: Shape, seed: int) -> Problem:
    """Write the shape as a structured einsum with fresh names, term orders and spacing (chosen by `seed`)."""
    rng = random.Random(seed)
    names: list[str] = []
    while len(names) < len(shape.sizes):
        name = rng.choice(_FIRST) + "".join(rng.choices(_REST, k=rng.randint(0, 5)))
        if name not in names:
            names.append(name)
    op_names = rng.sample(["A", "B", "Y", "X", "W", "Out", "In0", "Kt", "Q", "S"], 3)

    def space() -> str:
        return rng.choice(["", "", " ", "  ", "\t", "\n"])

    def expr(terms: tuple[tuple[int, int], ...]) -> str:
        order = rng.sample(terms, len(terms))
        return f"{space()}+{space()}".join(
            names[a] if c == 1 else f"{names[a]}{space()}:{space()}{c}" for a, c in order
        )

    def operand(name: str, dims: list[str]) -> str:
        return f"{name}{space()}[{space()}{f'{space()},{space()}'.join(dims)}{space()}]"

    ins = [operand(op_names[i], [expr(d) for d in dims]) for i, dims in enumerate(shape.inputs)]
    out = operand(op_names[2], [names[a] for a in shape.output])
    text = f"{space()},{space()}".join(ins) + f"{space()}->{space()}" + out
    sizes = {names[a]: shape.sizes[a] for a in rng.sample(range(len(shape.sizes)), len(shape.sizes))}
    weight: int | str | None = shape.weight
    if shape.weight is not None and rng.random() < 0.5:
        weight = op_names[shape.weight]
    return einsum(
        text,
        sizes,
        dtype={op_names[i]: dt for i, dt in enumerate(shape.dtypes)},
        out_dtype=shape.out_dtype,
        reduce_op=shape.reduce_op,
        weight=weight,
        pad={op_names[i]: list(p) for i, p in enumerate(shape.pads)},
        label=str(rng.random()),
    )


@SETTINGS
@given(shape=shapes(), seeds=st.tuples(st.integers(0, 2**32), st.integers(0, 2**32)))
def test_renaming_and_spacing_keep_the_hash(shape: Shape, seeds: tuple[int, int]) -> None:
    first = _render(shape, seeds[0])
    second = _render(shape, seeds[1])
    assert content_hash(first) == content_hash(second)
    assert first.macs == second.macs and first.min_bytes == second.min_bytes


def _mutations(shape: Shape) -> list[Shape]:
    """Semantic changes of a valid shape that stay valid."""
    out = [replace(shape, sizes=(shape.sizes[0] + 1, *shape.sizes[1:]))]
    dts = list(shape.dtypes)
    dts[-1] = "f32" if dts[-1] != "f32" else "i8"
    out.append(replace(shape, dtypes=tuple(dts)))
    out.append(replace(shape, out_dtype="bf16" if shape.out_dtype != "bf16" else "f16"))
    out.append(replace(shape, weight=0 if shape.weight is None else None))
    padded = any(lo or hi for op in shape.pads for lo, hi in op)
    if len(shape.output) < len(shape.sizes) and not padded:
        out.append(replace(shape, reduce_op="max" if shape.reduce_op != "max" else "min"))
    if shape.reduce_op == "add":  # shift the data of the first dimension by one (same real size)
        first = shape.pads[0]
        moved = ((first[0][0] + 1, first[0][1] + 1 - 2), *first[1:])
        out.append(replace(shape, pads=(moved, *shape.pads[1:])))
    (axis, coeff), *rest = shape.inputs[0][0]
    bumped = (((axis, coeff + 1), *rest), *shape.inputs[0][1:])
    out.append(replace(shape, inputs=(bumped, *shape.inputs[1:])))
    return out


@SETTINGS
@given(shape=shapes(), seed=st.integers(0, 2**32))
def test_semantic_changes_change_the_hash(shape: Shape, seed: int) -> None:
    h = content_hash(_render(shape, seed))
    for n, changed in enumerate(_mutations(shape)):
        try:
            other = _render(changed, seed + n + 1)
        except ProblemError:  # a padding shift that leaves no real data: not a valid change
            continue
        assert content_hash(other) != h, changed
