"""Admissible latency bounds of structures of the Trainium space (issue #12, branch and bound).

Two bounds: `tile_bounds`, a closed form over every (stationary, tile_stat, tile_mov, tile_k)
choice at once (numpy, no pricing: the structures of best-first search over a space of every
tile count), and `EngineBound`, read from the priced grid where the whole space is priced (at
most `subgrid.GRID_LIMIT` points). `TrainiumTarget.structure_bound` takes the larger.

The mapper searches a large space by *structures* (some parameters fixed, `mapper.bounds`) and skips
a structure whose bound is not below the best latency found. `EngineBound` bounds one by the
smallest ``fill + max(tensor engine, steady DMA)`` of its points: `cost.traffic`'s ``prologue +
busy``, with ``te = n_inst x ii`` per core (``max(min(64, N_stationary), N_moving)``, 4x for fp32:
nki-nc_matmul.txt, "Estimated instruction cost") and the blocked schedule's DMA
(hardware-facts.md §2.2 step 5), read from the priced grid (`scoring.price_grid` keeps it as
``PricedGrid.floor``, over every parameter but the accumulator, which it does not depend on).

Admissibility: `cost.accumulation` prices a point at ``prologue + max(busy, evict)`` cycles, the
same float operations on the same ``prologue`` and ``busy`` arrays; a maximum is never below an
operand and rounding an addition is monotone, so every point's latency is at least its
``prologue + busy`` over the clock, and the minimum over the structure's points (feasible or not)
is below each feasible point's latency. The HBM roofline of the whole problem is not added here:
`mapper.bounds.StructureBounds` already takes the larger of this bound and `lower_bound`. The
bound is tight where the fixed choices set the tiles and cores (padding, idle cores and the
64-cycle floor show) or the blocks and loop order (the DMA shows);
`tests/costmodels/test_structure_bounds.py` checks it against the best point of many structures
of random problems.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from costmodels.energy import pricer
from costmodels.protocol import Choice, SearchSpace
from costmodels.trainium.cost import ProblemConsts
from costmodels.trainium.hardware import ENERGY_LEVELS, TrainiumHardware
from costmodels.trainium.nest import Roles, roles_of, shard_cores, split_inner, split_role
from costmodels.trainium.refetch import CoreShare, case_floors, footprint_cases, refetch_cases, refetch_floors
from costmodels.trainium.scoring import LAYOUT
from workload.problem import Problem

ProblemConsts_of = Callable[[Roles], ProblemConsts]


@dataclass(frozen=True)
class EngineBound:
    """``fill + max(tensor engine, steady DMA)`` cycles of every point, over the `LAYOUT` axes (``acc`` of size 1)."""

    space: SearchSpace
    floor: np.ndarray
    clock_hz: float

    def __call__(self, fixed: dict[str, Choice]) -> float:
        """Seconds no feasible point with these fixed choices can beat.

        Raises:
            ValueError: a fixed choice names no parameter of the space, or a value it does not offer.
        """
        choices = {p.name: p.choices for p in self.space.params}
        unknown = sorted(set(fixed) - set(choices))
        if unknown:
            raise ValueError(f"no parameter {unknown[0]!r} in this space: its parameters are {sorted(choices)}")
        for name, value in fixed.items():
            if value not in choices[name]:
                raise ValueError(f"{name}={value!r} is not a choice of this space: {choices[name]}")
        index: list[slice] = []
        for axis, name in enumerate(LAYOUT):
            if name not in fixed or self.floor.shape[axis] == 1:
                index.append(slice(None))
            else:
                code = choices[name].index(fixed[name])
                index.append(slice(code, code + 1))
        return float(self.floor[tuple(index)].min()) / self.clock_hz


#: relative margin taken off `tile_bounds` (float rounding of the same sums in another order)
FLOAT_MARGIN = 1e-12
#: tile_stat choices `tile_bounds` prices at a time: every entry is its own (elementwise) value, so the table is the
#: same whatever the rows; a few rows keep a split's arrays (rows x tile_mov x tile_k) in cache, where the whole grid
#: (124 x 196 x 96 on a Llama-7B prefill layer on trn2) went through memory about 15 times per split
TILE_BOUND_ROWS = 8
#: the parameters `tile_bounds` bounds every combination of, in its axis order
TILE_PARAMS: tuple[str, ...] = ("stationary", "tile_stat", "tile_mov", "tile_k")


def role_tiles(sizes: list[int], caps: tuple[Choice, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(elements per instruction tile, tile count) of a role for each tile cap (`nest.split_inner`, rule T1).

    Read-only arrays, kept per (sizes, caps): `tile_bounds` asks for the same roles once per block of rows."""
    return _role_tiles(tuple(sizes), tuple(int(c) for c in caps))


