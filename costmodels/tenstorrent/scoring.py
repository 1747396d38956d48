"""Fast scoring for the Tensix targets: the whole space priced once per problem, then gathered by code.

`build_table` evaluates the formulas of `tenstorrent.cost.evaluate` once per problem over the space as a
broadcast grid (one array axis per parameter with more than one choice, so each quantity is computed
at the size of the parameters it depends on). The grid's axes run in `AXES` order, not the space's,
so that numpy's broadcast loops over the largest arrays run long; a matmul's grid leaves out
split_reader, which cannot change its price. `ScoreTable.score` then turns each point's choice codes
into its index in that grid (a multiply and an add per axis) and gathers the four outputs.

Points given by value go through `choice_codes.score_values`: values among the space's choices
are coded and gathered the same way, the rest are priced by `score_general` (`evaluate` on the
values themselves), so every answer equals `check`/`cost`.

`TTPrepared` is what a target keeps per problem (`ProblemMemo`): the GEMM view, the space, its
`SpaceCoder` and the table, each built on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from costmodels.choice_codes import SpaceCoder
from costmodels.protocol import SearchSpace, Violation
from costmodels.tenstorrent.cost import MEMORIES, evaluate
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.resolve import fidelity_inputs, layout_table, numeric_inputs, resolve_ranks
from costmodels.tenstorrent.shape import TTShape, tt_shape
from costmodels.tenstorrent.space import build_space
from workload.problem import Problem

#: the grid's axes, outermost first (every parameter of `tenstorrent.space.build_space`, once): split_reader and
#: the double-buffer flags, which only the last steps of the time depend on; then the layout, memory and
#: act_block_h, which nearly every quantity depends on; innermost the parameters only the compute time,
#: L1 and feasibility depend on. The full-size steps then combine operands that are either constant or
#: contiguous over long inner runs.
AXES = (
    "split_reader",
    "act_double_buffer",
    "weights_double_buffer",
    "layout",
    "memory",
    "act_block_h_rank",
    "math_fidelity",
    "fp32_acc",
    "subblock_rank",
    "act_block_w_div",
    "in0_block_w",
)


@dataclass(frozen=True)
class ScoreTable:
    """Feasibility and objectives (inf where infeasible) of every point of a space, flat in `AXES` order."""

    axes: tuple[tuple[str, int], ...]  # (parameter, length) of each grid axis longer than 1, outermost first
    feasible: np.ndarray
    latency: np.ndarray
    offchip: np.ndarray
    footprint: np.ndarray

    def index(self, codes: dict[str, np.ndarray]) -> np.ndarray:
        """Each point's flat index in the grid (``codes[name]``: the position of its choice).

        Horner's scheme over the axes, in place: a multiply and an add per axis, no temporaries.
        """
        if not self.axes:  # a one-point grid
            return np.zeros(len(next(iter(codes.values()))), dtype=np.intp)
        (name, _), *rest = self.axes
        flat = np.array(codes[name], dtype=np.intp)
        for name, n in rest:
            flat *= n
            flat += codes[name]
        return flat

    def score(self, codes: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(feasible, latency s, offchip bytes, footprint bytes) of points given by code."""
        flat = self.index(codes)
        return self.feasible[flat], self.latency[flat], self.offchip[flat], self.footprint[flat]


