"""Fast `score_batch` for the Tensix targets: the whole space priced once, then looked up.

The formulas of `tt_eval.evaluate` are evaluated once per problem over the space as a broadcast
grid (one array axis per parameter, so each quantity is computed at the size of the parameters it
depends on). Scoring a batch then codes each column to choice indices (integers through a small
lookup table, strings through the few characters that tell the choices apart), forms the flat
index of each point in the space's C order and gathers the four outputs. Points whose values are
not among the space's choices fall back to the general path, so every answer equals `check`/`cost`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from costmodels.protocol import Param, SearchSpace
from costmodels.tt_eval import MEMORIES, evaluate
from costmodels.tt_hardware import TensixHardware
from costmodels.tt_resolve import fidelity_inputs, layout_table, numeric_inputs, resolve_ranks
from costmodels.tt_shape import TTShape

#: largest space priced as a table; bigger spaces are scored point by point
MAX_TABLE = 1 << 22
#: rows coded and gathered at a time (keeps the temporaries in cache)
CHUNK = 1 << 15


@dataclass
class ScoreTable:
    """Feasibility and objectives of every point of a space, in `SearchSpace.columns()` order."""

    params: tuple[Param, ...]
    feasible: np.ndarray
    latency: np.ndarray
    offchip: np.ndarray
    footprint: np.ndarray
    coders: tuple[_Coder, ...]

    def lookup(self, columns: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(flat index, known) of each point; ``known`` is False where a value is not a choice."""
        n = len(next(iter(columns.values())))
        flat = np.empty(n, dtype=np.int64)
        for lo in range(0, n, CHUNK):
            hi = min(n, lo + CHUNK)
            idx = np.zeros(hi - lo, dtype=np.int64)
            for p, coder in zip(self.params, self.coders, strict=True):
                coder.add_to(np.asarray(columns[p.name])[lo:hi], idx)
            flat[lo:hi] = idx
        known = flat >= 0
        return np.where(known, flat, 0), known


#: added to a point's flat index for a value that is not a choice (keeps the sum negative)
UNKNOWN = -(1 << 50)


