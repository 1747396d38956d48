"""Fast scoring for the Tensix targets: the whole space priced once per problem, then gathered by code.

`build_table` evaluates the formulas of `tenstorrent.cost.evaluate` over the space as a broadcast grid
(one array axis per parameter with more than one choice, so each quantity is computed at the size of
the parameters it depends on), a block of layouts at a time when a point of the block is first
scored. The grid's axes run in `AXES` order, not the space's, so that numpy's broadcast loops over
the largest arrays run long; a matmul's grid leaves out split_reader, which cannot change its price.
`ScoreTable.score` then turns each point's choice codes into its index in that grid (a multiply and
an add per axis) and gathers the four outputs.

Points given by value go through `choice_codes.score_values`: values among the space's choices
are coded and gathered the same way, the rest are priced by `score_general` (`evaluate` on the
values themselves), so every answer equals `check`/`cost`.

`TTPrepared` is what a target keeps per problem (`ProblemMemo`): the GEMM view, the space, its
`SpaceCoder` and the table, each built on first use.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property

import numpy as np

from costmodels.choice_codes import UNKNOWN, ChoiceCoder, SpaceCoder
from costmodels.energy import EnergyPricer, pricer
from costmodels.protocol import Choice, SearchSpace, Violation
from costmodels.tenstorrent.cost import MEMORIES, evaluate
from costmodels.tenstorrent.energy import level_bytes
from costmodels.tenstorrent.hardware import ENERGY_LEVELS, TensixHardware
from costmodels.tenstorrent.resolve import fidelity_inputs, layout_table, numeric_inputs, resolve_ranks
from costmodels.tenstorrent.shape import TTShape, tt_shape
from costmodels.tenstorrent.space import build_space
from workload.problem import Problem

#: the grid's axes, outermost first (every parameter of `tenstorrent.space.build_space`, once): the layout
#: outermost, so the table is priced in blocks of layouts on first use; then split_reader and the
#: double-buffer flags, which only the last steps of the time depend on; then memory and act_block_h,
#: which nearly every quantity depends on; innermost the parameters only the compute time, L1 and
#: feasibility depend on. The full-size steps then combine operands that are either constant or
#: contiguous over long inner runs.
AXES = (
    "layout",
    "split_reader",
    "act_double_buffer",
    "weights_double_buffer",
    "memory",
    "act_block_h_rank",
    "math_fidelity",
    "fp32_acc",
    "subblock_rank",
    "act_block_w_div",
    "in0_block_w",
)

#: points priced per call when the table fills a block of layouts (a few MB of temporaries)
BLOCK_POINTS = 1 << 18


class ScoreTable:
    """Feasibility and objectives (inf where infeasible) of every point of a space, flat in `AXES` order.

    The layout axis always comes first (length 1 when the space has one layout). The arrays are
    allocated whole but priced a block of layouts at a time, when a point of the block is first
    scored: an enumeration prices every block once, in order; a search that fixes the layout per
    trial prices only the layouts it visits.
    """

    def __init__(self, axes: tuple[tuple[str, int], ...], price: Callable[[int, int], tuple[np.ndarray, ...]]) -> None:
        self.axes = axes  # (parameter, length) of the layout axis and each other grid axis longer than 1
        self.inner = math.prod(n for _, n in axes[1:])  # points per layout
        n_lay = axes[0][1]
        self.block = max(1, min(n_lay, BLOCK_POINTS // max(self.inner, 1)))  # layouts per priced block
        self._price = price
        self._done = np.zeros(-(-n_lay // self.block), dtype=bool)
        self._all_done = False
        size = n_lay * self.inner
        self.feasible = np.zeros(size, dtype=bool)
        self.latency = np.empty(size)
        self.offchip = np.empty(size)
        self.footprint = np.empty(size)
        self.energy = np.empty(size)

    def index(self, codes: dict[str, np.ndarray]) -> np.ndarray:
        """Each point's flat index in the grid (``codes[name]``: the position of its choice).

        Horner's scheme over the axes, in place: a multiply and an add per axis, no temporaries.
        """
        (name, _), *rest = self.axes
        flat = np.array(codes[name], dtype=np.intp)
        for name, n in rest:
            flat *= n
            flat += codes[name]
        return flat

    def fill(self, layouts: np.ndarray) -> None:
        """Price the blocks holding the given layout codes that are not priced yet."""
        if self._all_done:
            return
        want = np.bincount(np.asarray(layouts, dtype=np.intp) // self.block, minlength=self._done.size) > 0
        for b in np.flatnonzero(want[: self._done.size] & ~self._done):  # codes past the end: the gather raises
            l0, l1 = int(b) * self.block, min((int(b) + 1) * self.block, self.axes[0][1])
            sl = slice(l0 * self.inner, l1 * self.inner)
            priced = self._price(l0, l1)
            self.feasible[sl], self.latency[sl], self.offchip[sl], self.footprint[sl], self.energy[sl] = priced
            self._done[b] = True
        self._all_done = bool(self._done.all())

    def score(self, codes: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        """(feasible, latency s, offchip bytes, footprint bytes, energy pJ) of points given by code."""
        self.fill(codes["layout"])
        flat = self.index(codes)
        return self.feasible[flat], self.latency[flat], self.offchip[flat], self.footprint[flat], self.energy[flat]


def build_table(
    shape: TTShape, hw: TensixHardware, space: SearchSpace, energy: EnergyPricer | None = None
) -> ScoreTable:
    """The table of `space`, priced lazily in blocks of layouts (`ScoreTable.fill`).

    Each block evaluates the formulas of `tenstorrent.cost.evaluate` over a broadcast grid: one
    axis per parameter with more than one choice (the layout axis a slice of the layouts), so
    each quantity is computed at the size of the parameters it depends on. The grid's largest
    arrays are reused in place for the outputs.
    """
    choices = {p.name: p.choices for p in space.params}
    if sorted(choices) != sorted(AXES):
        raise ValueError(f"the table's axes {AXES} are not the space's parameters {tuple(choices)}")
    if shape.conv is None:
        # split_reader only divides the im2col reader's time, and a matmul has no reader (tenstorrent.cost:
        # reader_bytes is 0): its table is priced at the first choice, and the parameter is not indexed
        choices["split_reader"] = choices["split_reader"][:1]
    grid = ["layout"] + [a for a in AXES[1:] if len(choices[a]) > 1]  # one-choice parameters get no axis
    dims = tuple(len(choices[a]) for a in grid)

    def axis(name: str, values: np.ndarray) -> np.ndarray:
        return values.reshape([-1 if a == name else 1 for a in grid] if name in grid else [1] * len(grid))

    def choice(name: str, dtype: type) -> np.ndarray:
        return axis(name, np.array(choices[name], dtype=dtype))

    lt = layout_table(shape, hw, [str(c) for c in choices["layout"]])
    fp32 = choice("fp32_acc", bool)
    mem = [str(m) for m in choices["memory"]]
    cyc, allowed = fidelity_inputs(hw, np.array([str(f) for f in choices["math_fidelity"]]))
    rank_h, rank_s = choice("act_block_h_rank", np.int64), choice("subblock_rank", np.int64)
    base = {
        "dram": axis("memory", np.array([m == MEMORIES[1] for m in mem])),
        "mem_ok": axis("memory", np.array([m in MEMORIES for m in mem])),
        "div": choice("act_block_w_div", np.float64),
        "kb": choice("in0_block_w", np.float64),
        "adb": choice("act_double_buffer", bool),
        "wdb": choice("weights_double_buffer", bool),
        "split": choice("split_reader", bool),
        "fp32": fp32,
        "tile_cyc": axis("math_fidelity", cyc),
        "fid_ok": axis("math_fidelity", allowed),
    }

    def price(l0: int, l1: int) -> tuple[np.ndarray, ...]:
        lay = axis("layout", np.arange(l0, l1))
        abh_t, sb_h, sb_w = resolve_ranks(lt, hw, lay, rank_h, rank_s, fp32)
        x = {**base, "lay": lay, "abh_rows": (abh_t * shape.tile).astype(np.float64), "sb_h": sb_h, "sb_w": sb_w}
        ev = evaluate(shape, hw, lt, x)
        shape_b = (l1 - l0, *dims[1:])
        feas = np.ascontiguousarray(np.broadcast_to(ev.feasible, shape_b))  # every output in full, C order
        cycles = ev.a["cycles"]
        own = cycles.shape == shape_b and cycles.dtype == np.float64 and cycles.flags.owndata  # ev is ours alone
        pj = _energy(energy, ev.a, shape_b)  # before _masked writes inf over the byte arrays
        return (
            feas.reshape(-1),
            _masked(np.divide(cycles, hw.clock_hz, out=cycles if own else None), feas),
            _masked(ev.a["dram_bytes"], feas),
            _masked(ev.a["footprint"], feas),
            _masked(pj, feas),
        )

    return ScoreTable(tuple(zip(grid, dims, strict=True)), price)


def _energy(energy: EnergyPricer | None, a: dict[str, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """The energy (pJ) of every point as a full grid of its own (inf everywhere when not priced)."""
    if energy is None:
        return np.full(shape, np.inf)
    return np.array(np.broadcast_to(energy.total(level_bytes(a)), shape), dtype=np.float64)


def _masked(a: np.ndarray, feas: np.ndarray) -> np.ndarray:
    """`a` where `feas`, inf elsewhere, flat in C order (set in place when `a` is a full grid of its own)."""
    if a.shape == feas.shape and a.dtype == np.float64 and a.flags.c_contiguous and a.flags.owndata:
        np.putmask(a, ~feas, np.inf)
        return a.reshape(-1)
    return np.where(feas, a, np.inf).reshape(-1)


def score_general(
    shape: TTShape, hw: TensixHardware, cols: dict[str, np.ndarray], energy: EnergyPricer | None = None
) -> tuple[np.ndarray, ...]:
    """(feasible, latency, offchip bytes, footprint, energy) of arbitrary 1-D columns, through `evaluate`."""
    lt, x = numeric_inputs(shape, hw, cols)
    ev = evaluate(shape, hw, lt, x)
    feas = np.asarray(ev.feasible)
    inf = np.inf
    pj = _energy(energy, ev.a, feas.shape)
    return (
        feas,
        np.where(feas, ev.a["cycles"] / hw.clock_hz, inf),
        np.where(feas, ev.a["dram_bytes"], inf),
        np.where(feas, ev.a["footprint"], inf),
        np.where(feas, pj, inf),
    )


class LayoutCoder(ChoiceCoder):
    """A `ChoiceCoder` for the layout column that stays vectorised with hundreds of layout strings.

    The shared coder tells string choices apart by at most three character positions; the legal
    space's layouts (``height/R``, ``block/RxC``, ``width/C`` for every core count) need more, and
    it would fall back to sorting every column. This one hashes each string's characters (a
    weighted sum, wrapping in int64), finds the hash's slot in a table where the choices' hashes
    fall in distinct slots, and keeps the slot's code only where the string equals that choice
    exactly: any other string gets UNKNOWN (then the general formulas price it), never a wrong code.
    """

    def __init__(self, choices: tuple[str, ...]) -> None:
        super().__init__(choices)
        self.strings = np.asarray(choices, dtype=str)
        self.width = self.strings.dtype.itemsize // 4
        self.weights = np.array([pow(131, j + 1, (1 << 61) - 1) for j in range(self.width)], dtype=np.int64)
        keys = self._keys(self.strings)
        # the smallest table size at which the choices' hashes land in distinct slots (a perfect hash)
        sizes = range(max(1, len(choices)), 64 * len(choices) + 2)
        self.slots = next((m for m in sizes if _distinct(keys % m)), 0)  # 0: none found, the shared coder codes
        self.lut = np.zeros(max(self.slots, 1), dtype=np.intp)
        if self.slots:
            self.lut[keys % self.slots] = np.arange(len(choices))

    def _keys(self, col: np.ndarray) -> np.ndarray:
        chars = np.ascontiguousarray(col).view(np.uint32).reshape(col.size, -1)
        w = min(chars.shape[1], self.width)
        return chars[:, :w].astype(np.int64) @ self.weights[:w]

    def __call__(self, col: np.ndarray) -> np.ndarray:
        col = np.asarray(col)
        if col.ndim != 1 or col.dtype.kind != "U" or col.size == 0 or not self.slots:
            return super().__call__(col)
        code = self.lut[self._keys(col) % self.slots]
        return np.where(col == self.strings[code], code, UNKNOWN)  # exact: the hash only names a candidate


class FewStringsCoder(ChoiceCoder):
    """A `ChoiceCoder` for a string column of a few choices (memory, fidelity): one exact comparison per choice.

    Comparing a string column with each choice as a scalar builds no gathered string array, which is
    what the shared coder's exact check costs per point.
    """

    def __call__(self, col: np.ndarray) -> np.ndarray:
        col = np.asarray(col)
        if col.ndim != 1 or col.dtype.kind != "U" or col.size == 0:
            return super().__call__(col)
        code = np.full(col.size, UNKNOWN, dtype=np.intp)
        for i, choice in enumerate(self.choices):
            code[col == choice] = i
        return code


def _distinct(a: np.ndarray) -> bool:
    return np.unique(a).size == a.size


def space_coder(space: SearchSpace) -> SpaceCoder:
    """The space's `SpaceCoder`, its layout column coded by `LayoutCoder`, few-choice strings by `FewStringsCoder`."""
    coder = SpaceCoder(space)
    coder.coders = tuple(_coder(p.name, p.choices, c) for p, c in zip(space.params, coder.coders, strict=True))
    return coder


def _coder(name: str, choices: tuple[Choice, ...], shared: ChoiceCoder) -> ChoiceCoder:
    strings = all(type(c) is str for c in choices) and len(set(choices)) == len(choices)
    if name == "layout" and strings:
        return LayoutCoder(tuple(str(c) for c in choices))
    if strings and len(choices) <= 4:
        return FewStringsCoder(choices)
    return shared


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
        return space_coder(self.space)

    @cached_property
    def table(self) -> ScoreTable:
        return build_table(self.shape, self.hw, self.space, self.energy)

    @cached_property
    def energy(self) -> EnergyPricer:
        return pricer(self.hw.energy, self.problem, ENERGY_LEVELS)
