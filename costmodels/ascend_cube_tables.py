"""The per-parameter tables of the TMATMUL cost model (see ascend_batch.py for how they are used).

Parameters are numbered in `CUBE_PARAMS` order: 0 base_m, 1 base_k, 2 base_n, 3 l1_m, 4 l1_k,
5 l1_n, 6 double_buffer, 7 core_grid. Each GEMM group is split by `nest_group` once per
distinct combination of the parameters it depends on; every quantity of the cost model that
depends on a few parameters is computed here, once per combination, as float64 (all of them
are integers far below 2**53, so they are exact and any product order gives the same value).
The per-point formulas that combine them are in ascend_cube_cost.py.

Tables (dims -> fields):

- ``mk`` (base_m, base_k, l1_m, l1_k): left tile and A chunk: ``u = r*(m'/16)*(k'/k0)``, L0A
  bytes and their MTE1 time, the A chunk bytes, A's share of L1 and of the footprint, the
  accumulator rows ``l1_m*m'*4``, and whether m and k are TMATMUL-legal;
- ``nk`` (base_k, base_n, l1_k, l1_n): the same for the right tile and the B chunk;
- ``m`` (base_m, l1_m, core_grid) and ``n`` (base_n, l1_n, core_grid): blocks, tiles, output
  bytes and cores along M (with the batch split of the grid folded in) and along N;
- ``k`` (base_k, l1_k): K chunks; ``d`` (double_buffer): the ping-pong factor.
"""

from __future__ import annotations

import numpy as np

from costmodels.ascend_batch import Table
from costmodels.ascend_cube import CubeSetup
from costmodels.ascend_tiling import nest_group, parse_grid
from workload import dtypes

F64 = np.float64


