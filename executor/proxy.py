"""Bounded validation cost: estimate the memory a validation needs, and shrink big problems to a proxy.

A proxy keeps the mapping's structure - every level, every loop in its order, the instruction
tile, the padding of each axis - and runs fewer outer iterations: outer loop factors of free axes
are halved first (fewer output tiles, same reduction length and accumulation order), then outer
reduction loops, and only as a last resort the instruction tile. Axis sizes shrink with their
loops so that each axis keeps the same number of padding points.

Time is bounded by the number of reduction steps (`reduction_steps`): the executor runs the free
axes batched, but walks the temporal reduction loops of the outer levels one step at a time (one
gather, contraction and accumulator rounding each, tens of microseconds whatever the tile's size).
`shorten` halves those loops' factors, largest first, until the steps fit a limit: the proxy keeps
the instruction tile, the order and the accumulation type, over a shorter reduction.
"""

from __future__ import annotations

import math

from costmodels.ir import Level, Mapping
from executor import numerics
from workload import dtypes
from workload.problem import Operand, Problem


def _elems(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def estimate_bytes(problem: Problem, mapping: Mapping) -> int:
    """Upper estimate of the peak memory of `validate` on `problem` with `mapping`.

    Counts the inputs (storage format, the executor's compute copy, the reference's float64 copy
    and its absolute-value twin), an im2col-sized float64 temporary for windowed operands in the
    reference, the output and its comparison temporaries, the partial accumulators of spatial
    reduction loops, and one tile step's gathered operands and contribution.
    """
    compute = numerics.compute_dtype(problem).itemsize
    last = len(mapping.levels) - 1
    red = set(problem.reduction_axes)
    spatial = math.prod(lp.factor for lvl, lp in mapping.loops() if lvl < last and lp.spatial and lp.axis in red)
    step_red = {
        a: math.prod(lp.factor for lvl, lp in mapping.loops() if lp.axis == a and (lvl == last or lp.spatial))
        for a in problem.reduction_axes
    }
    total = 0
    step_points = math.prod(problem.axes[a] for a in problem.free_axes)
    for op in problem.inputs:
        real, padded = _elems(problem.shape(op)), _elems(problem.padded_shape(op))
        total += int(real * (dtypes.info(op.dtype).bytes + 8) + padded * (compute + 16))
        if not all(d.is_plain() for d in op.dims):
            total += 8 * math.prod(problem.axes[a] for a in op.axes)
        gathered = math.prod(step_red.get(a, problem.axes[a]) for a in op.axes)
        total += 2 * gathered * compute
        step_points *= math.prod(step_red[a] for a in op.axes if a in step_red)
    out = _elems(problem.shape(problem.output))
    total += out * 64 + out * spatial * 8 * 2
    if problem.reduce_op != "add" and problem.is_binary:
        total += step_points * compute * 2
    return total


def _shrink_size(size: int, padded: int, padded_new: int) -> int:
    """New axis size keeping the axis's padding-point count (at least 1)."""
    kept = size - (padded - padded_new)
    return kept if kept >= 1 else max(1, min(size, padded_new))


def _proxy_operand(problem: Problem, op: Operand, sizes: dict[str, int]) -> Operand:
    if op.pad is None:
        return op
    pads = []
    for d, (lo, hi) in enumerate(op.pad):
        ext = problem.extent(op, d)
        ext_new = sum(t.coeff * (sizes[t.axis] - 1) for t in op.dims[d].terms) + 1
        real = ext - lo - hi
        real_new = max(1, real - (ext - ext_new))
        pads.append((lo, ext_new - lo - real_new))
    return op.model_copy(update={"pad": tuple(pads)})


def radix_order(mapping: Mapping, axis: str) -> list[int] | None:
    """Nest positions of `axis`'s loops from finest to coarsest stride, if the strides form a mixed radix.

    Targets whose loop order differs from the order of significance (an RNGD nest visits ``n`` at the
    row level inside a coarser ``n`` loop at the time level) write explicit strides; when those
    strides are exactly the mixed radix of the factors in some order, the factors can be shrunk and
    the strides recomputed without changing the structure. Loops of factor 1 have no effect and are
    skipped. Returns None for any other stride pattern (overlapping or gapped on purpose).
    """
    loops = mapping.loops()
    idx = [i for i, (_, lp) in enumerate(loops) if lp.axis == axis]
    strides = dict(zip(idx, mapping.strides(axis), strict=True))
    active = sorted((i for i in idx if loops[i][1].factor > 1), key=lambda i: strides[i])
    expect = 1
    for i in active:
        if strides[i] != expect:
            return None
        expect *= loops[i][1].factor
    return active


def build_proxy(
    problem: Problem, mapping: Mapping, factors: list[int], orders: dict[str, list[int]] | None = None
) -> tuple[Problem, Mapping]:
    """The problem and mapping with loop factors replaced by `factors` (nest order).

    Axes listed in `orders` (finest-first loop positions, see `radix_order`) get their explicit
    strides recomputed from the new factors.
    """
    strides: dict[int, int] = {}
    for order in (orders or {}).values():
        acc = 1
        for i in order:
            strides[i] = acc
            acc *= factors[i]
    flat = [lp for lvl in mapping.levels for lp in lvl.loops]
    it = iter(range(len(flat)))
    levels = []
    for lvl in mapping.levels:
        new = []
        for lp in lvl.loops:
            i = next(it)
            update = {"factor": factors[i]}
            if i in strides:
                update["stride"] = strides[i]
            new.append(lp.model_copy(update=update))
        levels.append(Level(name=lvl.name, loops=tuple(new)))
    proxy_map = mapping.model_copy(update={"levels": tuple(levels)})
    sizes = {a: _shrink_size(s, mapping.padded_size(a), proxy_map.padded_size(a)) for a, s in problem.axes.items()}
    inputs = tuple(_proxy_operand(problem, op, sizes) for op in problem.inputs)
    proxy = Problem(
        axes=sizes,
        inputs=inputs,
        output=problem.output,
        reduce_op=problem.reduce_op,
        weight=problem.weight,
        label=problem.label,
    )
    return proxy, proxy_map


def _orders(mapping: Mapping) -> tuple[dict[str, list[int]], set[str]]:
    """Mixed-radix orders of the axes with explicit strides, and the axes whose strides are irregular."""
    orders: dict[str, list[int]] = {}
    explicit: set[str] = set()
    for axis in {lp.axis for _, lp in mapping.loops() if lp.stride is not None}:
        order = radix_order(mapping, axis)
        if order is None:
            explicit.add(axis)  # irregular strides: shrinking would change what the mapping visits
        else:
            orders[axis] = order
    return orders, explicit


def _temporal(problem: Problem, mapping: Mapping) -> list[int]:
    """Nest positions of the temporal reduction loops: outer levels, not spatial (`executor.tiled`)."""
    last = len(mapping.levels) - 1
    red = set(problem.reduction_axes)
    return [i for i, (lvl, lp) in enumerate(mapping.loops()) if lvl < last and not lp.spatial and lp.axis in red]


def reduction_steps(problem: Problem, mapping: Mapping) -> int:
    """Steps the executor walks one at a time: the product of the temporal reduction loops' factors."""
    loops = mapping.loops()
    return math.prod(loops[i][1].factor for i in _temporal(problem, mapping))


def shorten(problem: Problem, mapping: Mapping, max_steps: int) -> tuple[Problem, Mapping, list[str]]:
    """Halve temporal reduction loop factors, largest first, until `reduction_steps` <= `max_steps`.

    Loops of axes with irregular explicit strides are left alone (a note says so when the steps
    still exceed the limit).
    """
    loops = mapping.loops()
    orders, explicit = _orders(mapping)
    factors = [lp.factor for _, lp in loops]
    temporal = _temporal(problem, mapping)
    movable = [i for i in temporal if loops[i][1].axis not in explicit]
    while math.prod(factors[i] for i in temporal) > max_steps:
        cand = [i for i in movable if factors[i] > 1]
        if not cand:
            break
        i = max(cand, key=lambda j: factors[j])
        factors[i] = -(-factors[i] // 2)
    proxy, proxy_map = (
        build_proxy(problem, mapping, factors, orders)
        if factors != [lp.factor for _, lp in loops]
        else (problem, mapping)
    )
    changed = [
        f"{lp.axis}@{mapping.levels[lvl].name}: {lp.factor}->{factors[i]}"
        for i, (lvl, lp) in enumerate(loops)
        if factors[i] != lp.factor
    ]
    notes = [
        f"{reduction_steps(problem, mapping):,} reduction steps, over the {max_steps:,}-step limit: proxy "
        f"reduction loop factors {', '.join(changed) or 'unchanged (irregular strides)'}, "
        f"{reduction_steps(proxy, proxy_map):,} steps"
    ]
    return proxy, proxy_map, notes


def shrink(problem: Problem, mapping: Mapping, cap_bytes: int) -> tuple[Problem, Mapping, list[str]]:
    """Halve loop factors until the validation of the proxy fits in `cap_bytes` (see module docstring)."""
    loops = mapping.loops()
    last = len(mapping.levels) - 1
    orders, explicit = _orders(mapping)
    free = set(problem.free_axes)
    factors = [lp.factor for _, lp in loops]

    def phase(i: int) -> int:
        lvl, lp = loops[i]
        if lvl == last:
            return 2
        return 0 if lp.axis in free else 1

    order = [i for i, (_, lp) in enumerate(loops) if lp.axis not in explicit and lp.axis in problem.axes]
    proxy, proxy_map = problem, mapping
    notes: list[str] = []
    for ph in (0, 1, 2):
        cand = [i for i in order if phase(i) == ph]
        while estimate_bytes(proxy, proxy_map) > cap_bytes:
            movable = [i for i in cand if factors[i] > 1]
            if not movable:
                break
            i = max(movable, key=lambda j: factors[j])
            factors[i] = -(-factors[i] // 2)
            proxy, proxy_map = build_proxy(problem, mapping, factors, orders)
        if estimate_bytes(proxy, proxy_map) <= cap_bytes:
            break
        if ph == 1:
            notes.append("outer loops alone could not fit the memory cap: the instruction tile was shrunk too")
    changed = [
        f"{lp.axis}@{mapping.levels[lvl].name}: {lp.factor}->{factors[i]}"
        for i, (lvl, lp) in enumerate(loops)
        if factors[i] != lp.factor
    ]
    notes.append("proxy loop factors " + ", ".join(changed) if changed else "no loop could be shrunk")
    if estimate_bytes(proxy, proxy_map) > cap_bytes:
        notes.append("the proxy still exceeds the memory cap by the estimate")
    return proxy, proxy_map, notes
