"""Trainium scoring: the whole space priced at once as a grid of choices, then read back by code.

A point of the space is a choice per parameter, and every formula input depends on a few
parameters only: a role's split on (stationary, its tile cap, its block cap, the cores it gets);
the block fetches and open accumulators on the loop order and on which roles have more than one
block. So each input is built as an array that varies along its own parameters only (size 1
elsewhere), and the formulas of costmodels.trainium.cost (elementwise, the ones `evaluate`
runs for `check`/`cost`) broadcast them over the grid: `traffic` once per slab, `accumulation`
and the capacity checks once per accumulator choice. Slabs have up to `SLAB` points (a few ten
thousand) to stay in cache.

The grid's axes are in `LAYOUT` order, not the space's: the cores and accumulator outermost (the
slabs), then the shard and the loop order among the roles' parameters, so numpy's broadcasts run
over long inner loops (the fastest of the axis orders measured). Where one core is used every
shard choice gives the same nest, so those points are priced for one shard and broadcast (or
copied, when slabs are split by shard). `GridScorer` numbers a point by its codes in this order.

The role splits come from `split_role` (as in `build_mapping`), and the order effects from
`fetches` / `live_output_blocks` (as in `mapping_quantities`) evaluated on the 48 cases of
(order, which of s/m/k have several blocks), so the grid cannot drift from the single-mapping path.

Scoring reads the grid back (`GridScorer`): a point's number in the grid is the sum of its code for
each parameter times that parameter's stride in `LAYOUT` order (parameters with one choice add
nothing); the three objectives are gathered at those numbers, and a point is feasible where its
latency is finite (the grid holds ``inf`` for infeasible points). `score_batch` reaches the same
gather through `choice_codes.score_values`, which encodes value columns to codes first.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache, lru_cache

import numpy as np

from costmodels.energy import pricer
from costmodels.protocol import BatchScore, Choice, SearchSpace
from costmodels.trainium.cost import (
    ProblemConsts,
    Quantities,
    accumulation,
    any_violated,
    capacity_violations,
    fetches,
    live_output_blocks,
    onchip_bytes,
    tile_violations,
    traffic,
)
from costmodels.trainium.hardware import ENERGY_LEVELS, TrainiumHardware
from costmodels.trainium.nest import ROLE_CODE, B, K, M, Roles, RoleSplit, S, roles_of, shard_cores, split_role
from workload.problem import Problem

SLAB = 1 << 15  # most points per slab when pricing the grid
#: a grid of at most this many points per stationary choice is priced in one slab per stationary choice, every
#: cores choice at once: numpy's per-call cost dominates small slabs (one structure of Llama-7B prefill's
#: mlp.gate_proj, 6,000 points on trn1: 1.2-1.5 ms -> 0.8 ms; 24,000 on trn2 were slower, 2.5-3.3 -> 3.0-4.1 ms)
SMALL = 1 << 13
#: axes of the priced grid, outermost first (every parameter of `build_space`)
LAYOUT: tuple[str, ...] = ("stationary", "cores", "acc", "shard", "tile_stat", "block_stat", "order", "tile_k",
                           "block_k", "tile_mov", "block_mov")  # fmt: skip
_TILE = {"s": "tile_stat", "m": "tile_mov", "k": "tile_k"}
_BLOCK = {"s": "block_stat", "m": "block_mov", "k": "block_k"}
_PRIME = {B: 2, S: 3, M: 5, K: 7}


@dataclass(frozen=True)
class PricedGrid:
    """(latency s, off-chip bytes, footprint bytes) of every point, flat in C order over `axes`.

    Infeasible points are ``inf`` in all three.
    """

    axes: tuple[str, ...]  # parameter names, outermost first
    shape: tuple[int, ...]  # choices per axis
    latency: np.ndarray
    offchip: np.ndarray
    footprint: np.ndarray
    energy: np.ndarray | None = None  # pJ (costmodels.energy: MACs and bytes at hbm, sbuf, psum); None: not priced
    #: ``fill + max(tensor engine, steady DMA)`` cycles of every point, over `axes` with ``acc`` of size 1
    #: (`cost.traffic`'s ``prologue + busy``, which the latency adds the eviction to: trainium/bounds.py)
    floor: np.ndarray | None = None


@cache
def order_effects(orders: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Per (order, s has blocks, m has blocks, k has blocks): which trips enter the fetches and live blocks.

    ``m_in_stat``: the m trips multiply the stationary fetches; ``s_in_mov``: the s trips multiply the
    moving fetches; ``s_live`` / ``m_live``: the s / m trips multiply the open output blocks. Each is
    read off `fetches` / `live_output_blocks` run on a nest with a distinct prime as the trips of each
    role that has blocks (1 otherwise), so it is exactly what those functions compute for the nest.
    The tables are read-only (kept per tuple of orders).
    """
    cases = list(itertools.product(range(len(orders)), (0, 1), (0, 1), (0, 1)))
    roles = np.asarray([[B] + [ROLE_CODE[c] for c in orders[o]] for o, *_ in cases], dtype=np.int64)
    has = np.asarray([[1, fs, fm, fk] for _, fs, fm, fk in cases], dtype=bool)  # by role code B, S, M, K
    primes = np.asarray([_PRIME[r] for r in (B, S, M, K)], dtype=float)
    trips = np.where(has[np.arange(len(cases))[:, None], roles], primes[roles], 1.0)
    stat, mov = fetches(trips, roles, (B, S, K)), fetches(trips, roles, (B, M, K))
    live = live_output_blocks(trips, roles)
    shape = (len(orders), 2, 2, 2)
    out = {
        "m_in_stat": has[:, M] & (stat % _PRIME[M] == 0),
        "s_in_mov": has[:, S] & (mov % _PRIME[S] == 0),
        "s_live": has[:, S] & (live % _PRIME[S] == 0),
        "m_live": has[:, M] & (live % _PRIME[M] == 0),
    }
    for v in out.values():
        v.flags.writeable = False
    return {k: v.reshape(shape) for k, v in out.items()}