def _ru(x: np.ndarray, m: int) -> np.ndarray:
    return -(-x // m) * m


def _splits(s: CubeSetup, group: str, counts: list[tuple[int, ...]], nlev: int) -> np.ndarray:
    """Level sizes (innermost first) of a group for each tuple of counts, as int64 ``[len(counts), nlev]``."""
    axes = s.axes(group)
    return np.array([[nest_group(axes, c).size(i) for i in range(nlev)] for c in counts], dtype=np.int64).reshape(
        -1, nlev
    )


def cube_tables(s: CubeSetup, values: tuple[tuple[object, ...], ...], report: bool = False) -> tuple[Table, ...]:
    """The tables over the distinct `values` of each parameter (in `CUBE_PARAMS` order).

    Args:
        s: the problem on the preset.
        values: distinct values per parameter (the space's choices, or the values a batch holds).
        report: also build the ``mkr``/``nkr`` tables of tile sizes that violation messages quote.
    """
    hw = s.hw
    bm_v, bk_v, bn_v, lm_v, lk_v, ln_v = (tuple(int(x) for x in v) for v in values[:6])  # type: ignore[call-overload]
    db_v = np.asarray([bool(x) for x in values[6]])
    grids = np.array([parse_grid(str(g)) for g in values[7]], dtype=np.int64).reshape(-1, 3)
    nb, nk_, nn, nlm, nlk, nln, ng = (len(v) for v in (bm_v, bk_v, bn_v, lm_v, lk_v, ln_v, grids))
    sa, sb, so = (dtypes.info(d).bytes for d in (s.left, s.right, s.out))
    lim = hw.tmatmul_max_dim

    # group splits, once per distinct combination of the counts they depend on
    bsz = _splits(s, "b", [(int(g),) for g in grids[:, 0]], 2)  # [g, level]
    msz = _splits(s, "m", [(b, lm, int(g)) for b in bm_v for lm in lm_v for g in grids[:, 1]], 4).reshape(
        nb, nlm, ng, 4
    )
    nsz = _splits(s, "n", [(b, ln, int(g)) for b in bn_v for ln in ln_v for g in grids[:, 2]], 4).reshape(
        nn, nln, ng, 4
    )
    ksz = _splits(s, "k", [(b, lk) for b in bk_v for lk in lk_v], 3).reshape(nk_, nlk, 3)

    # mk: dims (base_m, base_k, l1_m, l1_k)
    tm = msz[:, 0, 0, 0][:, None, None, None]
    lm = msz[:, :, 0, 1][:, None, :, None]
    tk_a = ksz[:, 0, 0][None, :, None, None]
    lk_a = ksz[:, :, 1][None, :, None, :]
    mp, kp_a = _ru(tm, hw.fractal_m), _ru(tk_a, s.k0)
    l0a = mp * kp_a * sa
    l1a = lm * mp * lk_a * kp_a * sa
    shape_mk = (nb, nk_, nlm, nlk)
    mk = {
        "u": np.broadcast_to(s.repeats * (mp / hw.fractal_m) * (kp_a / s.k0), shape_mk),
        "a1": np.broadcast_to(l0a / hw.l1_to_l0a_bytes_per_cycle, shape_mk),
        "ach": np.broadcast_to(lm * tm * lk_a * tk_a * sa * s.a_ratio, shape_mk),
        "l1a": np.broadcast_to(l1a.astype(F64), shape_mk),
        "fa": np.broadcast_to((l1a + l0a).astype(F64), shape_mk),
        "l0a": np.broadcast_to(l0a.astype(F64), shape_mk),
        "acc_m": np.broadcast_to((lm * mp * 4).astype(F64), shape_mk),  # fp32/int32 accumulator (pto-tmatmul.txt)
        "rng_m": np.broadcast_to((tm >= 1) & (tm <= lim) & (tk_a >= 1) & (tk_a <= lim), shape_mk),
    }

    # nk: dims (base_k, base_n, l1_k, l1_n)
    tn = nsz[:, 0, 0, 0][None, :, None, None]
    ln = nsz[:, :, 0, 1][None, :, None, :]
    tk_b = ksz[:, 0, 0][:, None, None, None]
    lk_b = ksz[:, :, 1][:, None, :, None]
    np_, kp_b = _ru(tn, hw.fractal_n), _ru(tk_b, s.k0)
    l0b = kp_b * np_ * sb
    l1b = lk_b * kp_b * ln * np_ * sb
    shape_nk = (nk_, nn, nlk, nln)
    nkt = {
        "v": np.broadcast_to(np_ / hw.fractal_n, shape_nk),
        "b1": np.broadcast_to(l0b / hw.l1_to_l0b_bytes_per_cycle, shape_nk),
        "bch": np.broadcast_to(lk_b * tk_b * ln * tn * sb * s.b_ratio, shape_nk),
        "l1b": np.broadcast_to(l1b.astype(F64), shape_nk),
        "fb": np.broadcast_to((l1b + l0b).astype(F64), shape_nk),
        "l0b": np.broadcast_to(l0b.astype(F64), shape_nk),
        "acc_n": np.broadcast_to((ln * np_).astype(F64), shape_nk),
        "rng_n": np.broadcast_to((tn >= 1) & (tn <= lim) & (tk_b >= 1) & (tk_b <= lim), shape_nk),
    }

    # m: dims (base_m, l1_m, core_grid); the batch split of the grid rides along with M
    cb, bb = bsz[:, 0][None, None, :], bsz[:, 1][None, None, :]
    m_blocks = bb * msz[..., 3]
    mt = {
        "blocks_m": m_blocks.astype(F64),
        "tiles_m": (m_blocks * msz[..., 1]).astype(F64),
        "bo_m": (m_blocks * msz[..., 1] * msz[..., 0]).astype(F64),
        "cores_m": (cb * msz[..., 2]).astype(F64),
        "grid_ok": np.broadcast_to(grids.prod(axis=1) <= hw.aic_cores, (nb, nlm, ng)),
    }
    # n: dims (base_n, l1_n, core_grid)
    nt = {
        "bn": nsz[..., 3].astype(F64),
        "tiles_n": (nsz[..., 3] * nsz[..., 1]).astype(F64),
        "bo_n": (nsz[..., 3] * nsz[..., 1] * nsz[..., 0] * so).astype(F64),
        "cores_n": nsz[..., 2].astype(F64),
    }
    # k: dims (base_k, l1_k); d: dim double_buffer
    kt = {
        "nk": ksz[..., 2].astype(F64),
        "lknk": (ksz[..., 1] * ksz[..., 2]).astype(F64),
        "kmulti": (ksz[..., 2] > 1).astype(F64),
    }
    dt = {"h": 1.0 + db_v, "db": db_v}
    tables = [
        Table(dims=(0, 1, 3, 4), fields=mk),
        Table(dims=(1, 2, 4, 5), fields=nkt),
        Table(dims=(0, 3, 7), fields=mt),
        Table(dims=(2, 5, 7), fields=nt),
        Table(dims=(1, 4), fields=kt),
        Table(dims=(6,), fields=dt),
    ]
    if report:
        tables.append(Table(dims=(0,), fields={"tm": msz[:, 0, 0, 0].astype(F64)}))
        tables.append(Table(dims=(1,), fields={"tk": ksz[:, 0, 0].astype(F64)}))
        tables.append(Table(dims=(2,), fields={"tn": nsz[:, 0, 0, 0].astype(F64)}))
        tables.append(Table(dims=(7,), fields={"grid_cores": grids.prod(axis=1).astype(F64)}))
    return tuple(tables)
