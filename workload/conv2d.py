"""conv2d front-end with the ttnn conv2d parameters (tenstorrent-conv2d.md, "conv2d" Python API).

A convolution is lowered into the problem model with eight axes, always in this order::

    n   batch              oh  output height       ow  output width
    fh  kernel height      fw  kernel width
    g   group              ci  input channels per group     co  output channels per group

    X[n, oh:sh + fh:dh, ow:sw + fw:dw, g, ci]      activation, NHWC with C split (g, ci)
    W[fh, fw, g, ci, co]                           weight, ttnn's [Kh, Kw, Ci, Co] order
    Y[n, oh, ow, g, co]                            output, NHWC with C split (g, co)

Padding stays explicit as zero padding of X's height and width dimensions. Axes of size 1 are
kept, so every conv problem has the same layout and `as_conv2d` can recover the parameters.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from workload import dtypes
from workload.errors import ProblemError
from workload.problem import MAX_AXIS_SIZE, MAX_COEFF, IndexExpr, Operand, Problem

CONV_AXES = ("n", "oh", "ow", "fh", "fw", "g", "ci", "co")


def _pair(v: int | tuple[int, int] | list[int], name: str) -> tuple[int, int]:
    if isinstance(v, bool):
        raise ProblemError(f"{name} must be an integer or a pair", token=name, hint="e.g. 3 or [3, 3]")
    if isinstance(v, int):
        return (v, v)
    if isinstance(v, list | tuple) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return (int(v[0]), int(v[1]))
    raise ProblemError(f"{name}={v!r} must be an integer or a pair of integers", token=name, hint="e.g. 3 or [3, 3]")


def _dtype(value: object, field: str) -> str:
    """The canonical dtype of a conv2d dtype parameter, or a ProblemError naming the parameter."""
    try:
        return dtypes.canonical_dtype(value)  # type: ignore[arg-type]  # any value: unknown ones raise
    except ValueError as e:
        raise ProblemError(f"unknown {field} {value!r}", token=field, hint=str(e)) from None


class Conv2dParams(BaseModel):
    """The ttnn conv2d parameters of one convolution."""

    model_config = ConfigDict(frozen=True)
    batch: int = Field(ge=1)
    in_channels: int = Field(ge=1)
    out_channels: int = Field(ge=1)
    input_height: int = Field(ge=1)
    input_width: int = Field(ge=1)
    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = Field(default=1, ge=1)

    @property
    def output_height(self) -> int:
        return (self.input_height + 2 * self.padding[0] - self.dilation[0] * (self.kernel[0] - 1) - 1) // self.stride[
            0
        ] + 1

    @property
    def output_width(self) -> int:
        return (self.input_width + 2 * self.padding[1] - self.dilation[1] * (self.kernel[1] - 1) - 1) // self.stride[
            1
        ] + 1

    def is_matmul(self) -> bool:
        """A 1x1, stride-1, unpadded, ungrouped conv is a plain matmul (tenstorrent-conv2d.md, Introduction)."""
        return self.kernel == (1, 1) and self.stride == (1, 1) and self.padding == (0, 0) and self.groups == 1


def conv2d(
    *,
    batch: int,
    in_channels: int,
    out_channels: int,
    input_height: int,
    input_width: int,
    kernel: int | tuple[int, int],
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    dilation: int | tuple[int, int] = 1,
    groups: int = 1,
    dtype: str = "bf16",
    weights_dtype: str | None = None,
    out_dtype: str | None = None,
    label: str = "",
) -> Problem:
    """Lower a conv2d into a `Problem` (see the module docstring for the layout)."""
    kh, kw = _pair(kernel, "kernel")
    sh, sw = _pair(stride, "stride")
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    ints = {
        "batch": batch,
        "in_channels": in_channels,
        "out_channels": out_channels,
        "input_height": input_height,
        "input_width": input_width,
        "groups": groups,
    }
    for key, v in ints.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise ProblemError(f"{key} must be an integer", token=key, hint=f"give {key} as a positive integer")
        if v < 1:
            raise ProblemError(f"{key}={v} is not positive", token=key, hint=f"{key} must be >= 1")
        if v > MAX_AXIS_SIZE:
            raise ProblemError(
                f"{key}={v} exceeds the limit of {MAX_AXIS_SIZE}",
                token=key,
                hint=f"split the problem so that {key} is at most {MAX_AXIS_SIZE}",
            )
    if not isinstance(label, str):
        raise ProblemError("label must be a string", token="label", hint='e.g. "resnet50 conv1"')
    limits = (("kernel", (kh, kw), MAX_AXIS_SIZE), ("stride", (sh, sw), MAX_COEFF), ("dilation", (dh, dw), MAX_COEFF))
    for name, (a, b), limit in limits:
        if a < 1 or b < 1:
            raise ProblemError(
                f"{name} ({a}, {b}) must be >= 1",
                token=name,
                hint=f"a {name} of {min(a, b)} is meaningless: use 1 or more",
            )
        if a > limit or b > limit:
            raise ProblemError(
                f"{name} ({a}, {b}) exceeds the limit of {limit}", token=name, hint=f"use a {name} of at most {limit}"
            )
    if ph < 0 or pw < 0:
        raise ProblemError(f"padding ({ph}, {pw}) is negative", token="padding", hint="padding must be >= 0")
    if ph > MAX_AXIS_SIZE or pw > MAX_AXIS_SIZE:
        raise ProblemError(
            f"padding ({ph}, {pw}) exceeds the limit of {MAX_AXIS_SIZE}",
            token="padding",
            hint="pad by at most the kernel span",
        )
    if in_channels % groups or out_channels % groups:
        counts = [f"{k}={v}" for k, v in (("in_channels", in_channels), ("out_channels", out_channels)) if v % groups]
        raise ProblemError(
            f"groups={groups} does not divide {' and '.join(counts)}",
            token="groups",
            hint="use a groups value that divides both channel counts (groups=in_channels for depthwise)",
        )
    params = Conv2dParams(
        batch=batch,
        in_channels=in_channels,
        out_channels=out_channels,
        input_height=input_height,
        input_width=input_width,
        kernel=(kh, kw),
        stride=(sh, sw),
        padding=(ph, pw),
        dilation=(dh, dw),
        groups=groups,
    )
    ho, wo = params.output_height, params.output_width
    spans: tuple[tuple[str, int, int, int, int, int], ...] = (
        ("height", ho, input_height, ph, kh, dh),
        ("width", wo, input_width, pw, kw, dw),
    )
    for name, o, i, p, k, d in spans:
        if o < 1:
            raise ProblemError(
                f"the kernel's {name} span {d * (k - 1) + 1} is larger than the padded input {name} {i + 2 * p}",
                token="kernel",
                hint=f"shrink the kernel or dilation, or pad the input {name}",
            )
        if o > MAX_AXIS_SIZE:
            raise ProblemError(
                f"the output {name} {o} exceeds the limit of {MAX_AXIS_SIZE}",
                token="padding",
                hint=f"reduce the padding or the input {name}",
            )
    xdt = _dtype(dtype, "dtype")
    wdt = _dtype(dtype if weights_dtype in (None, "") else weights_dtype, "weights_dtype")
    odt = dtypes.accumulator_of([xdt, wdt]) if out_dtype in (None, "") else _dtype(out_dtype, "out_dtype")
    cig, cog = in_channels // groups, out_channels // groups
    axes = {"n": batch, "oh": ho, "ow": wo, "fh": kh, "fw": kw, "g": groups, "ci": cig, "co": cog}
    # Padded extent of the height dim is (ho-1)*sh + (kh-1)*dh + 1; the rows beyond the real input and
    # its low padding are high padding (possibly less than ph when the stride leaves a remainder).
    ext_h = (ho - 1) * sh + (kh - 1) * dh + 1
    ext_w = (wo - 1) * sw + (kw - 1) * dw + 1
    hi_h, hi_w = ext_h - ph - input_height, ext_w - pw - input_width
    # A negative high pad keeps the trailing input rows a stride skips (see workload.problem).
    x_pad = ((0, 0), (ph, hi_h), (pw, hi_w), (0, 0), (0, 0))
    x = Operand(
        name="X",
        dims=(
            IndexExpr.of("n"),
            IndexExpr.of(("oh", sh), ("fh", dh)),
            IndexExpr.of(("ow", sw), ("fw", dw)),
            IndexExpr.of("g"),
            IndexExpr.of("ci"),
        ),
        dtype=xdt,
        pad=x_pad if any(lo or hi for lo, hi in x_pad) else None,
    )
    w = Operand(
        name="W",
        dims=tuple(IndexExpr.of(a) for a in ("fh", "fw", "g", "ci", "co")),
        dtype=wdt,
    )
    y = Operand(name="Y", dims=tuple(IndexExpr.of(a) for a in ("n", "oh", "ow", "g", "co")), dtype=odt)
    return Problem(axes=axes, inputs=(x, w), output=y, reduce_op="add", weight=1, label=label)


def as_conv2d(problem: Problem) -> Conv2dParams | None:
    """Recover the conv2d parameters of a problem built by `conv2d` (None for any other problem)."""
    if set(problem.axes) != set(CONV_AXES) or len(problem.inputs) != 2 or problem.weight != 1:
        return None
    x, w = problem.inputs
    if [str(d) for d in w.dims] != ["fh", "fw", "g", "ci", "co"]:
        return None
    if [str(d) for d in problem.output.dims] != ["n", "oh", "ow", "g", "co"]:
        return None
    if len(x.dims) != 5 or str(x.dims[0]) != "n" or str(x.dims[3]) != "g" or str(x.dims[4]) != "ci":
        return None
    hc = {t.axis: t.coeff for t in x.dims[1].terms}  # written in either order: oh:sh + fh:dh
    wc = {t.axis: t.coeff for t in x.dims[2].terms}
    if len(x.dims[1].terms) != 2 or set(hc) != {"oh", "fh"} or len(x.dims[2].terms) != 2 or set(wc) != {"ow", "fw"}:
        return None
    a = problem.axes
    (ph, _), (pw, _) = x.pads()[1], x.pads()[2]
    real_h, real_w = problem.shape(x)[1], problem.shape(x)[2]
    if any(x.pads()[d] != (0, 0) for d in (0, 3, 4)):
        return None
    params = Conv2dParams(
        batch=a["n"],
        in_channels=a["g"] * a["ci"],
        out_channels=a["g"] * a["co"],
        input_height=real_h,
        input_width=real_w,
        kernel=(a["fh"], a["fw"]),
        stride=(hc["oh"], wc["ow"]),
        padding=(ph, pw),
        dilation=(hc["fh"], wc["fw"]),
        groups=a["g"],
    )
    # Same names but padding no conv2d produces (its high side follows from the output size formula).
    if params.output_height != a["oh"] or params.output_width != a["ow"] or any(p != (0, 0) for p in w.pads()):
        return None
    return params