def _placed(values: np.ndarray, dims: tuple[int, ...], ndim: int) -> np.ndarray:
    """`values` (one axis per entry of `dims`) as an array of `ndim` axes, size 1 off `dims`."""
    order = np.argsort(dims)
    arr = np.transpose(values, order)
    shape = [1] * ndim
    for d, n in zip(np.asarray(dims)[order], arr.shape, strict=True):
        shape[int(d)] = n
    return arr.reshape(shape)


@lru_cache(maxsize=1 << 14)
def _split(sizes: tuple[int, ...], tile_cap: int, cores: int, block_cap: int) -> RoleSplit:
    return split_role(sizes, tile_cap, cores, block_cap)


@lru_cache(maxsize=1 << 12)
def _role_inputs(
    role: str,
    sizes: tuple[int, ...],
    t_ch: tuple[Choice, ...],
    b_ch: tuple[Choice, ...],
    cores_ch: tuple[Choice, ...],
    shard_ch: tuple[Choice, ...],
) -> dict[str, np.ndarray]:
    """`grid_inputs`' arrays of one role (read-only), from the choices they depend on: kept, as the structures a
    search visits share most of them (one role's tile and blocks change from one structure to the next)."""
    names = LAYOUT[1:]
    dim = {n: i for i, n in enumerate(names)}
    nd = len(names)
    cdims = (dim["cores"], dim["shard"])
    # cores this role gets (`shard_cores`), by (cores, shard) choice, as an index into `used`
    got = [[shard_cores(str(s), int(c)).get(role, 1) for s in shard_ch] for c in cores_ch]
    used = sorted({n for row in got for n in row})  # a role no shard names only ever gets 1
    ci = np.asarray([[used.index(n) for n in row] for row in got])
    tab = {f: np.ones((len(t_ch), len(used), len(b_ch))) for f in ("tile", "sbuf", "hbm", "chip")}
    for (i, tc), (j, cc), (k, bc) in itertools.product(enumerate(t_ch), enumerate(used), enumerate(b_ch)):
        sp = _split(sizes, int(tc), int(cc), int(bc))
        for f in tab:
            tab[f][i, j, k] = math.prod(getattr(sp, f))
    out: dict[str, np.ndarray] = {}
    for f, t in tab.items():
        g = t[:, ci, :]  # (tile, cores, shard, block)
        if role == "b":
            arr = _placed(g[0, :, :, 0], cdims, nd)
        else:
            arr = _placed(g, (dim[_TILE[role]], *cdims, dim[_BLOCK[role]]), nd)
        arr.flags.writeable = False
        out[f"{role}.{f}"] = arr
    return out