class _Coder:
    """Adds ``choice index x stride`` of a column of one parameter to the points' flat indices.

    Integers and booleans go through a lookup table over their range (with an UNKNOWN sentinel at
    each end, so `np.take(mode="clip")` sends out-of-range values to it); ASCII strings through
    per-position lookup tables over the few characters that tell the choices apart, then one exact
    comparison with the candidate they select. Other columns
    (object arrays, other string widths) are compared value by value.
    """

    def __init__(self, choices: tuple[object, ...], stride: int) -> None:
        self.choices, self.stride = choices, stride
        self.kind = "generic"
        if all(isinstance(c, bool) for c in choices):
            self.kind = "bool"
            self.lut = np.full(4, UNKNOWN, dtype=np.int64)  # index = value + 1
            for i, c in enumerate(choices):
                self.lut[1 if c is False else 2] = i * stride
        elif all(isinstance(c, int) for c in choices):
            self.kind = "int"
            ints = [int(c) for c in choices]  # type: ignore[call-overload]
            self.lo = min(ints) - 1
            self.lut = np.full(max(ints) - self.lo + 2, UNKNOWN, dtype=np.int64)
            for i, c in enumerate(ints):
                self.lut[c - self.lo] = i * stride
        elif all(isinstance(c, str) and c.isascii() for c in choices):
            self._string_plan([str(c) for c in choices])

    def _string_plan(self, choices: list[str]) -> None:
        plan = _string_plan(tuple(choices))
        if plan is None:
            return
        self.pos, self.pos_luts, keys, radix = plan
        self.key_lut = np.full(radix + 1, UNKNOWN, dtype=np.int64)
        self.key_lut[keys] = np.arange(len(choices)) * self.stride
        self.kind, self.width = "str", max(len(c) for c in choices)
        self.choice_array = np.array(choices, dtype=f"U{self.width}")

    def add_to(self, col: np.ndarray, idx: np.ndarray) -> None:
        if self.kind == "bool" and col.dtype == bool:
            idx += self.lut[1:3][col.view(np.uint8)]
        elif self.kind == "int" and col.dtype.kind in "iu":
            idx += np.take(self.lut, col - self.lo, mode="clip")
        elif self.kind == "str" and col.dtype.kind == "U" and col.dtype.itemsize == 4 * self.width:
            v = col.view(np.uint32).reshape(col.size, self.width)
            key = np.take(self.pos_luts[0], v[:, self.pos[0]], mode="clip")
            for lut, p in zip(self.pos_luts[1:], self.pos[1:], strict=True):
                key += np.take(lut, v[:, p], mode="clip")
            code = np.take(self.key_lut, key, mode="clip")
            # The few distinguishing characters pick a candidate choice; one vectorised comparison with
            # that candidate makes the match exact, so a value outside the space is never misread.
            known = code >= 0
            candidate = self.choice_array[np.where(known, code // self.stride, 0)]
            idx += np.where(known & (col == candidate), code, UNKNOWN)
        else:
            idx += self._generic(col)

    def _generic(self, col: np.ndarray) -> np.ndarray:
        out = np.full(col.size, UNKNOWN, dtype=np.int64)
        for i, c in enumerate(self.choices):
            hit = np.array([type(v) is type(c) and v == c for v in col.tolist()], dtype=bool)
            out[hit] = i * self.stride
        return out


@cache
def _string_plan(choices: tuple[str, ...]) -> tuple[list[int], list[np.ndarray], np.ndarray, int] | None:
    """Up to 3 character positions that tell every choice apart, their lookup tables and each choice's key."""
    width = max(len(c) for c in choices)
    mat = np.zeros((len(choices), width), dtype=np.int64)
    for i, c in enumerate(choices):
        mat[i, : len(c)] = [ord(ch) for ch in c]

    def distinct(pos: list[int]) -> int:
        return len({tuple(mat[i, pos]) for i in range(len(choices))})

    pos: list[int] = []
    while (distinct(pos) < len(choices) or not pos) and len(pos) < 3:
        pos.append(max(range(width), key=lambda p: distinct([*pos, p])))
    if distinct(pos) < len(choices):
        return None
    # per position: character -> (index among the choices' characters there) x radix; 128 = non-ASCII.
    # Keys start at 1 so that key_lut[0] (where clipping sends any negative, unknown key) is UNKNOWN.
    luts: list[np.ndarray] = []
    radix = 1
    keys = np.ones(len(choices), dtype=np.int64)
    for p in pos:
        chars = sorted(set(mat[:, p].tolist()))
        first = 1 if not luts else 0
        lut = np.full(129, UNKNOWN, dtype=np.int64)
        for j, ch in enumerate(chars):
            lut[ch] = j * radix + first
        keys += lut[mat[:, p]] - first
        luts.append(lut)
        radix *= len(chars)
    return pos, luts, keys, radix


def build_table(shape: TTShape, hw: TensixHardware, space: SearchSpace) -> ScoreTable | None:
    """Price every point of `space` at once (None if the space is too large to tabulate)."""
    params = space.params
    dims = tuple(len(p.choices) for p in params)
    if math.prod(dims) > MAX_TABLE:
        return None
    names = [p.name for p in params]

    def axis(name: str, values: np.ndarray) -> np.ndarray:
        shape_ = [1] * len(params)
        shape_[names.index(name)] = -1
        return values.reshape(shape_)

    def choice(name: str, dtype: type | None = None) -> np.ndarray:
        return axis(name, np.asarray(params[names.index(name)].choices, dtype=dtype))

    layouts = [str(c) for c in params[names.index("layout")].choices]
    lt = layout_table(shape, hw, layouts)
    lay = axis("layout", np.arange(len(layouts)))
    fp32 = choice("fp32_acc", bool)
    abh_t, sb_h, sb_w = resolve_ranks(
        lt, hw, lay, choice("act_block_h_rank", np.int64), choice("subblock_rank", np.int64), fp32
    )
    mem = np.asarray(params[names.index("memory")].choices).astype(str)
    fid = np.asarray(params[names.index("math_fidelity")].choices).astype(str)
    cyc, allowed = fidelity_inputs(hw, fid)
    x = {
        "lay": lay,
        "dram": axis("memory", mem == MEMORIES[1]),
        "mem_ok": axis("memory", np.isin(mem, MEMORIES)),
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
    feas = np.broadcast_to(ev.feasible, dims).reshape(-1)
    lat = np.broadcast_to(ev.a["cycles"] / hw.clock_hz, dims).reshape(-1)
    off = np.broadcast_to(ev.a["dram_bytes"], dims).reshape(-1)
    foot = np.broadcast_to(ev.a["footprint"], dims).reshape(-1)
    strides = tuple(int(math.prod(dims[i + 1 :])) for i in range(len(dims)))
    return ScoreTable(
        params=params,
        feasible=feas.copy(),
        latency=np.where(feas, lat, np.inf),
        offchip=np.where(feas, off, np.inf),
        footprint=np.where(feas, foot, np.inf),
        coders=tuple(_Coder(p.choices, st) for p, st in zip(params, strides, strict=True)),
    )


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
