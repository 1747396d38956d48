"""Cheap admissible floors of the Ascend cube structures, every structure in one numpy pass (issue #12).

`cube_structure_bound` (ascend/bounds.py) bounds a structure by its exact optimum: the whole box
of the structure priced, about 7 ms per structure of a Llama prefill GEMM, 1.5-2 s for the 234
structures of one. Best-first search (`mapper.strategies.bestfirst`) needs that exact bound only
for the structures it cannot rule out more cheaply: it orders them by these floors and asks for a
structure's exact bound only when its floor is the lowest key left (`mapper.bounds.StructureFloored`).

**The floor.** Let the structural parameters be fixed and ``x`` any point of the structure. Every
quantity below is a field of the cube tables (cube_tables.py, over the space's choices), all
non-negative. The model (ascend/cost.py, hardware-facts.md §3.2 steps 3-6) prices a core with

- ``cube = tiles_m * lknk * tiles_n * (head + u * v)`` (``tiles = tiles_m * lknk * tiles_n``),
- ``mte1 = tiles_m * lknk * tiles_n * (a1 + b1)``,
- ``mte2 = gm_core / mte2_rate`` with ``gm_core = min(a_res, b_res)``,
  ``a_res = max(refetch, blocks_m) * ach + steps * bch`` and ``b_res = steps * ach + max(refetch, bnb) * bch``,
  ``steps = blocks_m * bn * nk``, ``bnb = bn * (batch blocks)`` and ``blocks_m = (batch blocks) * (M blocks)``,
- ``fix = bo_m * bo_n / fix_rate``,

then ``core = serial = mte2 + mte1 + cube + fix`` without double buffering, and with it ``core =
doubled >= max(pipe, fix)`` (``doubled`` is ``pipe + fix`` or ``min(max(pipe, fix) + fix / blocks,
pipe + fix)``, each at least ``pipe`` and at least ``fix``) with ``pipe = top + (three - top) /
steps >= top = max(mte2, mte1, cube)`` (``three >= top``, ``steps >= 1``); the latency is ``max(core,
hbm) / clock`` with ``hbm = offchip / hbm_rate >= min_bytes / hbm_rate`` (`cost._offchip`).

For non-negative ``f`` and ``g``, ``min_x f(x) g(x) >= min f * min g`` and ``min (f + g) >= min f +
min g``. Each ``min`` below is over the choices of the parameters the term depends on that the
structure does not fix (``low``), so each bounds the term at every point of the structure:

- ``cube >= low(tiles_m * lknk * u) * low(tiles_n * v) + head * low(tiles_m * lknk) * low(tiles_n)``;
- ``mte1 >= low(tiles_m * lknk * a1) * low(tiles_n) + low(tiles_m) * low(lknk * tiles_n * b1)``;
- ``gm_core >= min(X_a, X_b)`` with ``X_a = blocks_m * nk * ach + steps * bch`` and ``X_b = steps * ach +
  bnb * nk * bch``: ``max(refetch, blocks_m) >= blocks_m * nk`` (``refetch = steps >= blocks_m * nk`` when
  ``nk > 1``, else ``nk = 1``) gives ``a_res >= X_a``, and ``max(refetch, bnb) >= bnb * nk`` (``steps >=
  bnb * nk`` as ``blocks_m >= batch blocks``, all integers >= 1) gives ``b_res >= X_b``; with ``steps =
  blocks_m * bn * nk``, ``gm_core >= gm = min(low(blocks_m * nk * ach) + low(blocks_m) * low(bn * nk * bch),
  low(blocks_m * nk * ach) * low(bn) + low(bnb * nk * bch))`` and ``mte2 >= gm / mte2_rate``;
- ``fix >= out / fix_rate`` with ``out = low(bo_m) * low(bo_n) <= out_bytes``;
- ``hbm >= min_bytes / hbm_rate``, and with the inputs in HBM (not L2-resident) ``offchip = max(min_bytes,
  cores_m * cores_n * (gm_core + out_bytes)) >= max(min_bytes, low(cores_m) * low(cores_n) * (gm + out))``.

A feasible point passes the checks of `cost.cube_checks`, so the terms of ``u`` and ``a1`` are taken
only over the (base_m, base_k) choices with ``rng_m`` and ``l0a * h <= L0A``, and those of ``v`` and
``b1`` over the (base_k, base_n) choices with ``rng_n`` and ``l0b * h <= L0B`` (``h`` of double
buffering); ``inf`` where none passes (then the structure has no feasible point and its exact
bound is ``inf`` too). The floor is ``max(F, hbm floor) / clock`` with ``F`` the sum of
the four term floors (double buffering off) or their maximum (on); a structure that does not fix
double buffering takes the lower of the two. It is finally scaled by ``1 - FLOOR_SLACK``: the
products of minima are rounded differently from the model's products, and the floor must not
exceed the exact bound by a rounding (best-first's visit order relies on floor <= exact bound).
`tests/costmodels/test_structure_bounds.py` checks floor <= exact bound on many structures of
random problems.
"""

