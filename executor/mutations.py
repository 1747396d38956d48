"""Deliberately broken variants of any mapping or halo configuration, to prove validation catches them.

Each function returns a broken copy, or None when the input has no loop the break applies to.
They work on mappings of any target (they only read the loop nest), which is how the
broken-mapping suite covers every registered preset.
"""

from __future__ import annotations

import dataclasses

from costmodels.ir import Fill, Level, Loop, Mapping, coverage_errors
from costmodels.tenstorrent.halo import PAD, HaloConfig
from workload.problem import Problem


def _explicit(mapping: Mapping, axis: str) -> list[Loop]:
    """All loops in nest order, with the loops of `axis` given their effective strides explicitly."""
    strides = iter(mapping.strides(axis))
    return [lp.model_copy(update={"stride": next(strides)}) if lp.axis == axis else lp for _, lp in mapping.loops()]


def _rebuild(mapping: Mapping, loops: list[list[Loop]], **update: object) -> Mapping:
    """`mapping` with each original loop replaced by a list of loops (same levels)."""
    it = iter(loops)
    levels = tuple(Level(name=lvl.name, loops=tuple(x for _ in lvl.loops for x in next(it))) for lvl in mapping.levels)
    return mapping.model_copy(update={"levels": levels, **update})


def _fill(mapping: Mapping, problem: Problem, axis: str, how: Fill) -> dict[str, dict[str, Fill]]:
    fill = {k: dict(v) for k, v in mapping.fill.items()}
    for op in problem.inputs:
        if axis in op.axes:
            fill.setdefault(op.name, {})[axis] = how
    return fill


def _outer_first(problem: Problem, mapping: Mapping, axes: tuple[str, ...]) -> list[int]:
    """Positions of loops over `axes` with factor >= 2: outer levels first, the tile level last."""
    last = len(mapping.levels) - 1
    pos = [i for i, (_, lp) in enumerate(mapping.loops()) if lp.axis in axes and lp.factor >= 2]
    return sorted(pos, key=lambda i: mapping.loops()[i][0] == last)


def _has(problem: Problem, mapping: Mapping, kind: str) -> bool:
    return any(e.kind == kind for e in coverage_errors(problem, mapping))


def drop_tile(problem: Problem, mapping: Mapping) -> Mapping | None:
    """One output tile never computed: a free-axis loop runs one iteration short."""
    for i in _outer_first(problem, mapping, problem.free_axes):
        axis = mapping.loops()[i][1].axis
        loops = [[lp] for lp in _explicit(mapping, axis)]
        loops[i] = [loops[i][0].model_copy(update={"factor": loops[i][0].factor - 1})]
        broken = _rebuild(mapping, loops)
        if _has(problem, broken, "missed"):
            return broken
    return None


def repeat_reduction_tile(problem: Problem, mapping: Mapping) -> Mapping | None:
    """One reduction tile counted twice: a loop of factor f becomes 2 x ceil((f+1)/2) overlapping by one.

    Points the split pushes past the axis end are zero-filled, so the duplicate is the only error.
    """
    for i in _outer_first(problem, mapping, problem.reduction_axes):
        axis = mapping.loops()[i][1].axis
        loops = [[lp] for lp in _explicit(mapping, axis)]
        lp = loops[i][0]
        g = (lp.factor + 2) // 2
        stride = lp.stride or 0
        split = lp.model_copy(update={"factor": 2, "stride": stride * (g - 1)})
        loops[i] = [split, lp.model_copy(update={"factor": g})]
        broken = _rebuild(mapping, loops, fill=_fill(mapping, problem, axis, "zero"))
        if _has(problem, broken, "repeated"):
            return broken
    return None


def wrong_stride(problem: Problem, mapping: Mapping) -> Mapping | None:
    """A loop steps one index short of its tile size (tiles overlap by one, the last point is missed)."""
    for i in _outer_first(problem, mapping, tuple(problem.axes)):
        axis = mapping.loops()[i][1].axis
        loops = [[lp] for lp in _explicit(mapping, axis)]
        lp = loops[i][0]
        if (lp.stride or 0) < 2:
            continue
        loops[i] = [lp.model_copy(update={"stride": (lp.stride or 0) - 1})]
        broken = _rebuild(mapping, loops)
        red = set(problem.reduction_axes)
        # a point of a free axis computed twice is harmless; a missed point or a doubled term is not
        if any(
            e.kind == "missed" or (e.kind == "repeated" and e.axis in red) for e in coverage_errors(problem, broken)
        ):
            return broken
    return None


def dummy_in_reduction(problem: Problem, mapping: Mapping) -> Mapping | None:
    """A reduction loop runs one iteration past the axis end with dummy (``#``) padding in every input."""
    for i in _outer_first(problem, mapping, problem.reduction_axes) or [
        j for j, (_, lp) in enumerate(mapping.loops()) if lp.axis in problem.reduction_axes
    ]:
        axis = mapping.loops()[i][1].axis
        loops = [[lp] for lp in _explicit(mapping, axis)]
        outer = min(j for j, (_, lp) in enumerate(mapping.loops()) if lp.axis == axis)
        lp = loops[outer][0]
        loops[outer] = [lp.model_copy(update={"factor": lp.factor + 1})]
        broken = _rebuild(mapping, loops, fill=_fill(mapping, problem, axis, "dummy"))
        if _has(problem, broken, "dummy-in-reduction"):
            return broken
    return None


def narrow_accumulator(mapping: Mapping, acc_dtype: str = "bf16") -> Mapping:
    """The same loop nest accumulating partial sums in a narrower format."""
    return mapping.model_copy(update={"acc_dtype": acc_dtype})


def shift_halo_chunk(config: HaloConfig, by: int = 1) -> HaloConfig | None:
    """A halo that is off by `by` sticks: the first data chunk of some core reads from a shifted offset."""
    cores = list(config.cores)
    for ci, core in enumerate(cores):
        for k, ch in enumerate(core.chunks):
            if ch.src_core == PAD:
                continue
            chunks = list(core.chunks)
            chunks[k] = dataclasses.replace(ch, src_offset=ch.src_offset + by)
            cores[ci] = dataclasses.replace(core, chunks=tuple(chunks))
            return dataclasses.replace(config, cores=tuple(cores))
    return None


def mutants(problem: Problem, mapping: Mapping) -> list[tuple[str, Mapping]]:
    """Every broken variant of `mapping` that applies to it, named: what `mapper mutants` validates to show
    that the executor catches a broken version of this very mapping."""
    made = [
        ("drop a tile", drop_tile(problem, mapping)),
        ("repeat a reduction tile", repeat_reduction_tile(problem, mapping)),
        ("wrong stride", wrong_stride(problem, mapping)),
        ("dummy padding in a reduction", dummy_in_reduction(problem, mapping)),
        ("bf16 accumulator", narrow_accumulator(mapping) if mapping.acc_dtype not in ("bf16", "i32") else None),
    ]
    return [(name, m) for name, m in made if m is not None]
