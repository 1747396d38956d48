"""The whole Trainium space priced at once: formula inputs shaped over the grid of choices.

A point of the space is a choice per parameter, and every formula input depends on a few
parameters only: a role's split on (stationary, its tile cap, its block cap, the cores it gets);
the block fetches and open accumulators on the loop order and on which roles have more than one
block. So each input is built as an array that varies along its own parameters only (size 1
elsewhere), and `evaluate` (the one formula implementation, elementwise) broadcasts them over the
grid. The grid is walked in slabs of a few ten thousand points to stay in cache.

The role splits come from `split_role` (as in `build_mapping`), and the order effects from
`fetches` / `live_output_blocks` (as in `mapping_quantities`) evaluated on the 48 cases of
(order, which of s/m/k have several blocks), so the grid cannot drift from the single-mapping path.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from costmodels.protocol import SearchSpace
from costmodels.trainium_formulas import ProblemConsts, Quantities, evaluate, feasible, fetches, live_output_blocks
from costmodels.trainium_hw import TrainiumHardware
from costmodels.trainium_nest import ROLE_CODE, B, K, M, Roles, S, roles_of, split_role
from workload.problem import Problem

SLAB = 1 << 15  # points per evaluate() call when pricing the grid
_TILE = {"s": "tile_stat", "m": "tile_mov", "k": "tile_k"}
_BLOCK = {"s": "block_stat", "m": "block_mov", "k": "block_k"}
_PRIME = {B: 2, S: 3, M: 5, K: 7}


def order_effects(orders: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Per (order, s has blocks, m has blocks, k has blocks): which trips enter the fetches and live blocks.

    ``m_in_stat``: the m trips multiply the stationary fetches; ``s_in_mov``: the s trips multiply the
    moving fetches; ``s_live`` / ``m_live``: the s / m trips multiply the open output blocks. Each is
    read off `fetches` / `live_output_blocks` run on a nest with a distinct prime as the trips of each
    role that has blocks (1 otherwise), so it is exactly what those functions compute for the nest.
    """
    shape = (len(orders), 2, 2, 2)
    out = {name: np.zeros(shape, dtype=bool) for name in ("m_in_stat", "s_in_mov", "s_live", "m_live")}
    for (o, order), fs, fm, fk in itertools.product(enumerate(orders), (0, 1), (0, 1), (0, 1)):
        codes = [B] + [ROLE_CODE[c] for c in order]
        has = {B: 1, S: fs, M: fm, K: fk}
        trips = np.asarray([[_PRIME[c] if has[c] else 1 for c in codes]], dtype=float)
        roles = np.asarray([codes], dtype=np.int64)
        stat, mov = fetches(trips, roles, (B, S, K))[0], fetches(trips, roles, (B, M, K))[0]
        live = live_output_blocks(trips, roles)[0]
        i = (o, fs, fm, fk)
        out["m_in_stat"][i] = fm and stat % _PRIME[M] == 0
        out["s_in_mov"][i] = fs and mov % _PRIME[S] == 0
        out["s_live"][i] = fs and live % _PRIME[S] == 0
        out["m_live"][i] = fm and live % _PRIME[M] == 0
    return out


def _placed(values: np.ndarray, dims: tuple[int, ...], ndim: int) -> np.ndarray:
    """`values` (one axis per entry of `dims`) as an array of `ndim` axes, size 1 off `dims`."""
    order = np.argsort(dims)
    arr = np.transpose(values, order)
    shape = [1] * ndim
    for d, n in zip(np.asarray(dims)[order], arr.shape, strict=True):
        shape[int(d)] = n
    return arr.reshape(shape)


