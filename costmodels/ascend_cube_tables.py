"""The per-parameter tables of the TMATMUL cost model (see ascend_batch.py for how they are used).

Parameters are numbered in `CUBE_PARAMS` order: 0 base_m, 1 base_k, 2 base_n, 3 l1_m, 4 l1_k,
5 l1_n, 6 double_buffer, 7 core_grid. Each GEMM group is split by `nest_group` once per
distinct combination of the parameters it depends on; every quantity of the cost model that
depends on a few parameters is computed here, once per combination, as float64 (all of them
are integers far below 2**53, so they are exact and any product order gives the same value).
The per-point formulas that combine them are in ascend_cube_cost.py.

Each table spans exactly the parameters its fields depend on, so the grid path (ascend_batch.py)
computes every term of the model over the fewest dims it needs. Tables (dims -> fields):

- (base_m, base_k): ``u = r*(m'/16)*(k'/k0)``, L0A bytes and their MTE1 time, and whether m and k
  are TMATMUL-legal; (base_k, base_n): ``v`` is (base_n) alone; the same for L0B;
- (base_m, base_k, l1_m, l1_k): the A chunk bytes, A's share of L1 and of the footprint;
  (base_k, base_n, l1_k, l1_n): the same for B;
- (base_m, l1_m) and (base_n, l1_n): the accumulator rows ``l1_m*m'*4`` and columns ``l1_n*n'``;
- (base_m, l1_m, core_grid) and (base_n, l1_n, core_grid): blocks, tiles, output bytes and
  cores along M (with the batch split of the grid folded in) and along N; (core_grid): whether
  the grid fits the AI cores;
- (base_k, l1_k): K chunks; (double_buffer): the ping-pong factor.
"""

from __future__ import annotations

import numpy as np

from costmodels.ascend_batch import Table
from costmodels.ascend_cube import CubeSetup
from costmodels.ascend_tiling import level_sizes, parse_grid, round_up
from workload import dtypes

F64 = np.float64