@lru_cache(maxsize=1 << 10)  # bounded: a service sees many problems
def _role_tiles(sizes: tuple[int, ...], caps: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    elems, counts = [], []
    for cap in caps:
        tile = split_inner(list(sizes), cap)
        elems.append(math.prod(tile))
        counts.append(math.prod(-(-s // t) for s, t in zip(sizes, tile, strict=True)))
    out = np.asarray(elems, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    for a in out:
        a.flags.writeable = False
    return out


@lru_cache(maxsize=1 << 10)  # bounded: a service sees many problems
def _role_chips(sizes: tuple[int, ...], caps: tuple[int, ...], cores: int) -> np.ndarray:
    """`_chips` of each tile cap (read-only; kept, as `tile_bounds` asks for the same role once per block of rows)."""
    out = np.asarray([_chips(sizes, cap, cores) for cap in caps])
    out.flags.writeable = False
    return out


def core_splits(cores: int, batch: int, most_s: int, most_m: int) -> list[tuple[int, int, int]]:
    """Every ``(c_b, c_s, c_m)`` with product at most `cores`, each at most its role's most tiles."""
    return [
        (cb, cs, cm)
        for cb in range(1, min(cores, batch) + 1)
        for cs in range(1, min(cores // cb, most_s) + 1)
        for cm in range(1, min(cores // (cb * cs), most_m) + 1)
    ]


@lru_cache(maxsize=1 << 16)  # bounded: a service sees many problems
def _chips(sizes: tuple[int, ...], tile_cap: int, cores: int) -> int:
    """The product of a role's chip factors (`nest.split_role`; the block cap does not change them)."""
    return math.prod(split_role(sizes, tile_cap, cores, 1).chip)


def point_split(
    sizes: dict[str, list[int]], tile_stat: int, tile_mov: int, cores: int, shard: str
) -> tuple[int, int, int]:
    """``(c_b, c_s, c_m)`` of a point: each role's product of chip factors (`nest.split_role`, with the cores
    `nest.shard_cores` gives the role), fixed by the point's tile caps and its (cores, shard) choices."""
    got = shard_cores(shard, cores)
    caps = {"b": 1, "s": tile_stat, "m": tile_mov}
    cb, cs, cm = (_chips(tuple(sizes[r]), caps[r], got.get(r, 1)) for r in "bsm")
    return cb, cs, cm


def reachable_splits(
    sizes: dict[str, list[int]], choices: dict[str, tuple[Choice, ...]]
) -> dict[tuple[int, int, int], np.ndarray]:
    """Which (tile_stat, tile_mov) choices some (cores, shard) choice gives each split: bool ``[stat, mov]``.

    A split no point reaches with those tiles is a cell without points (`split_cells` makes it ``inf``).
    """
    stat, mov = choices["tile_stat"], choices["tile_mov"]
    out: dict[tuple[int, int, int], np.ndarray] = {}
    for cores in {int(c) for c in choices["cores"]}:
        for shard in {str(x) for x in choices["shard"]}:
            got = shard_cores(shard, cores)
            cb = _chips(tuple(sizes["b"]), 1, got.get("b", 1))
            cs = _role_chips(tuple(sizes["s"]), tuple(int(t) for t in stat), got.get("s", 1))
            cm = _role_chips(tuple(sizes["m"]), tuple(int(t) for t in mov), got.get("m", 1))
            for a, b in itertools.product(np.unique(cs), np.unique(cm)):
                key = (cb, int(a), int(b))
                hit = (cs == a)[:, None] & (cm == b)[None, :]
                out[key] = out[key] | hit if key in out else hit
    return out


def tile_bounds(problem: Problem, hw: TrainiumHardware, space: SearchSpace, consts: ProblemConsts_of) -> np.ndarray:
    """Cycles no feasible point with a given (stationary, tile_stat, tile_mov, tile_k) choice beats, all at once.

    Shape: the choices of `TILE_PARAMS` in the space's order (C order). A structure fixes those
    four; its points differ in blocks, loop order, accumulator, cores and shard. Closed form from
    `cost.traffic` / `cost.accumulation` (the instruction cost is nki-nc_matmul.txt, "Estimated
    instruction cost"; the DMA and schedule hardware-facts.md §2.2 steps 5-6), with ``T_r`` the
    tile count of role r (`role_tiles`), ``t_r`` its tile elements, ``B`` the batch points and
    ``C`` the most cores offered:

    - cores: a feasible point splits the cores as ``chip_b chip_s chip_m <= C`` (``chip_k = 1``,
      ``k-sharding``; a chip factor is at most the role's tile count, `nest.split_outer`); the bound
      is the least over every such split ``(c_b, c_s, c_m)`` (`core_splits`) that some (cores,
      shard) choice gives with the structure's tiles (`reachable_splits`, `point_split`) of the
      terms below;
    - tensor engine: per core ``n_inst = n_out x bk x hk`` with ``n_out = bs hs bm hm bb hb``.
      Per axis, ``sbuf x hbm >= ceil(count / chip)`` (`nest.split_role`), so a role's per-core
      tiles are ``>= ceil(T_r / c_r)`` (an integer above the ratio: ``B`` for the batch points):
      ``n_out >= ceil(B / c_b) ceil(T_s / c_s) ceil(T_m / c_m)`` and ``n_inst >= T_k n_out``; times
      the instruction cost ``max(min(64, t_s), t_m)`` (x4 fp32) fixed by the tiles: ``te``;
    - eviction: ``>= n_out (t_m + 60)`` vector cycles (a copy per output tile; the SBUF
      accumulator adds more), in tensor-engine cycles;
    - fill (``prologue``): the first stationary and moving blocks, ``>= t_k (t_s s_stat + t_m
      s_mov)`` bytes (blocks of one tile) over the core's DMA rate;
    - DMA: a core fetches every padded tile of its share at least once (``fetch x block``
      covers it): ``ceil(B / c_b) ceil(T_s / c_s)`` stationary tiles of ``t_s x T_k t_k``
      elements, ``ceil(B / c_b) ceil(T_m / c_m)`` moving ones and ``n_out`` output tiles; every
      core moves as much (`cost.traffic` multiplies a core's bytes by the cores, ``>= c_b c_s
      c_m``), and an input at least its real bytes; the larger of the core's bytes over its DMA
      rate and the chip's over the HBM bandwidth.

    `cost.accumulation` prices ``prologue + max(max(te, dma - prologue, 0), evict)``, which is at
    least each of ``prologue + te``, ``prologue + evict`` and ``dma``; each term is at least its
    bound above, so the bound ``max(fill + max(te, evict), dma)`` is admissible; it is returned
    less a `FLOAT_MARGIN` of 1e-12 for float rounding (the cost sums the same terms in another order):
    the least over the splits of `split_cells`' latency floors.
    Tight where the tensor engine binds (the per-core count
    divides evenly and the first blocks are single tiles) or the HBM does (an operand duplicated
    over the cores that split the other one shows).
    `tests/costmodels/trainium/test_trainium_tile_bounds.py` checks it against every point of
    random structures of small problems.
    """
    choices = {p.name: p.choices for p in space.params}
    shape = tuple(len(choices[n]) for n in TILE_PARAMS[1:])
    out = [np.full(shape, np.inf) for _ in choices["stationary"]]
    stat = choices["tile_stat"]
    for lo in range(0, len(stat), TILE_BOUND_ROWS):  # a few tile_stat choices at a time: arrays that stay in cache
        rows = slice(lo, lo + TILE_BOUND_ROWS)
        some = {**choices, "tile_stat": stat[rows]}
        for at, _, latency, _ in split_cells(problem, hw, some, consts, offchip=False, reachable=True):
            np.minimum(out[at][rows], latency, out=out[at][rows])
    # the same quantities rounded in another order: a 1e-12 margin keeps the bound below the priced latency
    return np.stack(out) * (1 - FLOAT_MARGIN)


def least_footprint(
    hw: TrainiumHardware, c: ProblemConsts, es: np.ndarray, em: np.ndarray, ek: np.ndarray
) -> np.ndarray:
    """Footprint bytes no point with these tiles (elements per stationary, moving and k tile) holds fewer of:
    `cost.accumulation`'s, with one tile of each input double-buffered, one open output tile and its banks."""
    per_bank = np.ceil(em * 4 / hw.psum_bank_bytes)
    pp = 2 * np.ceil(ek / hw.pe_rows) * (es * c.s_stat + em * c.s_mov) + em * min(c.s_out, 4.0)
    return np.asarray((pp + per_bank * hw.psum_bank_bytes) * hw.sbuf_partitions)


def footprint_floors(
    problem: Problem, hw: TrainiumHardware, choices: dict[str, tuple[Choice, ...]], consts: ProblemConsts_of
) -> np.ndarray:
    """`least_footprint` of every (stationary, tile_stat, tile_mov, tile_k) choice, in the shape of their choices."""
    out = []
    for st in choices["stationary"]:
        roles = roles_of(problem, str(st))
        sizes = {r: [problem.axes[a] for a in roles.axes[r]] for r in "smk"}
        es, _ = role_tiles(sizes["s"], choices["tile_stat"])
        em, _ = role_tiles(sizes["m"], choices["tile_mov"])
        ek, _ = role_tiles(sizes["k"], choices["tile_k"])
        out.append(least_footprint(hw, consts(roles), es[:, None, None], em[None, :, None], ek[None, None, :]))
    return np.stack(out)


def split_cells(
    problem: Problem,
    hw: TrainiumHardware,
    choices: dict[str, tuple[Choice, ...]],
    consts: ProblemConsts_of,
    *,
    offchip: bool = True,
    energy: bool = True,
    footprint: bool = False,
    cases: bool = True,
    latency_cases: bool = False,
    k_least: bool = False,
    only: tuple[int, int, int] | None = None,
    reachable: bool = False,
) -> Iterator[tuple[int, tuple[int, int, int], np.ndarray, dict[str, np.ndarray] | None]]:
    """Latency cycles, off-chip bytes and energy no point beats, per tile structure, one core split at a time.

    Yields ``(stationary index, split, latency, floors)`` per ``(stationary, split (c_b, c_s, c_m))``
    (`only`: that split alone): arrays over
    the (tile_stat, tile_mov, tile_k) choices of `choices` (C order), ``inf`` where the split cannot
    occur with those tiles (no (cores, shard) choice gives it, `reachable_splits`); ``floors`` (None unless
    `offchip`) holds the ``offchip_bytes`` and (unless not `energy`) ``energy`` (pJ) floors.

    A feasible point of a structure splits its cores as one of these splits (`tile_bounds`), so its
    latency, off-chip bytes and energy are each at least that split's entries (before float rounding:
    take `FLOAT_MARGIN` off):

    - latency: `tile_bounds`' argument;
    - off-chip bytes: `cost.traffic` prices them as ``max(core_stat x cores, real) + max(core_mov x
      cores, real) + core_out x cores``, every term at least its floor here (a core's padded share of
      each operand, ``cores >= c_b c_s c_m``). With `offchip` the fetches are counted again too: the
      loop orders and the SBUF and PSUM capacities force one operand or both to be fetched again per
      block of the other, or the output to stay open across them (`refetch.refetch_cases`, with the
      largest ``block_stat`` / ``block_mov`` / ``block_k`` choices as the block caps): the least of
      those cases, in the bytes and in the DMA term (`tile_bounds` keeps the plain floors, so a cell's
      latency is never below its entry there);
    - footprint (`footprint`; the same for every split): `cost.accumulation` holds ``2 bk kslots bb (bs
      t_s s_stat + bm t_m s_mov)`` input bytes and ``live x t_m`` open output elements (at the output's
      bytes or 4) per SBUF partition, and ``live x banks per tile`` (PSUM) or twice that (SBUF
      accumulator) PSUM banks: at least one tile of each input double-buffered (``kslots = ceil(t_k /
      pe_rows)``), one open output tile and one tile's banks, over every partition (`least_footprint`).
      With `cases` (and `offchip`), the split is cut further into the loop-order and block-size cases of
      `refetch.footprint_cases`: the arrays get a leading case axis, each case its own fetches (in the
      bytes, the DMA term and the energy) beside what it holds at least (a point is in one case, and
      fetches and holds at least that case's). The least latency and the least footprint of a
      structure sit in different cases (a core's output tiles held open across the k blocks, or an
      operand fetched again per block), so one cell per split pairs values no point has;
    - `latency_cases` (without footprint, with `offchip`): the split is cut into the finer cases of
      `refetch.footprint_cases` with ``latency`` (every block size its own case): each case's bytes are the
      larger of the least above and its own, and its latency takes its own first blocks (the prologue), its
      whole blocks' padded tiles (``n_out``) and, where PSUM cannot hold its open tiles, SBUF accumulation's
      adds in the eviction; the least latency and the least bytes of a structure sit in different cases, so
      one cell per split pairs values no point has (a later pass's cells, `front_cells._live_cases`);
    - energy: `costmodels.energy`'s sum (the MACs fixed, pJ per byte never negative) over the off-chip
      floor and the on-chip floors of `cost.onchip_bytes`, with at least ``n_out`` output tiles and
      ``n_out x T_k`` instructions per core on at least ``c_b c_s c_m`` cores.

    `k_least`: the arrays' tile_k axis is one entry below every tile_k choice's: each term grows with
    a k tile's elements ``e_k``, its count ``n_k`` and their product (the padded K), so each taken at
    its least over the choices bounds every choice (the bound of a run of structures, `cell_blocks`).

    A split is a *cell* of the structure for several objectives (`mapper.bounds.FrontCellBounded`):
    few cores move few bytes slowly, many cores are fast and duplicate operands, and the one vector
    of the least latency beside the least bytes bounds neither.
    """
    cores = max(int(c) for c in choices["cores"])
    energy_of = pricer(hw.energy, problem, ENERGY_LEVELS)
    cap_s, cap_m, cap_k = (max(int(b) for b in choices[n]) for n in ("block_stat", "block_mov", "block_k"))
    f = hw.te_clock_hz
    ve = hw.te_clock_hz / hw.ve_clock_hz
    for at, st in enumerate(choices["stationary"]):
        roles = roles_of(problem, str(st))
        c = consts(roles)
        sizes = {r: [problem.axes[a] for a in roles.axes[r]] for r in "bsmk"}
        batch = math.prod(sizes["b"])
        es, ns = role_tiles(sizes["s"], choices["tile_stat"])
        em, nm = role_tiles(sizes["m"], choices["tile_mov"])
        ek, nk = role_tiles(sizes["k"], choices["tile_k"])
        nkek = nk * ek  # the padded K
        if k_least:
            ek, nk, nkek = ek.min(keepdims=True), nk.min(keepdims=True), nkek.min(keepdims=True)
        es, ns = es[:, None, None], ns[:, None, None]
        em, nm = em[None, :, None], nm[None, :, None]
        ek, nk, nkek = ek[None, None, :], nk[None, None, :], nkek[None, None, :]
        reach = reachable_splits(sizes, choices)
        no_point = np.zeros((len(choices["tile_stat"]), len(choices["tile_mov"])), dtype=bool)
        ii = np.maximum(np.minimum(hw.matmul_floor_cycles, es), em) * (hw.fp32_cost_factor if c.fp32 else 1.0)
        fill = ek * (es * c.s_stat + em * c.s_mov) / hw.core_dma_bytes_per_s * f
        if footprint:
            footprint_floor = least_footprint(hw, c, es, em, ek)
        for cb, cs, cm in [only] if only is not None else core_splits(cores, batch, int(ns.max()), int(nm.max())):
            if reachable and not reach.get((cb, cs, cm), no_point).any():
                continue  # (`reachable`: a split no (cores, shard) choice gives with these tiles is left out)
            n_out = math.ceil(batch / cb) * np.ceil(ns / cs) * np.ceil(nm / cm)
            te = n_out * nk * ii
            evict = n_out * (em + hw.access_overhead_cycles) * ve
            per_b = math.ceil(batch / cb)
            core_stat = per_b * np.ceil(ns / cs) * es * nkek * c.s_stat
            core_mov = per_b * np.ceil(nm / cm) * em * nkek * c.s_mov
            core_out = n_out * es * em * c.s_out
            used = cb * cs * cm
            share = CoreShare(np.ceil(ns / cs), np.ceil(nm / cm), nk, es, em, ek, core_stat, core_mov, k_least)
            # the cells: the operands fetched again as the loop orders and capacities force (`tile_bounds`: once)
            once = [(np.ones(1), np.ones(1))]
            caps = (cap_s, cap_m, cap_k)
            held = footprint_cases(hw, c, share, caps) if footprint and offchip and cases else None
            first = fill
            if held is not None:  # one cell per case (a leading axis): each case's bytes beside what it holds
                chip, dma = case_floors(hw, c, used, share, [(held[0], held[1])], core_out)[0]
                held_floor = held[2] * hw.sbuf_partitions
            else:
                least = refetch_cases(hw, c, share, caps) if offchip else once
                chip, dma = refetch_floors(hw, c, used, share, least, core_out)
            if latency_cases and offchip and held is None:  # one cell per fine case (a leading axis)
                by = footprint_cases(hw, c, share, caps, latency=True)
                case_chip, case_dma = case_floors(hw, c, used, share, [(by[0], by[1])], core_out)[0]
                chip, dma = np.maximum(chip, case_chip), np.maximum(dma, case_dma)  # both floors of the case's points
                first = ek * (by[2] * es * c.s_stat + by[3] * em * c.s_mov) / hw.core_dma_bytes_per_s * f
                n_case = per_b * by[4] * by[5]  # whole blocks: the case's fewest output tiles per core
                adds = by[6] * (2 * em + hw.access_overhead_cycles)  # SBUF accumulation's adds (`cost.accumulation`)
                te, evict = n_case * nk * ii, n_case * (em + hw.access_overhead_cycles + adds) * ve
            bound = np.maximum(first + np.maximum(te, evict), dma)
            # a split no (cores, shard) choice gives with those tiles has no point (nor one with more cores on
            # s or m than the role has tiles)
            can = (ns >= cs) & (nm >= cm) & reach.get((cb, cs, cm), no_point)[:, :, None]
            latency = np.where(can, bound, np.inf)
            if not offchip:
                yield at, (cb, cs, cm), latency, None
                continue
            floors = {"offchip_bytes": chip}
            if energy:
                # `cost.onchip_bytes`: SBUF at least the instructions' operand reads, the evictions and the HBM
                # bytes landed; PSUM at least each instruction's result and one eviction per output tile
                n_inst = n_out * nk
                sbuf = (n_out * nkek * (es * c.s_stat + em * c.s_mov) + n_out * es * em * 4) * used + chip
                psum = (n_inst + n_out) * es * em * 4.0 * used
                floors["energy"] = energy_of.total({"hbm": chip, "sbuf": sbuf, "psum": psum})
            if footprint:
                floors["footprint"] = footprint_floor if held is None else np.maximum(footprint_floor, held_floor)
            floors = {k: np.where(can, np.broadcast_to(v, bound.shape), np.inf) for k, v in floors.items()}
            yield at, (cb, cs, cm), latency, floors
