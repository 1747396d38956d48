"""The problem formats a user sends: JSON/YAML files for the CLI and request bodies of the REST API.

Two kinds, told apart by ``kind`` (inferred from the fields when absent):

- ``EinsumSpec``: an einsum string with axis sizes, dtypes, reduce op, weight operand, padding.
- ``Conv2dSpec``: the ttnn conv2d parameters (tenstorrent-conv2d.md, "conv2d" Python API and
  ``Conv2dConfig``'s ``dtype`` / ``weights_dtype``).

The models only check the *shape* of the input (types, known fields); the front-ends
(`workload.einsum.einsum`, `workload.conv2d.conv2d`) check the values and explain what is wrong.
`problem_from_dict` turns any malformed input into a `ProblemError` naming the offending field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    StrictInt,
    Tag,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)

from workload import dtypes
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.problem import MAX_AXIS_SIZE, Problem, ReduceOp

IntOrPair = StrictInt | tuple[StrictInt, StrictInt]


def _documented_range(least: int, most: int | None = None, pair: bool = True) -> WithJsonSchema:
    """The JSON schema of an int (or a pair of ints) from `least` (to `most`). Documentation only: the front-ends
    validate the value and say what is wrong with it (``stride of 0 is meaningless: use 1 or more``)."""
    one: dict[str, JsonValue] = {"type": "integer", "minimum": least}
    if most is not None:
        one["maximum"] = most
    both: dict[str, JsonValue] = {"type": "array", "items": one, "minItems": 2, "maxItems": 2}
    return WithJsonSchema({"anyOf": [one, both]} if pair else one)


#: a count (batch, channels, sides, groups), documented as at least 1
Count = Annotated[StrictInt, _documented_range(1, pair=False)]
#: kernel, stride or dilation: at least 1, one for both sides or a pair
PositivePair = Annotated[IntOrPair, _documented_range(1)]
#: padding: at least 0
PaddingPair = Annotated[IntOrPair, _documented_range(0)]
#: an axis size, documented as 1..MAX_AXIS_SIZE
AxisSize = Annotated[StrictInt, _documented_range(1, MAX_AXIS_SIZE, pair=False)]


def documented_names(names: list[str]) -> WithJsonSchema:
    """The JSON schema of a name among `names` (a dtype here, a target or an objective in the app's requests).
    Documentation only, as `_documented_range`: the validators also take other capitalisations of a dtype and say
    what is wrong with an unknown name."""
    return WithJsonSchema({"type": "string", "enum": cast(list[JsonValue], names)})


#: an input's dtype: every spelling `workload.dtypes` accepts (canonical names and aliases)
InputDtype = Annotated[str, documented_names(list(dtypes.ALIASES))]
#: an output's dtype: the same but tt-metal's block floats, input formats only (`workload.problem`)
OutputDtype = Annotated[str, documented_names([a for a, name in dtypes.ALIASES.items() if not dtypes.info(name).block])]

EINSUM_EXAMPLES: list[dict[str, Any]] = [
    {
        "kind": "einsum",
        "label": "batched matmul",
        "expr": "vmk,vnk->vmn",
        "sizes": {"v": 8, "m": 512, "n": 512, "k": 1024},
        "dtype": "bf16",
        "weight": 1,
    },
    {
        "kind": "einsum",
        "label": "attention scores (Llama-7B prefill, one layer)",
        "expr": "Q[b, h, s, d], K[b, h, t, d] -> S[b, h, s, t]",
        "sizes": {"b": 1, "h": 32, "s": 2048, "t": 2048, "d": 128},
        "dtype": {"Q": "bf16", "K": "bf16"},
        "out_dtype": "f32",
        "weight": "K",
    },
    {
        "kind": "einsum",
        "label": "row product",
        "expr": "ij->i",
        "sizes": {"i": 64, "j": 256},
        "dtype": "f32",
        "reduce_op": "mul",
    },
    {
        "kind": "einsum",
        "label": "stride-2 1-D convolution, padded",
        "expr": "X[w:2 + fw, c], W[fw, c, k] -> Y[w, k]",
        "sizes": {"w": 16, "fw": 3, "c": 32, "k": 64},
        "dtype": "i8",
        "weight": "W",
        "pad": {"X": [[1, 0], [0, 0]]},
    },
]

CONV2D_EXAMPLES: list[dict[str, Any]] = [
    {
        "kind": "conv2d",
        "label": "ResNet-50 conv2_x 3x3",
        "batch": 1,
        "in_channels": 64,
        "out_channels": 64,
        "input_height": 56,
        "input_width": 56,
        "kernel": [3, 3],
        "stride": [1, 1],
        "padding": [1, 1],
    },
    {
        "kind": "conv2d",
        "label": "MobileNet depthwise 3x3, stride 2",
        "batch": 1,
        "in_channels": 96,
        "out_channels": 96,
        "input_height": 112,
        "input_width": 112,
        "kernel": 3,
        "stride": 2,
        "padding": 1,
        "groups": 96,
    },
]


class EinsumSpec(BaseModel):
    """An einsum problem (compact ``"vmk,vnk->vmn"`` or structured ``"X[n, oh:2 + fh] ..."``)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": cast(list[JsonValue], EINSUM_EXAMPLES)})
    kind: Literal["einsum"] = "einsum"
    expr: Annotated[str, WithJsonSchema({"type": "string", "minLength": 1})] = Field(
        description="the einsum; compact inputs are named A, B and the output Y"
    )  # (documented as not empty; the front-end says what is wrong with an empty one)
    sizes: dict[str, AxisSize] = Field(description=f"axis name -> size (1..{MAX_AXIS_SIZE})")
    dtype: InputDtype | dict[str, InputDtype] = Field(
        default="bf16", description="one dtype for every input, or input -> dtype"
    )
    out_dtype: OutputDtype | None = Field(default=None, description="output dtype; default the accumulation type")
    reduce_op: ReduceOp = "add"
    weight: StrictInt | str | None = Field(default=None, description="the stationary input, by index or name")
    pad: dict[str, list[tuple[StrictInt, StrictInt]]] | None = Field(
        default=None, description="input name -> one [lo, hi] zero padding per dimension"
    )
    label: str = Field(default="", description="a free-form name; not part of the content hash")

    def to_problem(self) -> Problem:
        """Build the problem through the einsum front-end (raises `ProblemError`)."""
        return einsum(
            self.expr,
            self.sizes,
            dtype=self.dtype,
            out_dtype=self.out_dtype,
            reduce_op=self.reduce_op,
            weight=self.weight,
            pad=self.pad,
            label=self.label,
        )


class Conv2dSpec(BaseModel):
    """A 2-D convolution with the ttnn conv2d parameters (NHWC input, groups for depthwise)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": cast(list[JsonValue], CONV2D_EXAMPLES)})
    kind: Literal["conv2d"] = "conv2d"
    batch: Count = Field(default=1, description="batch_size")
    in_channels: Count
    out_channels: Count
    input_height: Count
    input_width: Count
    kernel: PositivePair = Field(description="kernel_size: (kernel_height, kernel_width) or one int for both")
    stride: PositivePair = 1
    padding: PaddingPair = Field(default=0, description="zero padding on each side: (height, width)")
    dilation: PositivePair = 1
    groups: Count = Field(default=1, description="divides both channel counts; in_channels for depthwise")
    dtype: InputDtype = Field(default="bf16", description="activation dtype")
    weights_dtype: InputDtype | None = Field(default=None, description="weight dtype; default the activation dtype")
    out_dtype: OutputDtype | None = Field(default=None, description="output dtype; default the accumulation type")
    label: str = ""

    def to_problem(self) -> Problem:
        """Build the problem through the conv2d front-end (raises `ProblemError`)."""
        return conv2d(**self.model_dump(exclude={"kind"}))


def kind_of(data: Any) -> str | None:
    """A problem spec's kind: its ``kind``, else inferred from its fields (``expr``: einsum; ``in_channels`` or
    ``kernel``: conv2d); None when neither tells (a ``kind`` that is not a string, or no telling field)."""
    if not isinstance(data, dict):
        kind = getattr(data, "kind", None)
        return kind if isinstance(kind, str) else None
    if "kind" in data:
        return data["kind"] if isinstance(data["kind"], str) else None
    if "expr" in data:
        return "einsum"
    if "in_channels" in data or "kernel" in data:
        return "conv2d"
    return None


#: the type of the validation error of a problem whose kind `kind_of` cannot tell
KIND_ERROR = "problem_kind"
#: one problem in the request format, of the kind `kind_of` tells (every front-end reads problems this way)
ProblemSpec = Annotated[
    Annotated[EinsumSpec, Tag("einsum")] | Annotated[Conv2dSpec, Tag("conv2d")],
    Discriminator(
        kind_of,
        custom_error_type=KIND_ERROR,
        custom_error_message="kind must be 'einsum' or 'conv2d' (it may be left out where expr, or in_channels or "
        "kernel, tells it)",
    ),
]
_ADAPTER: TypeAdapter[EinsumSpec | Conv2dSpec] = TypeAdapter(ProblemSpec)


#: Hints for fields whose type is a union (pydantic reports one error per alternative).
FIELD_HINTS: dict[str, str] = {
    "kernel": "give an integer or a pair of integers, e.g. 3 or [3, 3]",
    "stride": "give an integer or a pair of integers, e.g. 2 or [2, 2]",
    "padding": "give an integer or a pair of integers, e.g. 1 or [1, 1]",
    "dilation": "give an integer or a pair of integers, e.g. 1 or [2, 2]",
    "dtype": "give a dtype name (i4, i8, i32, f8e4m3, f8e5m2, bf16, f16, f32, bfloat8_b, bfloat4_b) "
    'or a mapping such as {"A": "i8"}',
    "weight": "give the weight input's index (0 or 1) or its name",
    "pad": 'give input name -> one [lo, hi] pair per dimension, e.g. {"A": [[1, 1], [0, 0]]}',
    "sizes": 'give axis name -> whole number, e.g. {"m": 64} (not 64.0 or "64")',
}


def _hint(err: Any, field: str) -> str:
    """How to fix one pydantic error, from the field it concerns, its type and its context."""
    kind = str(err.get("type", ""))
    if kind in ("union_tag_invalid", "union_tag_not_found", KIND_ERROR):
        return "set kind to 'einsum' or 'conv2d'"
    if kind == "missing" and field not in FIELD_HINTS:
        return "add this field"
    if kind == "extra_forbidden":
        return "remove this field (check its spelling)"
    if field in FIELD_HINTS:
        return FIELD_HINTS[field]
    if kind.startswith("int"):
        return 'give a whole number, e.g. 64 (not 64.0 or "64")'
    if kind.startswith("string"):
        return "give a string"
    if kind == "literal_error":
        return f"use one of {(err.get('ctx') or {}).get('expected', 'the documented values')}"
    return str(err.get("msg", "")) or "see the problem format in the README"


def _path(data: object, loc: tuple[Any, ...], missing: bool) -> list[str]:
    """The parts of an error location that address the input (pydantic adds union member tags)."""
    parts: list[str] = []
    cur = data
    for n, part in enumerate(loc):
        in_dict = isinstance(cur, dict) and part in cur
        in_list = isinstance(cur, list | tuple) and isinstance(part, int) and 0 <= part < len(cur)
        if in_dict or in_list:
            cur = cur[part]  # type: ignore[index]  # a dict or a sequence, checked just above
        elif not (missing and n == len(loc) - 1):
            continue
        parts.append(str(part))
    return parts


def _from_validation_error(e: ValidationError, data: object) -> ProblemError:
    """The first error of a pydantic ValidationError as a ProblemError naming the field."""
    first = e.errors()[0]
    kind = str(first.get("type", ""))
    if kind in ("union_tag_invalid", "union_tag_not_found", KIND_ERROR):
        return ProblemError(f"unknown kind of problem: {first.get('msg', '')}", token="kind", hint=_hint(first, "kind"))
    loc = tuple(first.get("loc", ()))
    path = _path(data, loc, kind == "missing")
    where = ".".join(path) or "problem"
    if len(loc) > len(path) + 1 and kind != "missing":  # a union: the first alternative's message misleads
        return ProblemError(
            f"invalid {where}: {first.get('input')!r} matches none of its accepted forms",
            token=where,
            hint=_hint(first, path[0] if path else ""),
        )
    return ProblemError(
        f"invalid {where}: {first.get('msg', 'invalid value')}", token=where, hint=_hint(first, path[0] if path else "")
    )


def _with_kind(data: dict[Any, Any]) -> dict[Any, Any]:
    """Infer ``kind`` when absent (`kind_of`)."""
    if "kind" in data:
        return data
    kind = kind_of(data)
    if kind is None:
        raise ProblemError(
            "cannot tell the kind of problem", token="kind", hint="set kind to 'einsum' (with expr) or 'conv2d'"
        )
    return {**data, "kind": kind}


def spec_from_dict(data: object) -> EinsumSpec | Conv2dSpec:
    """Validate a JSON/YAML mapping into a spec.

    Raises:
        ProblemError: naming the offending field and how to fix it.
    """
    if not isinstance(data, dict):
        raise ProblemError(
            f"a problem is a mapping of fields, not {type(data).__name__}",
            token="problem",
            hint='e.g. {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 64, "k": 64, "n": 64}}',
        )
    try:
        return _ADAPTER.validate_python(_with_kind(data))
    except ValidationError as e:
        raise _from_validation_error(e, data) from None


def problem_from_dict(data: object) -> Problem:
    """Build a `Problem` from a JSON/YAML mapping (an einsum or a conv2d spec).

    Raises:
        ProblemError: for any malformed input, naming the offending field or token and how to fix it.
    """
    spec = spec_from_dict(data)
    try:
        return spec.to_problem()
    except ValidationError as e:  # a value the front-end passed on unchecked (a bug, reported clearly)
        raise _from_validation_error(e, data) from None