def cube_tables(s: CubeSetup, values: tuple[tuple[object, ...], ...], report: bool = False) -> tuple[Table, ...]:
    """The tables over the distinct `values` of each parameter (in `CUBE_PARAMS` order).

    Args:
        s: the problem on the preset.
        values: distinct values per parameter (the space's choices, or the values a batch holds).
        report: also build the tables of tile sizes and grid cores that violation messages quote.
    """
    hw = s.hw
    bm_v, bk_v, bn_v, lm_v, lk_v, ln_v = (np.array([int(x) for x in v], dtype=np.int64) for v in values[:6])  # type: ignore[call-overload]
    db_v = np.asarray([bool(x) for x in values[6]])
    grids = np.array([parse_grid(str(g)) for g in values[7]], dtype=np.int64).reshape(-1, 3)
    sa, sb, so = (dtypes.info(d).bytes for d in (s.left, s.right, s.out))
    lim = hw.tmatmul_max_dim

    # level sizes (innermost first) of each group, per combination of the counts they depend on, as float64
    bsz = level_sizes(s.axes("b"), (grids[:, 0],)).astype(F64)  # [g, level]
    msz = level_sizes(s.axes("m"), (bm_v[:, None, None], lm_v[None, :, None], grids[None, None, :, 1])).astype(F64)
    nsz = level_sizes(s.axes("n"), (bn_v[:, None, None], ln_v[None, :, None], grids[None, None, :, 2])).astype(F64)
    ksz = level_sizes(s.axes("k"), (bk_v[:, None], lk_v[None, :])).astype(F64)  # [bk, lk, level]

    tm, lm = msz[:, 0, 0, 0], msz[:, :, 0, 1]  # [bm], [bm, lm]
    tn, ln = nsz[:, 0, 0, 0], nsz[:, :, 0, 1]
    tk, lk = ksz[:, 0, 0], ksz[:, :, 1]
    mp, kp, np_ = round_up(tm, hw.fractal_m), round_up(tk, s.k0), round_up(tn, hw.fractal_n)
    legal_m, legal_k, legal_n = ((x >= 1) & (x <= lim) for x in (tm, tk, tn))

    # (base_m, base_k) and (base_k, base_n): one TMATMUL
    l0a = mp[:, None] * kp[None, :] * sa
    l0b = kp[:, None] * np_[None, :] * sb
    mk0 = {
        "u": s.repeats * (mp[:, None] / hw.fractal_m) * (kp[None, :] / s.k0),
        "a1": l0a / hw.l1_to_l0a_bytes_per_cycle,
        "l0a": l0a,
        "rng_m": legal_m[:, None] & legal_k[None, :],
    }
    kn0 = {"b1": l0b / hw.l1_to_l0b_bytes_per_cycle, "l0b": l0b, "rng_n": legal_k[:, None] & legal_n[None, :]}
    # (base_m, base_k, l1_m, l1_k) and (base_k, base_n, l1_k, l1_n): the L1 chunks
    lm4, tm4, mp4 = lm[:, None, :, None], tm[:, None, None, None], mp[:, None, None, None]
    lka, tka, kpa = lk[None, :, None, :], tk[None, :, None, None], kp[None, :, None, None]
    l1a = lm4 * mp4 * lka * kpa * sa
    mk = {"ach": lm4 * tm4 * lka * tka * sa * s.a_ratio, "l1a": l1a, "fa": l1a + l0a[:, :, None, None]}
    ln4, tn4, np4 = ln[None, :, None, :], tn[None, :, None, None], np_[None, :, None, None]
    lkb, tkb, kpb = lk[:, None, :, None], tk[:, None, None, None], kp[:, None, None, None]
    l1b = lkb * kpb * ln4 * np4 * sb
    nk = {"bch": lkb * tkb * ln4 * tn4 * sb * s.b_ratio, "l1b": l1b, "fb": l1b + l0b[:, :, None, None]}
    # (base_m, l1_m, core_grid): the batch split of the grid rides along with M
    m_blocks = bsz[:, 1] * msz[..., 3]
    m_tiles = m_blocks * msz[..., 1]
    mt = {"blocks_m": m_blocks, "tiles_m": m_tiles, "bo_m": m_tiles * msz[..., 0], "cores_m": bsz[:, 0] * msz[..., 2]}
    n_tiles = nsz[..., 3] * nsz[..., 1]
    nt = {"bn": nsz[..., 3], "tiles_n": n_tiles, "bo_n": n_tiles * nsz[..., 0] * so, "cores_n": nsz[..., 2]}
    kt = {"nk": ksz[..., 2], "lknk": ksz[..., 1] * ksz[..., 2], "kmulti": (ksz[..., 2] > 1).astype(F64)}
    grid_cores = grids.prod(axis=1)
    tables = [
        Table(dims=(0, 1), fields=mk0),
        Table(dims=(1, 2), fields=kn0),
        Table(dims=(2,), fields={"v": np_ / hw.fractal_n}),
        Table(dims=(0, 1, 3, 4), fields=mk),
        Table(dims=(1, 2, 4, 5), fields=nk),
        Table(dims=(0, 3), fields={"acc_m": lm * mp[:, None] * 4}),  # fp32/int32 accumulator (pto-tmatmul.txt)
        Table(dims=(2, 5), fields={"acc_n": ln * np_[:, None]}),
        Table(dims=(0, 3, 7), fields=mt),
        Table(dims=(2, 5, 7), fields=nt),
        Table(dims=(7,), fields={"grid_ok": grid_cores <= hw.aic_cores}),
        Table(dims=(1, 4), fields=kt),
        Table(dims=(6,), fields={"h": 1.0 + db_v, "db": db_v}),
    ]
    if report:
        tables.append(Table(dims=(0,), fields={"tm": tm}))
        tables.append(Table(dims=(1,), fields={"tk": tk}))
        tables.append(Table(dims=(2,), fields={"tn": tn}))
        tables.append(Table(dims=(7,), fields={"grid_cores": grid_cores.astype(F64)}))
    return tuple(tables)
