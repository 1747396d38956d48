"""The per-parameter tables of the TMATMUL cost model (see param_tables.py for how they are used).

Parameters are numbered in `CUBE_PARAMS` order: 0 base_m, 1 base_k, 2 base_n, 3 l1_m, 4 l1_k,
5 l1_n, 6 double_buffer, 7 core_grid. Each GEMM group is split by `nest_group` once per
distinct combination of the parameters it depends on; every quantity of the cost model that
depends on a few parameters is computed here, once per combination, as float64 (all of them
are integers far below 2**53, so they are exact and any product order gives the same value).
The per-point formulas that combine them are in ascend/cost.py.

Each table spans exactly the parameters its fields depend on, so the grid path (param_tables.py)
computes every term of the model over the fewest dims it needs. Every field is laid out over all
the axes of `CUBE_ORDER` (size 1 on those it does not depend on), so fields broadcast against
each other as they are and a grid over them is in `CUBE_ORDER` too. Tables (dims -> fields):

- (base_m, base_k): ``u = r*(m'/16)*(k'/k0)``, L0A bytes and their MTE1 time, and whether m and k
  are TMATMUL-legal; (base_k, base_n): ``v`` is (base_n) alone; the same for L0B;
- (base_m, base_k, l1_m, l1_k): the A chunk bytes, A's share of L1 and of the footprint;
  (base_k, base_n, l1_k, l1_n): the same for B;
- (base_m, l1_m) and (base_n, l1_n): the accumulator rows ``l1_m*m'*4`` and columns ``l1_n*n'``;
- (base_m, l1_m, core_grid) and (base_n, l1_n, core_grid): blocks, tiles, output bytes and
  cores along M (with the batch split of the grid folded in) and along N, and the N blocks times
  the batch blocks (``bnb``: B's loads when it stays in L1); (core_grid): whether
  the grid fits the AI cores;
- (base_k, l1_k): K chunks; (double_buffer): the ping-pong factor.
"""

from __future__ import annotations

import numpy as np

from costmodels.ascend.grids import side_arrays
from costmodels.ascend.space import CubeSetup
from costmodels.ascend.tiling import level_sizes, round_up
from costmodels.param_tables import Table
from workload import dtypes

F64 = np.float64
#: The axes every field is laid out over, outermost first (positions in `CUBE_PARAMS`): double_buffer
#: (only a few terms depend on it), base_k, l1_k, core_grid, then base_m, l1_m, base_n, l1_n (which most
#: terms share, so numpy's inner loops over a grid run over them).
CUBE_ORDER = (6, 1, 4, 7, 0, 3, 2, 5)
_AXIS = {d: i for i, d in enumerate(CUBE_ORDER)}


def _along(param: int, values: np.ndarray) -> np.ndarray:
    """`values` laid along the axis of `param` (size 1 on every other axis of `CUBE_ORDER`)."""
    shape = [1] * len(CUBE_ORDER)
    shape[_AXIS[param]] = len(values)
    return values.reshape(shape)


def _only(a: np.ndarray, *params: int) -> np.ndarray:
    """`a` cut to the axes of `params` (the first entry on every other axis: `a` does not vary along them)."""
    keep = {_AXIS[p] for p in params}
    return a[tuple(slice(None) if i in keep else slice(0, 1) for i in range(a.ndim))]


def _table(fields: dict[str, np.ndarray], *params: int) -> Table:
    return Table(dims=tuple(sorted(params, key=_AXIS.__getitem__)), fields=fields)