def grid_inputs(problem: Problem, space: SearchSpace, roles: Roles) -> dict[str, np.ndarray]:
    """Per-role split numbers of every point with the stationary choice of `roles`, as grid arrays.

    The arrays have one axis per parameter of `space` after ``stationary`` (in space order), of
    size 1 along the parameters they do not depend on. Keys: ``<role>.<level>`` for the product
    of a role's factors at a level (roles b, s, m, k; levels tile, sbuf, hbm, chip), ``order``
    (the order choice number) and ``acc_psum``.
    """
    names = space.names()[1:]
    ch = {p.name: p.choices for p in space.params}
    dim = {n: i for i, n in enumerate(names)}
    nd = len(names)
    cores_ch = ch["cores"]
    one = cores_ch.index(1)
    cdims = (dim["cores"], dim["shard"])
    out: dict[str, np.ndarray] = {}
    for role in "bsmk":
        sizes = [problem.axes[a] for a in roles.axes[role]]
        t_ch = ch[_TILE[role]] if role != "b" else (1,)
        b_ch = ch[_BLOCK[role]] if role != "b" else (1,)
        tab = {f: np.ones((len(t_ch), len(cores_ch), len(b_ch))) for f in ("tile", "sbuf", "hbm", "chip")}
        for (i, tc), (j, cc), (k, bc) in itertools.product(enumerate(t_ch), enumerate(cores_ch), enumerate(b_ch)):
            sp = split_role(sizes, int(tc), int(cc), int(bc))
            for f in tab:
                tab[f][i, j, k] = math.prod(getattr(sp, f))
        # cores this role gets: the cores choice where the shard is this role, else 1
        ci = np.asarray([[j if s == role else one for s in ch["shard"]] for j in range(len(cores_ch))])
        for f, t in tab.items():
            g = t[:, ci, :]  # (tile, cores, shard, block)
            if role == "b":
                out[f"b.{f}"] = _placed(g[0, :, :, 0], cdims, nd)
            else:
                out[f"{role}.{f}"] = _placed(g, (dim[_TILE[role]], *cdims, dim[_BLOCK[role]]), nd)
    out["order"] = _placed(np.arange(len(ch["order"])), (dim["order"],), nd)
    out["acc_psum"] = _placed(np.asarray([a == "psum" for a in ch["acc"]]), (dim["acc"],), nd)
    return out


def slab_quantities(g: dict[str, np.ndarray], eff: dict[str, np.ndarray]) -> Quantities:
    """Formula inputs from grid arrays `g` (`grid_inputs`, possibly sliced) and the `order_effects` tables."""
    hs, hm, hk, hb = g["s.hbm"], g["m.hbm"], g["k.hbm"], g["b.hbm"]
    case = g["order"] * 8 + ((hs > 1) * 4 + (hm > 1) * 2 + (hk > 1))  # flat index of order_effects tables
    m_in_stat, s_in_mov, s_live, m_live = (
        np.take(eff[k].reshape(-1), case) for k in ("m_in_stat", "s_in_mov", "s_live", "m_live")
    )
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
        # 1 + flag * (x - 1) is x or 1 exactly (small integers), like np.where(flag, x, 1)
        fetch_stat=hb * hs * hk * (1.0 + m_in_stat * (hm - 1.0)),
        fetch_mov=hb * hm * hk * (1.0 + s_in_mov * (hs - 1.0)),
        live_out=(1.0 + s_live * (hs - 1.0)) * (1.0 + m_live * (hm - 1.0)),
        cores=g["b.chip"] * g["s.chip"] * g["m.chip"] * g["k.chip"],
        chip_k=g["k.chip"],
        acc_psum=g["acc_psum"],
    )


def _slab(arr: np.ndarray, lead: tuple[int, ...]) -> np.ndarray:
    """`arr` at the leading grid indices `lead` (axes of size 1 broadcast)."""
    return arr[tuple(i if arr.shape[d] > 1 else 0 for d, i in enumerate(lead))]


def price_grid(
    hw: TrainiumHardware,
    problem: Problem,
    space: SearchSpace,
    consts: Callable[[Roles], ProblemConsts],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(latency s, off-chip bytes, footprint bytes) of every point of `space`, flat in enumeration order.

    Infeasible points are ``inf`` in all three.
    """
    shape = tuple(len(p.choices) for p in space.params)
    lat, off, foot = (np.empty(shape) for _ in range(3))
    inner = shape[1:]
    n_lead = 0
    while n_lead < len(inner) and math.prod(inner[n_lead:]) > SLAB:
        n_lead += 1
    eff = order_effects(tuple(str(o) for o in space.params[space.names().index("order")].choices))
    for si, st in enumerate(space.params[0].choices):
        roles = roles_of(problem, str(st))
        g = grid_inputs(problem, space, roles)
        c = consts(roles)
        for lead in itertools.product(*(range(n) for n in inner[:n_lead])):
            ev = evaluate(hw, c, slab_quantities({k: _slab(v, lead) for k, v in g.items()}, eff))
            pen = np.where(feasible(ev), 0.0, np.inf)  # x + 0.0 == x exactly; x + inf == inf
            at = (si, *lead)
            lat[at] = ev.cycles / hw.te_clock_hz + pen
            off[at] = ev.hbm_chip + pen
            foot[at] = ev.footprint + pen
    return lat.reshape(-1), off.reshape(-1), foot.reshape(-1)
