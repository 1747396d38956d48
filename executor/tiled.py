"""Run any `Mapping` tile by tile in numpy, accumulating in the mapping's order and types.

The executor knows nothing about targets; it reads the loop nest:

- **Free (output) axes** are independent, so all their loops run batched: every output point
  the mapping visits is computed at once. Visits past an axis size (padding) are never written;
  an output point the mapping never visits keeps NaN (and ``written=False``), a point visited
  twice is computed twice with identical results and written once.
- **Reduction axes** accumulate in the mapping's order. Their loops fall into three groups:
  the loops of the innermost level form the *instruction tile* and run as one operation (one
  BLAS call over every free position); the *temporal* loops of outer levels are iterated in nest
  order, each step's contribution added into the accumulator and rounded to ``mapping.acc_dtype``
  (so a bf16 accumulator loses what it would lose on the chip); the *spatial* loops of outer
  levels (K split across cores or slices) keep separate partial accumulators, combined at the
  end by a sequential cross-core reduction in the accumulator type.
- **Padding** points of a reduction axis read each operand's fill: zeros for ``z``, the dummy
  garbage of `executor.numerics.dummy_value` for ``#``. A dummy that reaches a result shows.
- **Math fidelity** (Tenstorrent): the operand bits each fidelity phase multiplies, per
  `executor.fidelity`; each phase product is exact in float32 and the phases add up in the tile.
- **Affine dimensions** (sliding windows) are read through a stride-trick view of the padded
  operand with one dimension per axis, so a window costs no copy.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from costmodels.ir import Mapping
from executor import fidelity, numerics
from executor.contract import Labels, contract, ufunc_of
from workload import dtypes
from workload.problem import Problem
from workload.reference import axis_view, padded_input


@dataclass(frozen=True)
class TiledResult:
    """Output of a tiled run: values in the output format and which points were written."""

    values: np.ndarray
    written: np.ndarray
    steps: int  # temporal reduction steps executed


@dataclass(frozen=True)
class ReductionPlan:
    """How the reduction axes are walked: per-axis tile and spatial offsets, temporal loops in order."""

    axes: tuple[str, ...]
    tile: dict[str, np.ndarray]  # offsets inside the instruction tile (C order of its loops)
    spatial: dict[str, np.ndarray]  # base offset of each spatial partition
    temporal: tuple[tuple[str, int, int], ...]  # (axis, factor, stride), nest order

    @property
    def steps(self) -> int:
        out = 1
        for _, f, _ in self.temporal:
            out *= f
        return out


def _offsets(loops: list[tuple[int, int]]) -> np.ndarray:
    """Sum of ``index * stride`` over (factor, stride) loops, in C order."""
    if not loops:
        return np.zeros(1, dtype=np.int64)
    grids = np.meshgrid(*[np.arange(f, dtype=np.int64) for f, _ in loops], indexing="ij")
    return np.asarray(sum(g * s for g, (_, s) in zip(grids, loops, strict=True)), dtype=np.int64).reshape(-1)


def plan_reduction(problem: Problem, mapping: Mapping) -> ReductionPlan:
    """Split every reduction loop into tile, spatial or temporal (see the module docstring)."""
    last = len(mapping.levels) - 1
    red = problem.reduction_axes
    strides = {a: iter(mapping.strides(a)) for a in red}
    tile: dict[str, list[tuple[int, int]]] = {a: [] for a in red}
    spatial: dict[str, list[tuple[int, int]]] = {a: [] for a in red}
    temporal: list[tuple[str, int, int]] = []
    for lvl, lp in mapping.loops():
        if lp.axis not in strides:
            continue
        s = next(strides[lp.axis])
        if lvl == last:
            tile[lp.axis].append((lp.factor, s))
        elif lp.spatial:
            spatial[lp.axis].append((lp.factor, s))
        else:
            temporal.append((lp.axis, lp.factor, s))
    return ReductionPlan(
        axes=red,
        tile={a: _offsets(tile[a]) for a in red},
        spatial={a: _offsets(spatial[a]) for a in red},
        temporal=tuple(temporal),
    )


def _selector(idx: np.ndarray, size: int) -> slice | np.ndarray:
    """A slice when `idx` is a contiguous in-range run, else the index array itself."""
    if idx.size and idx[0] >= 0 and idx[-1] < size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return slice(int(idx[0]), int(idx[0]) + idx.size)
    return idx


def _take(view: np.ndarray, dim: int, idx: np.ndarray, fill: float | None) -> np.ndarray:
    """Gather `idx` along `dim`; indices past the axis read `fill` (must be given if any)."""
    sel = _selector(idx, view.shape[dim])
    if isinstance(sel, slice):
        return view[(slice(None),) * dim + (sel,)]
    size = view.shape[dim]
    out = np.take(view, np.minimum(idx, size - 1), axis=dim)
    pad = idx >= size
    if pad.any():
        assert fill is not None
        out[(slice(None),) * dim + (pad,)] = fill
    return out


def _free_selection(problem: Problem, mapping: Mapping) -> dict[str, np.ndarray]:
    """Distinct in-range visited indices of each free axis."""
    out: dict[str, np.ndarray] = {}
    for a in problem.free_axes:
        v = mapping.visits(a)
        out[a] = np.unique(v[v < problem.axes[a]])
    return out


def _combine(acc: np.ndarray, part: np.ndarray, op: str, acc_dtype: str, carried: np.dtype) -> np.ndarray:
    """``acc op part`` rounded to the accumulator format (in place for float32 sums)."""
    if carried.kind == "i" and part.dtype.kind == "f":
        part = np.rint(part).astype(np.int64)
    if op == "add" and acc_dtype == "f32" and acc.dtype == np.float32:
        np.add(acc, part, out=acc, casting="unsafe")
        return acc
    with np.errstate(over="ignore", invalid="ignore"):
        return numerics.round_acc(ufunc_of(op)(acc, part), acc_dtype).astype(carried, copy=False)


def prepare_views(problem: Problem, mapping: Mapping, inputs: list[np.ndarray]) -> list[tuple[np.ndarray, Labels]]:
    """Cast each input once to the compute type, pad it, view it per axis, select visited free points."""
    compute = numerics.compute_dtype(problem)
    free = _free_selection(problem, mapping)
    views: list[tuple[np.ndarray, Labels]] = []
    for i, arr in enumerate(inputs):
        padded = padded_input(problem, i, numerics.to_compute(arr, compute))
        view, axes = axis_view(problem, i, padded)
        for dim, a in enumerate(axes):
            if a in free:
                view = _take(view, dim, free[a], None)
        views.append((view, axes))
    return views


def run_mapping(problem: Problem, mapping: Mapping, inputs: list[np.ndarray]) -> TiledResult:
    """Execute `mapping` on `inputs` (real, unpadded tensors in their storage formats).

    A math fidelity the mapping carries (``knobs["math_fidelity"]``) is emulated when
    `executor.fidelity` can (bf16 operands): each instruction tile is then the sum of one
    contraction per pair of operand parts the fidelity phases multiply. Otherwise the products
    are the exact ones (`executor.validate` reports such a run as not checked).

    Returns:
        The output in its storage format (NaN, or 0 for integer formats, where not written) and
        the mask of written output points.
    """
    operand_sets: list[list[np.ndarray]] = [inputs]
    if fidelity.unsupported(problem, mapping) is None:
        phases = fidelity.plan(problem, mapping, inputs)
        if phases is not None and not phases.exact:
            operand_sets = [list(pair) for pair in phases.pairs]
    compute = numerics.compute_dtype(problem)
    carried = numerics.acc_numpy(mapping.acc_dtype)
    free = _free_selection(problem, mapping)
    plan = plan_reduction(problem, mapping)
    view_sets = [prepare_views(problem, mapping, ops) for ops in operand_sets]
    fills = [
        {
            a: 0.0 if mapping.fill_of(op.name, a) == "zero" else numerics.dummy_value(op.dtype, problem.reduce_op)
            for a in plan.axes
        }
        for op in problem.inputs
    ]
    out_labels: Labels = tuple(f"{a}#s" for a in plan.axes) + problem.free_axes
    acc: np.ndarray | None = None
    t_axes = [a for a, _, _ in plan.temporal]
    for combo in itertools.product(*[range(f) for _, f, _ in plan.temporal]):
        base = dict.fromkeys(plan.axes, 0)
        for a, i, (_, _, s) in zip(t_axes, combo, plan.temporal, strict=True):
            base[a] += i * s
        part: np.ndarray | None = None
        for views in view_sets:
            arrays, labels = _gather(plan, views, fills, base)
            with np.errstate(over="ignore", invalid="ignore"):
                one = contract(arrays, labels, out_labels, problem.reduce_op)
            part = one if part is None else part + one
        assert part is not None
        if compute.kind == "f" and carried.kind == "f":
            part = part.astype(np.float32, copy=False)
        if acc is None:
            acc = numerics.round_acc(part, mapping.acc_dtype).astype(carried, copy=False)
            acc = np.array(acc, dtype=carried)  # own, contiguous storage
        else:
            acc = _combine(acc, part, problem.reduce_op, mapping.acc_dtype, carried)
    assert acc is not None
    total = _cross_core(acc, len(plan.axes), problem.reduce_op, mapping.acc_dtype, carried)
    return _write(problem, free, total, plan.steps)


def _gather(
    plan: ReductionPlan,
    views: list[tuple[np.ndarray, Labels]],
    fills: list[dict[str, float]],
    base: dict[str, int],
) -> tuple[list[np.ndarray], list[Labels]]:
    """The operands of one temporal step: reduction indices of the tile and spatial partitions at `base`."""
    arrays, labels = [], []
    for (view, axes), fill in zip(views, fills, strict=True):
        arr, lab = view, list(axes)
        for a in plan.axes:
            if a not in axes:
                continue
            sp, tl = plan.spatial[a], plan.tile[a]
            idx = (base[a] + sp[:, None] + tl[None, :]).reshape(-1)
            dim = lab.index(a)
            arr = _take(arr, dim, idx, fill[a])
            arr = arr.reshape((*arr.shape[:dim], sp.size, tl.size, *arr.shape[dim + 1 :]))
            lab[dim : dim + 1] = [f"{a}#s", f"{a}#i"]
        arrays.append(arr)
        labels.append(tuple(lab))
    return arrays, labels


def _cross_core(acc: np.ndarray, n_spatial: int, op: str, acc_dtype: str, carried: np.dtype) -> np.ndarray:
    """Combine the spatial partial accumulators one after another, in the accumulator format."""
    parts = acc.reshape((-1, *acc.shape[n_spatial:]))
    total = np.array(parts[0])
    for s in range(1, parts.shape[0]):
        total = _combine(total, parts[s], op, acc_dtype, carried)
    return total


def _write(problem: Problem, free: dict[str, np.ndarray], total: np.ndarray, steps: int) -> TiledResult:
    out_op = problem.output
    shape = problem.shape(out_op)
    storage = numerics.storage_dtype(out_op.dtype)
    is_int = dtypes.info(out_op.dtype).is_int
    values = np.zeros(shape, dtype=storage) if is_int else np.full(shape, np.nan, dtype=np.float32).astype(storage)
    written = np.zeros(shape, dtype=bool)
    sels = [_selector(free[a], problem.axes[a]) for a in problem.free_axes]
    if all(isinstance(x, slice) for x in sels):
        index: tuple[slice | np.ndarray, ...] = tuple(sels)
    else:
        index = np.ix_(*[free[a] for a in problem.free_axes])
    values[index] = numerics.to_output(total, out_op.dtype)
    written[index] = True
    return TiledResult(values=values, written=written, steps=steps)
