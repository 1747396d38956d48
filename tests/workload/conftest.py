"""Fixtures of the workload tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest

LoopConv = Callable[[np.ndarray, np.ndarray, tuple[int, int], tuple[int, int], tuple[int, int]], np.ndarray]


def loop_conv2d(
    x: np.ndarray,
    w: np.ndarray,
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
) -> np.ndarray:
    """Grouped conv2d by a loop over output pixels, with explicit zero padding.

    x: (n, H, W, g, ci) real input; w: (kh, kw, g, ci, co). Returns (n, OH, OW, g, co).
    """
    n, h, wd, g, ci = x.shape
    kh, kw, _, _, co = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.zeros((n, h + 2 * ph, wd + 2 * pw, g, ci), dtype=x.dtype)
    xp[:, ph : ph + h, pw : pw + wd] = x
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, oh, ow, g, co), dtype=x.dtype)
    for b, i, j, gg in itertools.product(range(n), range(oh), range(ow), range(g)):
        rows = [i * sh + a * dh for a in range(kh)]
        cols = [j * sw + c * dw for c in range(kw)]
        window = xp[b][np.ix_(rows, cols)][:, :, gg, :]  # (kh, kw, ci)
        y[b, i, j, gg] = np.tensordot(window, w[:, :, gg], axes=([0, 1, 2], [0, 1, 2]))
    return y


@pytest.fixture(scope="session")
def conv2d_by_loops() -> LoopConv:
    """A grouped conv2d written as loops over output pixels: the independent reference of the conv tests."""
    return loop_conv2d