def grid_inputs(problem: Problem, space: SearchSpace, roles: Roles) -> dict[str, np.ndarray]:
    """Per-role split numbers of every point with the stationary choice of `roles`, as grid arrays.

    The arrays have one axis per entry of ``LAYOUT[1:]`` (the parameters after ``stationary``), of
    size 1 along the parameters they do not depend on. Keys: ``<role>.<level>`` for the product of
    a role's factors at a level (roles b, s, m, k; levels tile, sbuf, hbm, chip), ``sk`` / ``mk``
    (2 if s / m has several blocks, plus 1 if k has) and ``order4`` (4 x the order choice number):
    summed, the flat indices of `effect_tables`. None depends on ``acc`` (size 1 along it).
    """
    ch = {p.name: p.choices for p in space.params}
    out: dict[str, np.ndarray] = {}
    for role in "bsmk":
        sizes = tuple(problem.axes[a] for a in roles.axes[role])
        t_ch = tuple(ch[_TILE[role]]) if role != "b" else (1,)
        b_ch = tuple(ch[_BLOCK[role]]) if role != "b" else (1,)
        out |= _role_inputs(role, sizes, t_ch, b_ch, tuple(ch["cores"]), tuple(ch["shard"]))
    many = {r: (out[f"{r}.hbm"] > 1).astype(np.intp) for r in "smk"}
    out["sk"] = many["s"] * 2 + many["k"]
    out["mk"] = many["m"] * 2 + many["k"]
    out["order4"] = _placed(np.arange(len(ch["order"])) * 4, (LAYOUT.index("order") - 1,), len(LAYOUT) - 1)
    return out


