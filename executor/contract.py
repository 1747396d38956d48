"""One tile-step contraction over labelled arrays: BLAS for sums of products, ufuncs otherwise.

Every array dimension carries a label. A binary add-contraction is flattened to one batched
``np.matmul`` call: labels in both inputs and the output are batch, labels of one input and the
output are M (or N), labels of both inputs not in the output are K; a label of one input only
and not in the output is summed out first. This keeps every tile step inside BLAS, which is
what makes tiled execution cost a small multiple of one ``np.matmul`` call (``np.einsum``
without BLAS is 10-24x slower, see the executor issue's measurements).

mul / max / min reductions, and unary problems, broadcast the operands to a common label order
and reduce with the ufunc.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from workload.reference import aligned

Labels = tuple[str, ...]

_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def ufunc_of(reduce_op: str) -> np.ufunc:
    """The numpy ufunc of a reduce op."""
    return _UFUNC[reduce_op]


def _sum_out(a: np.ndarray, la: Labels, drop: Sequence[str]) -> tuple[np.ndarray, Labels]:
    if not drop:
        return a, la
    axes = tuple(la.index(x) for x in drop)
    return a.sum(axis=axes, dtype=a.dtype), tuple(x for x in la if x not in drop)


def _blasable(x: np.ndarray) -> np.ndarray:
    """`x` itself when BLAS can read its last two dimensions in place, else a contiguous copy.

    numpy's matmul silently falls back to a slow non-BLAS loop for other layouts (for example the
    arbitrary strides of size-1 dimensions of a stride-trick view).
    """
    item = x.itemsize
    s0, s1, s2 = x.strides
    rows_ok = x.shape[1] == 1 or (s1 % item == 0 and s1 >= x.shape[2] * item)
    if s2 == item and rows_ok and s0 % item == 0:
        return x
    return np.ascontiguousarray(x)


def matmul_contract(a: np.ndarray, la: Labels, b: np.ndarray, lb: Labels, out: Labels) -> np.ndarray:
    """``sum over (la | lb) - out`` of ``a * b``, as one batched matmul; result in `out` order."""
    sa, sb, so = set(la), set(lb), set(out)
    a, la = _sum_out(a, la, [x for x in la if x not in sb and x not in so])
    b, lb = _sum_out(b, lb, [x for x in lb if x not in sa and x not in so])
    batch = [x for x in out if x in la and x in lb]
    m = [x for x in out if x in la and x not in lb]
    n = [x for x in out if x in lb and x not in la]
    k = [x for x in la if x in lb and x not in so]
    size = {**dict(zip(la, a.shape, strict=True)), **dict(zip(lb, b.shape, strict=True))}
    bs, ms, ns, ks = (math.prod(size[x] for x in g) for g in (batch, m, n, k))
    a3 = a.transpose([la.index(x) for x in (*batch, *m, *k)]).reshape(bs, ms, ks)
    b3 = b.transpose([lb.index(x) for x in (*batch, *k, *n)]).reshape(bs, ks, ns)
    c = np.matmul(_blasable(a3), _blasable(b3))
    order = (*batch, *m, *n)
    c = c.reshape(tuple(size[x] for x in order))
    return c.transpose([order.index(x) for x in out])


def ufunc_contract(arrays: Sequence[np.ndarray], labels: Sequence[Labels], out: Labels, reduce_op: str) -> np.ndarray:
    """Reduce the elementwise product of `arrays` with `reduce_op` over every label not in `out`."""
    order: list[str] = list(out)
    for la in labels:
        order.extend(x for x in la if x not in order)
    full = tuple(order)
    prod: np.ndarray | None = None
    for arr, la in zip(arrays, labels, strict=True):
        v = aligned(arr, la, full)
        prod = v if prod is None else prod * v
    assert prod is not None
    reduced = tuple(range(len(out), len(full)))
    if not reduced:
        return np.array(prod)
    return ufunc_of(reduce_op).reduce(prod, axis=reduced)


def contract(arrays: Sequence[np.ndarray], labels: Sequence[Labels], out: Labels, reduce_op: str) -> np.ndarray:
    """Contract labelled operands into the `out` labels (BLAS for binary sums of products)."""
    if reduce_op == "add" and len(arrays) == 2:
        return matmul_contract(arrays[0], labels[0], arrays[1], labels[1], out)
    if reduce_op == "add" and len(arrays) == 1:
        a, la = _sum_out(arrays[0], labels[0], [x for x in labels[0] if x not in out])
        return a.transpose([la.index(x) for x in out])
    return ufunc_contract(arrays, labels, out, reduce_op)
