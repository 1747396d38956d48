"""The TMATMUL model over a whole space at once: the cold path of `score_codes`.

Once enough of a binary problem's space is asked for, `Prepared` prices every point of it here
and keeps the result (`CubeTable`), so later points only read their cell, and a run of
consecutive points (a chunk of an enumeration, `param_tables.run_start`) reads slices of it. The
steps and the order of every floating-point operation are those of `ascend.cost`
(`_pipes`, `_core`, `_offchip`, `cube_scores`), so each cell is bit-identical to what `cost` and
the per-point paths give (the tests compare them); only the bookkeeping differs, because this
runs once per problem and is most of what a fresh problem costs. Fresh memory costs a page fault
per 4 KiB on first touch, about as much as computing what it holds, so the table is compact (9
bytes per point, and a little more: see `CubeTable`) and the work keeps to reused buffers:

- the grid's axes are in `CUBE_ORDER` (the tables' layout: double_buffer outermost, the axes
  most terms share innermost, so numpy's inner loops are long); it is priced in slabs of at most
  `SLAB` cells (one combination of the leading axes each), each copied into its place in the
  result, which is laid out in the space's own C order (numpy copies in the destination's
  memory order, both double_buffer choices at once, so each line of the result is written once);
- a slab's terms live in six buffers, reused from slab to slab and kept per thread from problem
  to problem (`_buffer`);
- the terms that depend on neither base_k nor l1_k (blocks, output bytes, FIX time, cores, the
  accumulator and whether FIX overlaps) are computed once for all slabs;
- double buffering only chooses between the pipelined and the serial time of a core, and halves
  the buffer checks: both times are computed once per slab and each double_buffer choice takes
  its own, with no selection pass over the cells;
- an infeasible cell reads ``inf``: the latency (and the off-chip bytes, when kept) add a penalty
  of ``0`` (feasible: ``x + 0 == x`` exactly, every term being finite and non-negative) or
  ``inf``, in place of `cube_scores`' ``np.where(ok, x, inf)``, which `CubeTable` applies to the
  rest when they are read. The checks and the footprint depend on neither the grid nor the
  slab's leading axes, so they are small.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from costmodels.ascend.cost import SCORE_OUTPUTS, CubeConsts
from costmodels.ascend.cube_tables import CUBE_ORDER
from costmodels.ascend.energy import cube_level_bytes
from costmodels.energy import EnergyPricer
from costmodels.param_tables import Table, grid_fields

Arrays = dict[str, np.ndarray]
#: Most cells per slab: a slab costs about a hundred numpy calls whatever its size (its six buffers,
#: 3 MiB at this size, are kept per thread: `_buffer`).
SLAB = 1 << 16
#: Position of the core grid in `CUBE_PARAMS`: the space's last parameter.
GRID = 7
_scratch = threading.local()  # per thread: the float64 memory of the slab buffers, kept across problems


def _buffer(shape: tuple[int, ...]) -> np.ndarray:
    """A float64 buffer of `shape` (6 x at most `SLAB` cells), in memory kept per thread across problems."""
    size = math.prod(shape)
    mem = getattr(_scratch, "mem", None)
    if mem is None or mem.size < size:
        mem = _scratch.mem = np.empty(max(size, 6 * SLAB))
    return mem[:size].reshape(shape)


@dataclass(frozen=True, eq=False)
class CubeTable:
    """The scores of every point of a binary problem's space, in the space's C order, kept compact.

    Latency and feasibility are kept per point. The footprint does not depend on the core grid
    (the space's last parameter), so it is kept per point of the other parameters, unmasked; the
    off-chip bytes are kept per point only when they vary (else every feasible point moves
    `min_bytes`: both inputs stay in L2). A run of points reads latency and feasibility as
    read-only views of the table and builds the rest in one pass each.
    """

    latency: np.ndarray  # inf where infeasible
    ok: np.ndarray
    footprint: np.ndarray  # per point of all parameters but the core grid, whether feasible or not
    grids: int  # choices of the core grid
    offchip: np.ndarray | None  # inf where infeasible; None: `min_bytes` where feasible
    min_bytes: float
    energy: np.ndarray | None = None  # pJ per point, inf where infeasible (None: not priced, inf)

    def run(self, start: int, n: int) -> Arrays:
        """`SCORE_OUTPUTS` of the points ``start .. start + n - 1``."""
        ok, g = self.ok[start : start + n], self.grids
        q0 = start // g
        if start % g == 0 and n % g == 0:  # whole grids: the footprint broadcasts over them
            raw = self.footprint[q0 : q0 + n // g, None]
            foot = np.where(ok.reshape(-1, g), raw, np.inf).reshape(-1)
        else:
            raw = np.repeat(self.footprint[q0 : (start + n - 1) // g + 1], g)[start - q0 * g :][:n]
            foot = np.where(ok, raw, np.inf)
        off = np.where(ok, self.min_bytes, np.inf) if self.offchip is None else self.offchip[start : start + n]
        pj = np.full(n, np.inf) if self.energy is None else self.energy[start : start + n]
        return {
            "ok": ok,
            "latency": self.latency[start : start + n],
            "offchip_bytes": off,
            "footprint": foot,
            "energy": pj,
        }

    def take(self, idx: np.ndarray) -> Arrays:
        """`SCORE_OUTPUTS` of the points numbered `idx`."""
        ok = np.take(self.ok, idx)
        foot = np.where(ok, np.take(self.footprint, idx // self.grids), np.inf)
        off = np.where(ok, self.min_bytes, np.inf) if self.offchip is None else np.take(self.offchip, idx)
        pj = np.full(np.shape(idx), np.inf) if self.energy is None else np.take(self.energy, idx)
        return {"ok": ok, "latency": np.take(self.latency, idx), "offchip_bytes": off, "footprint": foot, "energy": pj}


def tabulate_cube(
    tables: Sequence[Table], shape: Sequence[int], c: CubeConsts, energy: EnergyPricer | None = None
) -> CubeTable:
    """The scores of every point of the space of `shape` (the core grid its last parameter).

    Args:
        tables: the cube tables over the space's choices (laid out in `CUBE_ORDER`).
        shape: the number of choices of each parameter, in `CUBE_PARAMS` order.
        c: the problem's constants.
        energy: the problem's energy model (None: the energy column is not priced, inf).
    """
    dims = tuple(shape[d] for d in CUBE_ORDER)
    f = grid_fields(tables, [0] * len(shape), [s - 1 for s in shape], CUBE_ORDER)
    split = 1  # the slabs' leading axes are dims[1:split]
    while split < len(dims) - 1 and math.prod(dims[split:]) > SLAB:
        split += 1
    names: tuple[str, ...] = ("latency", "ok") if c.l2_resident else ("latency", "ok", "offchip_bytes")
    names += ("energy",) if energy is not None else ()
    out = {k: np.empty(tuple(shape), dtype=SCORE_OUTPUTS[k]) for k in names}
    view = {k: v.transpose(CUBE_ORDER) for k, v in out.items()}  # the same memory, axes in CUBE_ORDER
    foot = np.empty(tuple(shape[:-1]))  # the space without its grid axis
    no_grid = tuple(d for d in CUBE_ORDER if d != GRID)
    foot_view = foot.transpose(no_grid)  # the same memory, axes in CUBE_ORDER but the grid's
    at_grid = CUBE_ORDER.index(GRID)
    # terms of neither base_k nor l1_k (nor double_buffer): _pipes' blocks, out_bytes, fix, then _core and _offchip's
    blocks = f["blocks_m"] * f["bn"]
    out_bytes = f["bo_m"] * f["bo_n"]
    fix = out_bytes / c.fix_rate
    hoisted = {"blocks": blocks, "out_bytes": out_bytes, "fix": fix, "fixb": fix / blocks}
    hoisted |= {"cores_used": f["cores_m"] * f["cores_n"], "acc": f["acc_m"] * f["acc_n"]}
    hoisted["overlap"] = 2 * hoisted["acc"] <= c.l0c
    db = [bool(x) for x in f["db"].reshape(-1)]
    rest = dims[split:]
    h = f["h"].reshape(dims[0], *[1] * len(rest))  # over (double_buffer, *the slab's axes)
    all_grids = bool(f["grid_ok"].all())
    buf = _buffer((6, *rest))
    res = buf[: dims[0]]  # an output of the slab for every double_buffer choice (buffers _slab is done with)
    ok_res = np.empty((dims[0], *rest), dtype=bool)
    fields = {k: v for k, v in f.items() if k not in ("db", "h")} | hoisted
    for lead in np.ndindex(*dims[1:split]):
        g = {k: v[(0, *(i if v.shape[j] > 1 else 0 for j, i in enumerate(lead, 1)))] for k, v in fields.items()}
        core, hbm, offchip = _slab(c, g, list(buf), any(db), not all(db))
        where = (slice(None), *lead)  # numpy copies in the destination's memory order: each line written once
        # the checks of cube_scores, every double_buffer choice at once (all small but for the grid's)
        ok = g["rng_m"] & g["rng_n"] & (g["acc"] <= c.l0c)
        ok = ok & (g["l0a"] * h <= c.l0a) & (g["l0b"] * h <= c.l0b) & ((g["l1a"] + g["l1b"]) * h <= c.l1)
        np.copyto(view["ok"][where], np.logical_and(ok, g["grid_ok"], out=ok_res))
        pen = np.where(ok if all_grids else ok & g["grid_ok"], 0.0, np.inf)
        for d, doubles in enumerate(db):
            np.maximum(core[doubles], hbm, out=res[d])  # cycles
        np.divide(res, c.clock_hz, out=res)
        np.copyto(view["latency"][where], np.add(res, pen, out=res))
        if energy is not None:  # before res (two of the slab's buffers) is reused; offchip is another
            np.copyto(view["energy"][where], np.add(_energy(energy, g, offchip), pen))
        if not c.l2_resident:
            np.copyto(view["offchip_bytes"][where], np.add(offchip, pen, out=res))
        small = (g["fa"] + g["fb"]) * h  # the footprint: no term of it depends on the grid
        small += g["acc"]
        if split <= at_grid:  # the grid is an axis of the slab (size 1 in the footprint)
            np.copyto(foot_view[where], np.squeeze(small, 1 + at_grid - split))
        elif lead[at_grid - 1] == 0:  # the grid leads the slabs: one footprint serves them all
            np.copyto(foot_view[(slice(None), *lead[: at_grid - 1], *lead[at_grid:])], small)
    for arr in (*out.values(), foot):
        arr.flags.writeable = False  # runs of points get views of it
    return CubeTable(
        latency=out["latency"].reshape(-1),
        ok=out["ok"].reshape(-1),
        footprint=foot.reshape(-1),
        grids=shape[GRID],
        offchip=out["offchip_bytes"].reshape(-1) if not c.l2_resident else None,
        min_bytes=c.min_bytes,
        energy=out["energy"].reshape(-1) if energy is not None else None,
    )


def _energy(energy: EnergyPricer, g: Arrays, offchip: np.ndarray | float) -> np.ndarray:
    """A slab's energy: `cube_level_bytes` of `_pipes`' tiles, blocks and GM bytes, as `cube_scores` computes them."""
    tiles = g["tiles_m"] * g["lknk"] * g["tiles_n"]
    steps = g["blocks"] * g["nk"]
    refetch = steps * g["kmulti"]
    a_resident = np.maximum(refetch, g["blocks_m"]) * g["ach"] + steps * g["bch"]
    b_resident = steps * g["ach"] + np.maximum(refetch, g["bnb"]) * g["bch"]
    gm_core = np.minimum(a_resident, b_resident)  # the better block loop order, as `cost._pipes` takes it
    levels = cube_level_bytes(g, tiles, g["blocks"], gm_core, g["cores_used"], offchip)
    return np.asarray(energy.total(levels), dtype=np.float64)


def _slab(
    c: CubeConsts, g: Arrays, buf: list[np.ndarray], doubled: bool, serial: bool
) -> tuple[dict[bool, np.ndarray], np.ndarray | float, np.ndarray | float]:
    """A slab's core cycles (with and without double buffering), HBM cycles and off-chip bytes, in `buf`.

    The steps of `_pipes`, `_core` and `_offchip`, operation for operation.
    """
    t, s, a, b, x, y = buf
    # _pipes
    np.multiply(g["tiles_m"] * g["lknk"], g["tiles_n"], out=t)  # tiles
    np.multiply(g["blocks"], g["nk"], out=s)  # steps
    np.multiply(s, g["kmulti"], out=y)  # refetch
    np.maximum(y, g["blocks_m"], out=a)
    np.multiply(a, g["ach"], out=a)
    np.multiply(s, g["bch"], out=b)
    np.add(a, b, out=a)  # a_resident
    np.maximum(y, g["bnb"], out=b)
    np.multiply(b, g["bch"], out=b)
    np.multiply(s, g["ach"], out=x)
    np.add(x, b, out=x)  # b_resident
    np.minimum(a, x, out=a)  # gm_core
    np.multiply(t, c.head + g["u"] * g["v"], out=x)  # cube
    np.multiply(t, g["a1"] + g["b1"], out=t)  # mte1
    np.divide(a, c.mte2_rate, out=b)  # mte2
    fix = g["fix"]
    # _core
    np.add(b, t, out=y)
    np.add(y, x, out=y)  # three
    np.maximum(b, t, out=t)
    np.maximum(t, x, out=t)  # top
    np.subtract(y, t, out=x)
    np.divide(x, s, out=x)
    np.add(t, x, out=x)  # pipe
    if serial:
        np.add(y, fix, out=y)  # serial = three + fix
    if doubled:
        np.maximum(x, fix, out=t)
        np.add(t, g["fixb"], out=t)  # max(pipe, fix) + fix / blocks
        np.add(x, fix, out=x)  # pipe + fix
        np.minimum(t, x, out=t)  # the overlap only where it helps
        np.copyto(x, t, where=g["overlap"])  # doubled
    # _offchip, and the HBM time of cube_scores
    if c.l2_resident:
        offchip: np.ndarray | float = c.min_bytes
        hbm: np.ndarray | float = c.min_bytes / c.hbm_rate
    else:
        np.add(a, g["out_bytes"], out=a)
        np.multiply(g["cores_used"], a, out=a)
        np.maximum(c.min_bytes, a, out=a)
        offchip = a
        hbm = np.divide(a, c.hbm_rate, out=b)
    return {True: x, False: y}, hbm, offchip