@cache
def effect_tables(orders: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The `order_effects` tables read with the multiplied role's own flag set, flat by (order, 2 flags).

    ``m_in_stat`` and ``m_live`` by (order, s has blocks, k has blocks), ``s_in_mov`` and ``s_live``
    by (order, m has blocks, k has blocks). A role with one block has trips 1, so whether its trips
    enter a product does not change it: reading the case where they may enter gives the same
    products and index arrays over two roles' parameters instead of three.
    """
    eff = order_effects(orders)
    out = {
        "m_in_stat": eff["m_in_stat"][:, :, 1, :],
        "m_live": eff["m_live"][:, :, 1, :],
        "s_in_mov": eff["s_in_mov"][:, 1, :, :],
        "s_live": eff["s_live"][:, 1, :, :],
    }
    return {k: np.ascontiguousarray(v).reshape(-1) for k, v in out.items()}


def slab_quantities(g: dict[str, np.ndarray], eff: dict[str, np.ndarray], acc_psum: np.ndarray) -> Quantities:
    """Formula inputs from grid arrays `g` (`grid_inputs`, possibly sliced), `effect_tables` and `acc_psum`.

    The fetches and open blocks are products of block counts (integers, exact in float64 in any order):
    the trips of a role enter them where its effect flag is set, else 1.
    """
    hs, hm, hk, hb = g["s.hbm"], g["m.hbm"], g["k.hbm"], g["b.hbm"]
    sk = g["order4"] + g["sk"]  # flat indices of the effect tables
    mk = g["order4"] + g["mk"]
    stat = hb * hs * hk
    mov = hb * hm * hk
    return Quantities(
        ts=g["s.tile"],
        tm=g["m.tile"],
        tk=g["k.tile"],
        tb=g["b.tile"],
        bs=g["s.sbuf"],
        bm=g["m.sbuf"],
        bk=g["k.sbuf"],
        bb=g["b.sbuf"],
        hs=hs,
        hm=hm,
        hk=hk,
        hb=hb,
        fetch_stat=np.where(np.take(eff["m_in_stat"], sk), stat * hm, stat),
        fetch_mov=np.where(np.take(eff["s_in_mov"], mk), mov * hs, mov),
        live_out=np.where(np.take(eff["s_live"], mk), hs, 1.0) * np.where(np.take(eff["m_live"], sk), hm, 1.0),
        cores=g["b.chip"] * g["s.chip"] * g["m.chip"] * g["k.chip"],
        chip_k=g["k.chip"],
        acc_psum=acc_psum,
    )


def _slab(arr: np.ndarray, lead: tuple[int, ...], one_shard: bool) -> np.ndarray:
    """`arr` at the leading grid indices `lead` (axes of size 1 broadcast), the next axis cut to 1 if `one_shard`."""
    out = arr[tuple(i if arr.shape[d] > 1 else 0 for d, i in enumerate(lead))]
    return out[:1] if one_shard else out


def price_grid(
    problem: Problem,
    hw: TrainiumHardware,
    space: SearchSpace,
    consts: Callable[[Roles], ProblemConsts],
) -> PricedGrid:
    """(latency s, off-chip bytes, footprint bytes, energy pJ) of every point of `space`, over the `LAYOUT` axes.

    A slab is one (stationary, cores, acc) choice, split further along the next axes (shard first)
    while it has more than `SLAB` points; a grid of at most `SMALL` points per stationary choice is one
    slab per (stationary, acc) choice. `traffic` does not depend on acc, so both acc slabs share
    it. With one core every shard choice gives the same nests: those slabs are priced for the first
    shard and broadcast, or copied when the shard is a slab's own choice.
    """
    ch = {p.name: p.choices for p in space.params}
    if sorted(ch) != sorted(LAYOUT):
        raise ValueError(f"the grid prices the parameters {LAYOUT}, not {tuple(ch)}")
    shape = tuple(len(ch[n]) for n in LAYOUT)
    tables = tuple(np.empty(shape) for _ in range(4))
    floor = np.empty((*shape[:2], 1, *shape[3:]))
    energy = pricer(hw.energy, problem, ENERGY_LEVELS)
    inner = shape[3:]  # shard and the axes after it
    n_deep = 0
    while n_deep < len(inner) and math.prod(inner[n_deep:]) > SLAB:
        n_deep += 1
    eff = effect_tables(tuple(str(o) for o in ch["order"]))
    one_core = ch["cores"].index(1) if 1 in ch["cores"] else -1  # a sub-space may leave one core out
    psums = [np.asarray(a == "psum") for a in ch["acc"]]
    every = slice(None)
    whole = math.prod(shape[1:]) <= SMALL  # one slab per stationary choice, every cores choice at once

    def price(q: Quantities, c: ProblemConsts, at: tuple[int | slice, ...], deep: tuple[int, ...]) -> None:
        """Price the slab `q` into the tables at (stationary, cores) `at`, every acc choice, `deep`."""
        tr = traffic(hw, c, q)
        fixed = any_violated(tile_violations(hw, c, q).values())
        np.add(tr.prologue, tr.busy, out=floor[(*at, 0, *deep)])
        for ai, psum in enumerate(psums):
            qa = replace(q, acc_psum=psum)
            acc = accumulation(hw, c, qa, tr)
            bad = fixed | any_violated(capacity_violations(hw, acc).values())
            pen = np.where(bad, np.inf, 0.0)  # x + 0.0 == x exactly; x + inf == inf
            lat, off, foot, en = (t[(*at, ai, *deep)] for t in tables)
            sbuf, psum_b = onchip_bytes(c, qa, tr)
            np.add(energy.total({"hbm": tr.hbm_chip, "sbuf": sbuf, "psum": psum_b}), pen, out=en)
            np.divide(acc.cycles, hw.te_clock_hz, out=lat)
            np.add(lat, pen, out=lat)
            np.add(tr.hbm_chip, pen, out=off)
            np.add(acc.footprint, pen, out=foot)

    for si, st in enumerate(ch["stationary"]):
        roles = roles_of(problem, str(st))
        g = grid_inputs(problem, space, roles)
        c = consts(roles)
        if whole:  # (with one core every shard prices the same nests: priced, not copied, here)
            price(slab_quantities({k: v[:, 0] for k, v in g.items()}, eff, psums[0]), c, (si, every), ())
            continue
        for ci, *deep in itertools.product(range(shape[1]), *(range(n) for n in inner[:n_deep])):
            if ci == one_core and deep and deep[0] > 0:  # one core, a slab of another shard: a copy
                dst: tuple[int | slice, ...] = (si, ci, every, *deep)
                src: tuple[int | slice, ...] = (si, ci, every, 0, *deep[1:])
                for t in tables:
                    t[dst] = t[src]
                floor[(si, ci, 0, *deep)] = floor[(si, ci, 0, 0, *deep[1:])]
                continue
            one_shard = ci == one_core and not deep
            q = slab_quantities({k: _slab(v, (ci, 0, *deep), one_shard) for k, v in g.items()}, eff, psums[0])
            price(q, c, (si, ci), tuple(deep))
    lat, off, foot, en = (t.reshape(-1) for t in tables)
    return PricedGrid(axes=LAYOUT, shape=shape, latency=lat, offchip=off, footprint=foot, energy=en, floor=floor)


class GridScorer:
    """Code columns -> `BatchScore` of those points, gathered from one priced grid."""

    def __init__(self, grid: PricedGrid) -> None:
        strides = [math.prod(grid.shape[i + 1 :]) for i in range(len(grid.shape))]
        # parameters with several choices; the stride-1 one last (added without a multiply)
        terms = [(name, s) for name, s, n in zip(grid.axes, strides, grid.shape, strict=True) if n > 1]
        self.terms = tuple(sorted(terms, key=lambda t: t[1] == 1))
        self.names = grid.axes
        energy = grid.energy if grid.energy is not None else np.full_like(grid.latency, np.inf)
        self.tables = (grid.latency, grid.offchip, grid.footprint, energy)

    def flat(self, codes: dict[str, np.ndarray]) -> np.ndarray:
        """The number in the grid of every point of `codes` (``codes[name][i]``: point i's choice index)."""
        out: np.ndarray | None = None
        tmp: np.ndarray | None = None
        for name, stride in self.terms:
            c = np.asarray(codes[name])
            if c.dtype != np.intp:
                c = c.astype(np.intp)
            if out is None:
                out = c * stride
            elif stride == 1:
                out += c
            else:
                if tmp is None:
                    tmp = np.empty_like(out)
                np.multiply(c, stride, out=tmp)
                out += tmp
        if out is None:  # a space of one point
            return np.zeros(len(codes[self.names[0]]), dtype=np.intp)
        return out

    def __call__(self, codes: dict[str, np.ndarray]) -> BatchScore:
        flat = self.flat(codes)
        lat, off, foot, en = (np.take(t, flat) for t in self.tables)
        objectives = {"latency": lat, "offchip_bytes": off, "footprint": foot, "energy": en}
        return BatchScore(feasible=lat < np.inf, objectives=objectives)
