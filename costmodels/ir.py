"""One loop-nest mapping language for every target.

A `Mapping` is a list of hardware levels, outermost first (chip, core/slice, row, time, ...).
Each level holds loops, outermost first; a loop places a factor of one axis at that level,
either *spatially* (across parallel units: cores, slices, rows) or *temporally* (in sequence).

An axis is split across its loops as a mixed-radix number: by default the stride of a loop is
the product of the factors of the loops on the same axis nested inside it, so that the visited
index is ``sum(loop_index * stride)``. When the factors multiply to more than the axis size the
extra points are padding (the reference's ``W=30+2#``); each input operand fills them with
dummy values (``#``: garbage that must never reach a result) or zeros (``z``). A loop may carry
an explicit stride, which lets a mapping express shift-reuse views, and lets tests express
broken mappings (a tile visited twice, a tile never visited) that the check below rejects.

The innermost level is the *instruction tile*: its loops are executed as one operation
(one ``nc_matmul``, one ``TMATMUL``, one packet reduction). The executor runs any mapping
without knowing which target produced it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from workload.problem import Problem

Fill = Literal["dummy", "zero"]


class Loop(BaseModel):
    """One loop of a level: ``factor`` iterations over ``axis``."""

    model_config = ConfigDict(frozen=True)
    axis: str
    factor: int = Field(ge=1)
    spatial: bool = False
    stride: int | None = Field(default=None, ge=0, description="explicit index stride; None = mixed radix")


class Level(BaseModel):
    """A hardware level and the loops placed at it, outermost first."""

    model_config = ConfigDict(frozen=True)
    name: str
    loops: tuple[Loop, ...] = ()


class Mapping(BaseModel):
    """A loop nest for one problem on one target."""

    model_config = ConfigDict(frozen=True)
    target: str = ""
    levels: tuple[Level, ...]
    acc_dtype: str = Field(description="type partial sums are accumulated in (f32 / i32 normally)")
    fill: dict[str, dict[str, Fill]] = Field(
        default_factory=dict,
        description="operand name -> axis -> how that operand fills padding points (default dummy)",
    )
    knobs: dict[str, int | float | str | bool] = Field(
        default_factory=dict, description="target-specific settings, for display and renderers"
    )

    def loops(self) -> list[tuple[int, Loop]]:
        """All loops in nest order (outermost first) with the index of their level."""
        return [(i, lp) for i, lvl in enumerate(self.levels) for lp in lvl.loops]

    def axis_loops(self, axis: str) -> list[Loop]:
        return [lp for _, lp in self.loops() if lp.axis == axis]

    def strides(self, axis: str) -> list[int]:
        """Effective stride of each loop on `axis` (nest order)."""
        lps = self.axis_loops(axis)
        out: list[int] = []
        for i, lp in enumerate(lps):
            if lp.stride is not None:
                out.append(lp.stride)
            else:
                out.append(math.prod(inner.factor for inner in lps[i + 1 :]))
        return out

    def visits(self, axis: str) -> np.ndarray:
        """Index of `axis` visited at each combination of its loops, in nest order (C order)."""
        lps = self.axis_loops(axis)
        if not lps:
            return np.zeros(1, dtype=np.int64)
        grids = np.meshgrid(*[np.arange(lp.factor, dtype=np.int64) for lp in lps], indexing="ij")
        idx = sum(g * s for g, s in zip(grids, self.strides(axis), strict=True))
        return np.asarray(idx, dtype=np.int64).reshape(-1)

    def padded_size(self, axis: str) -> int:
        return math.prod(lp.factor for lp in self.axis_loops(axis))

    def fill_of(self, operand: str, axis: str) -> Fill:
        return self.fill.get(operand, {}).get(axis, "dummy")


@dataclass(frozen=True)
class CoverageError:
    """Why a mapping does not cover the iteration space exactly once."""

    axis: str
    point: int
    kind: Literal["missed", "repeated", "dummy-in-reduction", "unknown-axis", "fill-operand"]
    message: str


def coverage_errors(problem: Problem, mapping: Mapping) -> list[CoverageError]:
    """Structural check: every point of the iteration space is visited exactly once.

    Points beyond an axis size are padding; on a reduction axis of an add-reduction they are
    allowed only if some input fills them with zeros (``1+1#`` contracted with ``1+1z``
    yields 1, contraction-engine-rngd.txt, "Filter-Stride 2, Dilation 2"); under any other
    reduce op padding on a reduced axis is rejected. Returns the first problem of each axis.
    """
    errs: list[CoverageError] = []
    known = set(problem.axes)
    for _, lp in mapping.loops():
        if lp.axis not in known:
            errs.append(CoverageError(lp.axis, 0, "unknown-axis", f"loop over {lp.axis}, which the problem lacks"))
    names = {o.name for o in problem.inputs}
    for op in mapping.fill:
        if op not in names:
            errs.append(CoverageError("", 0, "fill-operand", f"padding fill names {op}, which is not an input"))
    reduced = set(problem.reduction_axes)
    for axis, size in problem.axes.items():
        v = mapping.visits(axis)
        counts = np.bincount(v[v < size], minlength=size) if v.size else np.zeros(size, dtype=np.int64)
        missed = np.flatnonzero(counts == 0)
        repeated = np.flatnonzero(counts > 1)
        if missed.size:
            p = int(missed[0])
            errs.append(CoverageError(axis, p, "missed", f"point {axis}={p} is never visited"))
        elif repeated.size:
            p = int(repeated[0])
            errs.append(CoverageError(axis, p, "repeated", f"point {axis}={p} is visited {int(counts[p])} times"))
        pad_points = v[v >= size]
        if pad_points.size and axis in reduced:
            zero_filled = [o.name for o in problem.inputs if axis in o.axes and mapping.fill_of(o.name, axis) == "zero"]
            if problem.reduce_op != "add" or not zero_filled:
                p = int(pad_points[0])
                errs.append(
                    CoverageError(
                        axis,
                        p,
                        "dummy-in-reduction",
                        f"padding point {axis}={p} of reduced axis {axis} is dummy in every input: "
                        "zero-fill one operand (z) or choose factors that divide the axis",
                    )
                )
    return errs


def flat_mapping(problem: Problem, target: str = "reference", level: str = "tile") -> Mapping:
    """The trivial mapping: one level holding every axis whole (one tile)."""
    return Mapping(
        target=target,
        levels=(Level(name=level, loops=tuple(Loop(axis=a, factor=s) for a, s in problem.axes.items())),),
        acc_dtype=problem.acc_dtype,
    )
