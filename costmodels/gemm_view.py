"""The GEMM view of a binary problem: which axes play batch, M, N and K.

Every contraction engine in this project multiplies a moving operand by a stationary (weight)
operand. Flattening a problem to ``C[b, m, n] = sum_k A[b, m, k] * W[b, k, n]`` tells each cost
model the sizes it tiles, without looking at axis names:

- batch: in both inputs and in the output;
- m: in the moving input and the output, not the weight;
- n: in the weight and the output, not the moving input;
- k: reduced (not in the output).

A conv2d lowers to M = n*oh*ow, K = fh*fw*ci, N = co, batch = g: the im2col view
(tenstorrent-conv2d.md, "Convolution as Matrix Multiplication").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workload.problem import Problem


@dataclass(frozen=True)
class GemmView:
    """Axis roles and flattened sizes of a binary problem."""

    moving: int  # index of the moving (streamed) input
    stationary: int  # index of the weight input
    batch_axes: tuple[str, ...]
    m_axes: tuple[str, ...]
    n_axes: tuple[str, ...]
    k_axes: tuple[str, ...]
    sizes: dict[str, int]

    def _prod(self, axes: tuple[str, ...]) -> int:
        return math.prod(self.sizes[a] for a in axes)

    @property
    def B(self) -> int:
        return self._prod(self.batch_axes)

    @property
    def M(self) -> int:
        return self._prod(self.m_axes)

    @property
    def N(self) -> int:
        return self._prod(self.n_axes)

    @property
    def K(self) -> int:
        return self._prod(self.k_axes)


def gemm_view(problem: Problem) -> GemmView:
    """Classify the axes of a binary problem (the weight input defaults to the second one).

    Raises:
        ValueError: the problem is unary.
    """
    if not problem.is_binary:
        raise ValueError("a GEMM view needs two inputs")
    w = problem.weight if problem.weight is not None else 1
    mv = 1 - w
    in_w = set(problem.inputs[w].axes)
    in_mv = set(problem.inputs[mv].axes)
    free = set(problem.free_axes)
    order = list(problem.axes)
    batch = tuple(a for a in order if a in free and a in in_w and a in in_mv)
    m = tuple(a for a in order if a in free and a in in_mv and a not in in_w)
    n = tuple(a for a in order if a in free and a in in_w and a not in in_mv)
    k = tuple(a for a in order if a not in free)
    return GemmView(moving=mv, stationary=w, batch_axes=batch, m_axes=m, n_axes=n, k_axes=k, sizes=dict(problem.axes))
