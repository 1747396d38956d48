"""The folded stem: a strided conv2d rewritten as a stride-1 conv on space-to-depth folded input.

tt-metal runs ResNet-50's stem (7x7, stride 2, padding 3, 3 channels) this way: the image is padded
and folded so that each ``s_h x s_w`` patch of pixels becomes one pixel of ``s_h * s_w`` times the
channels, the kernel is padded to a multiple of the stride and folded the same way, and the conv is
then a stride-1, unpadded conv with a ``ceil(K/s)`` kernel (7x7 -> 8x8 -> 4x4 for s = 2) on 115x115
pixels of 16 channels. What this module follows, from tt-metal's sources:

- Channels are padded to a multiple of 4 first ("to make sure L1 read addresses are 16 bit
  aligned"), so 3 -> 4 -> 16 after a 2x2 fold (tt-metal ``models/utility_functions.py``,
  ``pad_and_fold_conv_activation_for_unity_stride`` and ``pad_and_fold_conv_filters_for_unity_stride``
  @c6ab5b0fc6bb; ttnn's ``fold`` op takes the same channel padding as ``pad_c``, ResNet-50's stem sets
  it to ``_nearest_y(c, 4) - c``, ``models/demos/ttnn_resnet/tt/ttnn_functional_resnet50*.py``).
- The input gets the conv's own padding on both sides before folding (``pad_h``, ``pad_w``), and the
  kernel is zero-padded at its end (bottom, right) to a multiple of the stride.
- Folded channel order: the pixel at offset ``(dh, dw)`` inside a patch lands at channels
  ``[i*C, (i+1)*C)`` with ``i = dh*s_w + dw`` (row-major over the patch, channels innermost), for
  the input and the kernel alike (the ``start_c = i * C`` loops of both functions above).
- ResNet-50 (``ttnn_functional_resnet50.py`` @451c19b96fa0): the stem conv becomes ``kernel (4, 4),
  stride (1, 1), padding (0, 0)`` on a 115x115 input (224 + 2*3 = 230 = 2*115).

[ASSUMPTION] tt-metal asserts square strides and square images; the algebra below holds for any
``(s_h, s_w)`` and any image, so this module allows them. Where the padded input is not a multiple of
the stride, or is longer than the strided windows read, the folded input is cut (or zero-extended) to
exactly ``Ho - 1 + ceil(Kh/s_h)`` folded rows (and likewise columns), so that the folded conv's output
is exactly the original's ``Ho x Wo`` (tt-metal's ResNet-50 stem needs neither: 230 = 2 * (112 - 1 + 4)).

The fold applies to a conv with a stride above 1 in some dimension, dilation 1 (a dilated window's
taps do not fall in consecutive patches) and one group (the fold interleaves every channel of a patch,
which a grouped weight cannot follow). It is exact: the folded conv sums the same products (plus
products with zero padding) in another order, so exact arithmetic gives the same result bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workload.conv2d import Conv2dParams, as_conv2d, conv2d
from workload.errors import ProblemError
from workload.problem import Problem

#: Channel alignment before folding (tt-metal: "pad channel size to 4 ... 16 bit aligned", module docstring).
CHANNEL_ALIGN = 4


def not_foldable(params: Conv2dParams) -> str | None:
    """Why the fold does not apply to a conv (None when it does)."""
    if params.stride == (1, 1):
        return "stride 1: there is nothing to fold"
    if params.dilation != (1, 1):
        return f"dilation {params.dilation}: a dilated window's taps do not fall in consecutive stride patches"
    if params.groups != 1:
        return f"groups={params.groups}: the fold interleaves every channel of a patch, a grouped weight cannot"
    return None


@dataclass(frozen=True)
class ConvFold:
    """How one conv is folded (see the module docstring): the original's parameters and the folded shapes."""

    params: Conv2dParams
    channel_align: int = CHANNEL_ALIGN

    @property
    def stride(self) -> tuple[int, int]:
        return self.params.stride

    @property
    def padded_channels(self) -> int:
        """Input channels after alignment (3 -> 4 for the stem)."""
        c = self.params.in_channels
        return -(-c // self.channel_align) * self.channel_align

    @property
    def folded_channels(self) -> int:
        """``s_h * s_w * padded_channels`` (16 for the stem)."""
        return self.stride[0] * self.stride[1] * self.padded_channels

    @property
    def folded_kernel(self) -> tuple[int, int]:
        """``ceil(K / s)`` per dimension (4x4 for the stem's 7x7 at stride 2)."""
        (kh, kw), (sh, sw) = self.params.kernel, self.stride
        return (-(-kh // sh), -(-kw // sw))

    @property
    def folded_hw(self) -> tuple[int, int]:
        """Folded input height and width: ``Ho - 1 + ceil(Kh/s_h)``, ``Wo - 1 + ceil(Kw/s_w)`` (115x115)."""
        kfh, kfw = self.folded_kernel
        return (self.params.output_height - 1 + kfh, self.params.output_width - 1 + kfw)

    @property
    def input_elements(self) -> int:
        """Elements of the original (real, unpadded) input tensor."""
        p = self.params
        return p.batch * p.input_height * p.input_width * p.in_channels

    @property
    def folded_elements(self) -> int:
        """Elements of the folded input tensor."""
        return self.params.batch * math.prod(self.folded_hw) * self.folded_channels

    def describe(self) -> str:
        p, (kfh, kfw), (hf, wf) = self.params, self.folded_kernel, self.folded_hw
        return (
            f"fold {self.stride[0]}x{self.stride[1]}: {p.kernel[0]}x{p.kernel[1]}/s{self.stride[0]}x{self.stride[1]} "
            f"conv on {p.input_height}x{p.input_width}x{p.in_channels} -> {kfh}x{kfw}/s1 conv on "
            f"{hf}x{wf}x{self.folded_channels} (channels {p.in_channels} -> {self.padded_channels} -> "
            f"{self.folded_channels})"
        )


def fold_of(problem: Problem) -> ConvFold:
    """The fold of a conv2d problem.

    Raises:
        ProblemError: the problem is not a conv2d, or the fold does not apply (`not_foldable`).
    """
    params = as_conv2d(problem)
    if params is None:
        raise ProblemError("the fold applies to conv2d problems only", token="fold")
    why = not_foldable(params)
    if why:
        raise ProblemError(f"the fold does not apply: {why}", token="fold")
    return ConvFold(params)


def folded_problem(problem: Problem, fold: ConvFold | None = None) -> Problem:
    """The stride-1 conv the fold turns `problem` into (same dtypes, same output shape)."""
    fold = fold or fold_of(problem)
    x, w = problem.inputs
    hf, wf = fold.folded_hw
    return conv2d(
        batch=fold.params.batch,
        in_channels=fold.folded_channels,
        out_channels=fold.params.out_channels,
        input_height=hf,
        input_width=wf,
        kernel=fold.folded_kernel,
        dtype=x.dtype,
        weights_dtype=w.dtype,
        out_dtype=problem.output.dtype,
        label=f"{problem.label} (folded)" if problem.label else "folded",
    )


def fold_input(fold: ConvFold, x: np.ndarray) -> np.ndarray:
    """Pad and fold the conv's real input ``X[n, h, w, g=1, c]`` into ``Xf[n, i, j, 1, (dh*s_w + dw)*C + c]``."""
    p = fold.params
    (sh, sw), (hf, wf), cp = fold.stride, fold.folded_hw, fold.padded_channels
    n = x.shape[0]
    rows, cols = sh * hf, sw * wf  # padded rows and columns the folded conv reads
    xp = np.zeros((n, rows, cols, cp), dtype=x.dtype)
    ph, pw = p.padding
    h = min(p.input_height, rows - ph)  # a stride may leave trailing input rows unread
    wd = min(p.input_width, cols - pw)
    xp[:, ph : ph + h, pw : pw + wd, : p.in_channels] = x[:, :h, :wd, 0, :]
    # (n, i, dh, j, dw, c) -> (n, i, j, dh, dw, c): channel index (dh*s_w + dw)*C + c
    folded = xp.reshape(n, hf, sh, wf, sw, cp).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(folded.reshape(n, hf, wf, 1, fold.folded_channels))


def fold_weight(fold: ConvFold, w: np.ndarray) -> np.ndarray:
    """Pad the kernel ``W[fh, fw, g=1, c, co]`` to a multiple of the stride and fold it like the input."""
    p = fold.params
    (sh, sw), (kfh, kfw), cp = fold.stride, fold.folded_kernel, fold.padded_channels
    co = w.shape[-1]
    wp = np.zeros((kfh * sh, kfw * sw, cp, co), dtype=w.dtype)
    wp[: p.kernel[0], : p.kernel[1], : p.in_channels] = w[:, :, 0]
    folded = wp.reshape(kfh, sh, kfw, sw, cp, co).transpose(0, 2, 1, 3, 4, 5)
    return np.ascontiguousarray(folded.reshape(kfh, kfw, 1, fold.folded_channels, co))


def fold_inputs(fold: ConvFold, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """``[X, W]`` of the original problem -> ``[Xf, Wf]`` of the folded one."""
    x, w = inputs
    return [fold_input(fold, np.asarray(x)), fold_weight(fold, np.asarray(w))]