def cube_tables(s: CubeSetup, values: tuple[tuple[object, ...], ...], report: bool = False) -> tuple[Table, ...]:
    """The tables over the distinct `values` of each parameter (in `CUBE_PARAMS` order), laid out in `CUBE_ORDER`.

    Args:
        s: the problem on the preset.
        values: distinct values per parameter (the space's choices, or the values a batch holds).
        report: also build the tables of tile sizes and grid cores that violation messages quote.
    """
    hw = s.hw
    bm_v, bk_v, bn_v, lm_v, lk_v, ln_v = (
        _along(d, np.array([int(x) for x in v], dtype=np.int64))  # type: ignore[call-overload]
        for d, v in enumerate(values[:6])
    )
    db_v = _along(6, np.asarray([bool(x) for x in values[6]]))
    # per side: its count (or cores) per grid, and its per-axis counts (0 where it splits innermost first)
    sides = side_arrays(tuple(str(g) for g in values[7]), tuple(len(s.axes(g)) for g in "bmn"))
    (grid_b, split_b), (grid_m, split_m), (grid_n, split_n) = (
        (_along(7, count), tuple(_along(7, a) for a in per_axis) if per_axis else None) for count, per_axis in sides
    )
    sa, sb, so = (dtypes.info(d).bytes for d in (s.left, s.right, s.out))
    lim = hw.tmatmul_max_dim

    # level sizes (innermost first) of each group, per combination of the counts they depend on, as float64
    bsz = level_sizes(s.axes("b"), (grid_b,), split_b).astype(F64)  # [..., level]
    msz = level_sizes(s.axes("m"), (bm_v, lm_v, grid_m), split_m).astype(F64)
    nsz = level_sizes(s.axes("n"), (bn_v, ln_v, grid_n), split_n).astype(F64)
    ksz = level_sizes(s.axes("k"), (bk_v, lk_v)).astype(F64)

    tm, lm = _only(msz[..., 0], 0), _only(msz[..., 1], 0, 3)  # base_m; base_m, l1_m
    tn, ln = _only(nsz[..., 0], 2), _only(nsz[..., 1], 2, 5)
    tk, lk = _only(ksz[..., 0], 1), ksz[..., 1]
    mp, kp, np_ = round_up(tm, hw.fractal_m), round_up(tk, s.k0), round_up(tn, hw.fractal_n)
    legal_m, legal_k, legal_n = ((x >= 1) & (x <= lim) for x in (tm, tk, tn))

    # (base_m, base_k) and (base_k, base_n): one TMATMUL
    l0a = mp * kp * sa
    l0b = kp * np_ * sb
    mk0 = {
        "u": s.repeats * (mp / hw.fractal_m) * (kp / s.k0),
        "a1": l0a / hw.l1_to_l0a_bytes_per_cycle,
        "l0a": l0a,
        "rng_m": legal_m & legal_k,
    }
    kn0 = {"b1": l0b / hw.l1_to_l0b_bytes_per_cycle, "l0b": l0b, "rng_n": legal_k & legal_n}
    # (base_m, base_k, l1_m, l1_k) and (base_k, base_n, l1_k, l1_n): the L1 chunks
    l1a = lm * mp * lk * kp * sa
    mk = {"ach": lm * tm * lk * tk * sa * s.a_ratio, "l1a": l1a, "fa": l1a + l0a}
    l1b = lk * kp * ln * np_ * sb
    nk = {"bch": lk * tk * ln * tn * sb * s.b_ratio, "l1b": l1b, "fb": l1b + l0b}
    # (base_m, l1_m, core_grid): the batch split of the grid rides along with M
    m_blocks = bsz[..., 1] * msz[..., 3]
    m_tiles = m_blocks * msz[..., 1]
    mt = {"blocks_m": m_blocks, "tiles_m": m_tiles, "bo_m": m_tiles * msz[..., 0], "cores_m": bsz[..., 0] * msz[..., 2]}
    n_tiles = nsz[..., 3] * nsz[..., 1]
    nt = {"bn": nsz[..., 3], "tiles_n": n_tiles, "bo_n": n_tiles * nsz[..., 0] * so, "cores_n": nsz[..., 2]}
    nt["bnb"] = nsz[..., 3] * bsz[..., 1]  # B chunk loads when B stays in L1 across M blocks (cost.py)
    kt = {"nk": ksz[..., 2], "lknk": ksz[..., 1] * ksz[..., 2], "kmulti": (ksz[..., 2] > 1).astype(F64)}
    grid_cores = grid_b * grid_m * grid_n
    tables = [
        _table(mk0, 0, 1),
        _table(kn0, 1, 2),
        _table({"v": np_ / hw.fractal_n}, 2),
        _table(mk, 0, 1, 3, 4),
        _table(nk, 1, 2, 4, 5),
        _table({"acc_m": lm * mp * 4}, 0, 3),  # fp32/int32 accumulator (pto-tmatmul.txt)
        _table({"acc_n": ln * np_}, 2, 5),
        _table(mt, 0, 3, 7),
        _table(nt, 2, 5, 7),
        _table({"grid_ok": grid_cores <= hw.aic_cores}, 7),
        _table(kt, 1, 4),
        _table({"h": 1.0 + db_v, "db": db_v}, 6),
    ]
    if report:
        tables.append(_table({"tm": tm}, 0))
        tables.append(_table({"tk": tk}, 1))
        tables.append(_table({"tn": tn}, 2))
        tables.append(_table({"grid_cores": grid_cores.astype(F64)}, 7))
    return tuple(tables)
