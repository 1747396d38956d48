"""The whole Trainium space priced at once: formula inputs shaped over the grid of choices.

A point of the space is a choice per parameter, and every formula input depends on a few
parameters only: a role's split on (stationary, its tile cap, its block cap, the cores it gets);
the block fetches and open accumulators on the loop order and on which roles have more than one
block. So each input is built as an array that varies along its own parameters only (size 1
elsewhere), and `evaluate` (the one formula implementation, elementwise) broadcasts them over the
grid. The grid is walked in slabs of a few ten thousand points to stay in cache.

The grid's axes are in `LAYOUT` order, not the space's: with the cores and shard outermost (the
slabs) and the loop order and accumulator between the roles' parameters, numpy's broadcasts run
over longer inner loops (the fastest of the axis orders measured). Where one core is used every
shard choice gives the same nest, so those slabs are copied rather than priced again. Scorers
number a point by its codes in this order (costmodels.trainium_batch).

The role splits come from `split_role` (as in `build_mapping`), and the order effects from
`fetches` / `live_output_blocks` (as in `mapping_quantities`) evaluated on the 48 cases of
(order, which of s/m/k have several blocks), so the grid cannot drift from the single-mapping path.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from costmodels.protocol import SearchSpace
from costmodels.trainium_formulas import ProblemConsts, Quantities, evaluate, feasible, fetches, live_output_blocks
from costmodels.trainium_hw import TrainiumHardware
from costmodels.trainium_nest import ROLE_CODE, B, K, M, Roles, RoleSplit, S, roles_of, split_role
from workload.problem import Problem

SLAB = 1 << 16  # points per evaluate() call when pricing the grid
#: axes of the priced grid, outermost first (every parameter of `build_space`)
LAYOUT: tuple[str, ...] = ("stationary", "cores", "shard", "tile_stat", "block_stat", "order", "acc", "tile_k",
                           "block_k", "tile_mov", "block_mov")  # fmt: skip
_TILE = {"s": "tile_stat", "m": "tile_mov", "k": "tile_k"}
_BLOCK = {"s": "block_stat", "m": "block_mov", "k": "block_k"}
_PRIME = {B: 2, S: 3, M: 5, K: 7}
_EFFECTS = ("m_in_stat", "s_in_mov", "s_live", "m_live")


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


def grid_inputs(problem: Problem, space: SearchSpace, roles: Roles) -> dict[str, np.ndarray]:
    """Per-role split numbers of every point with the stationary choice of `roles`, as grid arrays.

    The arrays have one axis per entry of ``LAYOUT[1:]`` (the parameters after ``stationary``), of
    size 1 along the parameters they do not depend on. Keys: ``<role>.<level>`` for the product of
    a role's factors at a level (roles b, s, m, k; levels tile, sbuf, hbm, chip), ``flags`` (4, 2, 1
    for s, m, k having several blocks, summed), ``order8`` (8 x the order choice number) and
    ``acc_psum``.
    """
    names = LAYOUT[1:]
    ch = {p.name: p.choices for p in space.params}
    dim = {n: i for i, n in enumerate(names)}
    nd = len(names)
    cores_ch = ch["cores"]
    one = cores_ch.index(1)
    cdims = (dim["cores"], dim["shard"])
    out: dict[str, np.ndarray] = {}
    for role in "bsmk":
        sizes = tuple(problem.axes[a] for a in roles.axes[role])
        t_ch = ch[_TILE[role]] if role != "b" else (1,)
        b_ch = ch[_BLOCK[role]] if role != "b" else (1,)
        # cores this role gets: the cores choice where the shard is this role, else 1
        ci = np.asarray([[j if s == role else one for s in ch["shard"]] for j in range(len(cores_ch))])
        tab = {f: np.ones((len(t_ch), len(cores_ch), len(b_ch))) for f in ("tile", "sbuf", "hbm", "chip")}
        used = [(j, cores_ch[j]) for j in sorted(set(ci.flat))]  # a role no shard names only ever gets 1
        for (i, tc), (j, cc), (k, bc) in itertools.product(enumerate(t_ch), used, enumerate(b_ch)):
            sp = _split(sizes, int(tc), int(cc), int(bc))
            for f in tab:
                tab[f][i, j, k] = math.prod(getattr(sp, f))
        for f, t in tab.items():
            g = t[:, ci, :]  # (tile, cores, shard, block)
            if role == "b":
                out[f"b.{f}"] = _placed(g[0, :, :, 0], cdims, nd)
            else:
                out[f"{role}.{f}"] = _placed(g, (dim[_TILE[role]], *cdims, dim[_BLOCK[role]]), nd)
    out["flags"] = (out["s.hbm"] > 1) * 4 + ((out["m.hbm"] > 1) * 2 + (out["k.hbm"] > 1))
    out["order8"] = _placed(np.arange(len(ch["order"])) * 8, (dim["order"],), nd)
    out["acc_psum"] = _placed(np.asarray([a == "psum" for a in ch["acc"]]), (dim["acc"],), nd)
    return out


def slab_quantities(g: dict[str, np.ndarray], eff: dict[str, np.ndarray]) -> Quantities:
    """Formula inputs from grid arrays `g` (`grid_inputs`, possibly sliced) and the `order_effects` tables.

    The fetches and open blocks are products of block counts (integers, exact in float64 in any order):
    the trips of a role enter them where its effect flag is set, else 1.
    """
    hs, hm, hk, hb = g["s.hbm"], g["m.hbm"], g["k.hbm"], g["b.hbm"]
    case = g["order8"] + g["flags"]  # flat index of order_effects tables
    m_in_stat, s_in_mov, s_live, m_live = (np.take(eff[k].reshape(-1), case) for k in _EFFECTS)
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
        fetch_stat=np.where(m_in_stat, stat * hm, stat),
        fetch_mov=np.where(s_in_mov, mov * hs, mov),
        live_out=np.where(s_live, hs, 1.0) * np.where(m_live, hm, 1.0),
        cores=g["b.chip"] * g["s.chip"] * g["m.chip"] * g["k.chip"],
        chip_k=g["k.chip"],
        acc_psum=g["acc_psum"],
    )


def _slab(arr: np.ndarray, lead: tuple[int, ...]) -> np.ndarray:
    """`arr` at the leading grid indices `lead` (axes of size 1 broadcast)."""
    return arr[tuple(i if arr.shape[d] > 1 else 0 for d, i in enumerate(lead))]


def _same_nest(one_core: int, lead: tuple[int, ...]) -> tuple[int, ...] | None:
    """The earlier slab with the same nests as the slab at `lead` (one core: every shard alike), or None.

    `lead` starts with the cores and shard choice numbers when it has two entries or more.
    """
    if len(lead) >= 2 and lead[0] == one_core and lead[1] > 0:
        return (lead[0], 0, *lead[2:])
    return None


def price_grid(
    hw: TrainiumHardware,
    problem: Problem,
    space: SearchSpace,
    consts: Callable[[Roles], ProblemConsts],
) -> PricedGrid:
    """(latency s, off-chip bytes, footprint bytes) of every point of `space`, over the `LAYOUT` axes."""
    ch = {p.name: p.choices for p in space.params}
    if sorted(ch) != sorted(LAYOUT):
        raise ValueError(f"the grid prices the parameters {LAYOUT}, not {tuple(ch)}")
    shape = tuple(len(ch[n]) for n in LAYOUT)
    tables = tuple(np.empty(shape) for _ in range(3))
    inner = shape[1:]
    n_lead = 0
    while n_lead < len(inner) and math.prod(inner[n_lead:]) > SLAB:
        n_lead += 1
    eff = order_effects(tuple(str(o) for o in ch["order"]))
    one_core = ch["cores"].index(1)
    for si, st in enumerate(ch["stationary"]):
        roles = roles_of(problem, str(st))
        g = grid_inputs(problem, space, roles)
        c = consts(roles)
        for lead in itertools.product(*(range(n) for n in inner[:n_lead])):
            at = (si, *lead)
            same = _same_nest(one_core, lead)
            if same is not None:
                for t in tables:
                    t[at] = t[(si, *same)]
                continue
            ev = evaluate(hw, c, slab_quantities({k: _slab(v, lead) for k, v in g.items()}, eff))
            pen = np.where(feasible(ev), 0.0, np.inf)  # x + 0.0 == x exactly; x + inf == inf
            lat, off, foot = (t[at] for t in tables)
            np.divide(ev.cycles, hw.te_clock_hz, out=lat)
            np.add(lat, pen, out=lat)
            np.add(ev.hbm_chip, pen, out=off)
            np.add(ev.footprint, pen, out=foot)
    lat, off, foot = (t.reshape(-1) for t in tables)
    return PricedGrid(axes=LAYOUT, shape=shape, latency=lat, offchip=off, footprint=foot)