from __future__ import annotations

import functools

import numpy as np

from costmodels.ascend.cube_tables import CUBE_ORDER
from costmodels.ascend.scoring import Prepared

#: relative margin that keeps a floor below the exact bound despite rounding (far below `mapper.bounds.RTOL`)
FLOOR_SLACK = 1e-12
_DB = CUBE_ORDER.index(6)  # the double_buffer axis of the tables' layout


def cube_structure_floors(prep: Prepared, names: tuple[str, ...]) -> np.ndarray:
    """An admissible floor (seconds) of every structure of the `names` parameters, in their choices' C order.

    Raises:
        ValueError: a name is not a parameter of the space.
    """
    order = [p.name for p in prep.space.params]
    unknown = sorted(set(names) - set(order))
    if unknown:
        raise ValueError(f"no parameter {unknown[0]!r} in this space: its parameters are {sorted(order)}")
    keep = {CUBE_ORDER.index(order.index(n)) for n in names}
    drop = tuple(i for i in range(len(CUBE_ORDER)) if i not in keep)

    def low(*factors: np.ndarray) -> np.ndarray:
        """The minimum of the factors' product over the parameters the structures leave free (kept axes stay,
        size 1 elsewhere). Each factor is first reduced over the free axes no other factor spans: the factors
        are positive, so ``min_x a(x, y) b(y) = b(y) min_x a(x, y)`` and the product spans fewer cells."""
        solo = [
            tuple(ax for ax in drop if a.shape[ax] > 1 and all(b.shape[ax] == 1 for b in factors if b is not a))
            for a in factors
        ]
        prod = functools.reduce(
            np.multiply, [a.min(axis=s, keepdims=True) if s else a for a, s in zip(factors, solo, strict=True)]
        )
        return np.asarray(prod).min(axis=drop, keepdims=True)

    f = {k: v for t in prep.tables for k, v in t.fields.items()}
    c = prep.consts
    inf = np.inf
    ok_a = f["rng_m"] & (f["l0a"] * f["h"] <= c.l0a)  # (double_buffer, base_k, base_m)
    ok_b = f["rng_n"] & (f["l0b"] * f["h"] <= c.l0b)  # (double_buffer, base_k, base_n)
    u, a1 = np.where(ok_a, f["u"], inf), np.where(ok_a, f["a1"], inf)
    v, b1 = np.where(ok_b, f["v"], inf), np.where(ok_b, f["b1"], inf)
    tm, lknk, tn = f["tiles_m"], f["lknk"], f["tiles_n"]
    cube = low(tm, lknk, u) * low(tn, v) + c.head * low(tm, lknk) * low(tn)
    mte1 = low(tm, lknk, a1) * low(tn) + low(tm) * low(lknk, tn, b1)
    a_all = low(f["blocks_m"], f["nk"], f["ach"])  # A's bytes of every M block, every K chunk
    a_res = a_all + low(f["blocks_m"]) * low(f["bn"], f["nk"], f["bch"])
    b_res = a_all * low(f["bn"]) + low(f["bnb"], f["nk"], f["bch"])
    gm = np.minimum(a_res, b_res)
    mte2 = gm / c.mte2_rate
    out = low(f["bo_m"]) * low(f["bo_n"])
    fix = out / c.fix_rate
    hbm = c.min_bytes / c.hbm_rate
    if not c.l2_resident:
        hbm = np.maximum(c.min_bytes, low(f["cores_m"]) * low(f["cores_n"]) * (gm + out)) / c.hbm_rate
    top = np.maximum(np.maximum(cube, mte1), np.maximum(mte2, fix))
    core = np.where(f["db"], top, cube + mte1 + mte2 + fix)  # double buffering's axis: both choices
    floors = np.maximum(core, hbm) / c.clock_hz * (1 - FLOOR_SLACK)
    if _DB not in keep:  # hbm may still span double buffering's axis
        floors = floors.min(axis=_DB, keepdims=True)
    shape = [len(prep.space.params[order.index(n)].choices) if i in keep else 1 for i, n in _axis_names(order)]
    floors = np.broadcast_to(floors, shape)
    axes = [CUBE_ORDER.index(order.index(n)) for n in names]
    return np.array(floors.transpose(*axes, *drop).reshape(tuple(shape[a] for a in axes)), order="C")


def _axis_names(order: list[str]) -> list[tuple[int, str]]:
    """(axis of the tables' layout, parameter name) for every axis of `CUBE_ORDER`."""
    return [(i, order[d]) for i, d in enumerate(CUBE_ORDER)]