def build_table(shape: TTShape, hw: TensixHardware, space: SearchSpace) -> ScoreTable:
    """Price every point of `space` at once.

    A space has fewer than a million points (at most 13 layouts x 2 placements x 6 x 3 x 4 x 4 ranks
    and divisors x 2 x 2 x 2 flags x 4 fidelities x 2 accumulations in `tenstorrent.space`), so it always fits.
    The grid's largest arrays are reused in place for the outputs.
    """
    choices = {p.name: p.choices for p in space.params}
    if sorted(choices) != sorted(AXES):
        raise ValueError(f"the table's axes {AXES} are not the space's parameters {tuple(choices)}")
    if shape.conv is None:
        # split_reader only divides the im2col reader's time, and a matmul has no reader (tenstorrent.cost:
        # reader_bytes is 0): its table is priced at the first choice, and the parameter is not indexed
        choices["split_reader"] = choices["split_reader"][:1]
    grid = [a for a in AXES if len(choices[a]) > 1]  # one-choice parameters get no axis: fewer dimensions
    dims = tuple(len(choices[a]) for a in grid)

    def axis(name: str, values: np.ndarray) -> np.ndarray:
        return values.reshape([-1 if a == name else 1 for a in grid] if name in grid else [1] * len(grid))

    def choice(name: str, dtype: type) -> np.ndarray:
        return axis(name, np.array(choices[name], dtype=dtype))

    lt = layout_table(shape, hw, [str(c) for c in choices["layout"]])
    lay = axis("layout", np.arange(len(choices["layout"])))
    fp32 = choice("fp32_acc", bool)
    abh_t, sb_h, sb_w = resolve_ranks(
        lt, hw, lay, choice("act_block_h_rank", np.int64), choice("subblock_rank", np.int64), fp32
    )
    mem = [str(m) for m in choices["memory"]]
    cyc, allowed = fidelity_inputs(hw, np.array([str(f) for f in choices["math_fidelity"]]))
    x = {
        "lay": lay,
        "dram": axis("memory", np.array([m == MEMORIES[1] for m in mem])),
        "mem_ok": axis("memory", np.array([m in MEMORIES for m in mem])),
        "abh_rows": (abh_t * shape.tile).astype(np.float64),
        "div": choice("act_block_w_div", np.float64),
        "kb": choice("in0_block_w", np.float64),
        "sb_h": sb_h,
        "sb_w": sb_w,
        "adb": choice("act_double_buffer", bool),
        "wdb": choice("weights_double_buffer", bool),
        "split": choice("split_reader", bool),
        "fp32": fp32,
        "tile_cyc": axis("math_fidelity", cyc),
        "fid_ok": axis("math_fidelity", allowed),
    }
    ev = evaluate(shape, hw, lt, x)
    feas = np.ascontiguousarray(np.broadcast_to(ev.feasible, dims))  # every output in full, C order
    cycles = ev.a["cycles"]
    own = cycles.shape == dims and cycles.dtype == np.float64 and cycles.flags.owndata  # ev is ours alone
    return ScoreTable(
        axes=tuple(zip(grid, dims, strict=True)),
        feasible=feas.reshape(-1),
        latency=_masked(np.divide(cycles, hw.clock_hz, out=cycles if own else None), feas),
        offchip=_masked(ev.a["dram_bytes"], feas),
        footprint=_masked(ev.a["footprint"], feas),
    )


def _masked(a: np.ndarray, feas: np.ndarray) -> np.ndarray:
    """`a` where `feas`, inf elsewhere, flat in C order (set in place when `a` is a full grid of its own)."""
    if a.shape == feas.shape and a.dtype == np.float64 and a.flags.c_contiguous and a.flags.owndata:
        np.putmask(a, ~feas, np.inf)
        return a.reshape(-1)
    return np.where(feas, a, np.inf).reshape(-1)


def score_general(shape: TTShape, hw: TensixHardware, cols: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """(feasible, latency, offchip bytes, footprint) of arbitrary 1-D columns, through `evaluate`."""
    lt, x = numeric_inputs(shape, hw, cols)
    ev = evaluate(shape, hw, lt, x)
    feas = np.asarray(ev.feasible)
    inf = np.inf
    return (
        feas,
        np.where(feas, ev.a["cycles"] / hw.clock_hz, inf),
        np.where(feas, ev.a["dram_bytes"], inf),
        np.where(feas, ev.a["footprint"], inf),
    )


class TTPrepared:
    """One problem on one preset, as a target keeps it: GEMM view, space, coder and table, built on first use."""

    def __init__(self, problem: Problem, hw: TensixHardware, reasons: tuple[Violation, ...]) -> None:
        self.problem = problem
        self.hw = hw
        self.reasons = reasons  # why the preset cannot run the problem (then every point is infeasible)

    @cached_property
    def shape(self) -> TTShape:
        return tt_shape(self.problem, self.hw.tile)

    @cached_property
    def space(self) -> SearchSpace:
        return build_space(self.problem, self.hw, self.shape)

    @cached_property
    def coder(self) -> SpaceCoder:
        return SpaceCoder(self.space)

    @cached_property
    def table(self) -> ScoreTable:
        return build_table(self.shape, self.hw, self.space)
