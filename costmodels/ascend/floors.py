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
doubled``: ``pipe + fix`` where two accumulators do not fit L0C (``2 acc > L0C``: FIX cannot overlap),
else ``min(max(pipe, fix) + fix / blocks, pipe + fix) = max(pipe, fix) + min(fix / blocks, pipe, fix)``
(each term grows with ``pipe`` and ``fix`` and falls with ``blocks``, so floors of ``pipe`` and ``fix`` and
``high(blocks_m) * high(bn)`` for ``blocks`` floor it), with ``pipe = top + (three -
top) / steps``, ``top = max(mte2, mte1, cube)`` and ``three = mte2 + mte1 + cube >= top``. ``pipe``
falls as ``steps`` grows, so with ``S >= steps`` (``S = high(blocks_m) * high(bn) * high(nk)``, each
factor's maximum over the free choices) ``pipe >= top (1 - 1/S) + three / S``, and each of ``top`` and
``three`` may be replaced by a floor (both coefficients are non-negative): ``top`` by the largest of
the three pipes' floors, ``three`` by their sum. The overlap case is taken where ``2 low(acc) <= L0C``
(some point may overlap), the other where no point can. The latency is ``max(core, hbm) / clock``
with ``hbm = offchip / hbm_rate >= min_bytes / hbm_rate`` (`cost._offchip`).

For non-negative ``f`` and ``g``, ``min_x f(x) g(x) >= min f * min g`` and ``min (f + g) >= min f +
min g``. Each ``min`` below is over the choices of the parameters the term depends on that the
structure does not fix (``low``), so each bounds the term at every point of the structure; likewise
``max_x f(x) g(x) <= max f * max g`` (``high``, used above for the steps):

- ``cube >= low(tiles_m * lknk * u) * low(tiles_n * v) + head * low(tiles_m * lknk) * low(tiles_n)``;
- ``mte1 >= low(tiles_m * lknk * a1) * low(tiles_n) + low(tiles_m) * low(lknk * tiles_n * b1)``;
- ``gm_core >= min(X_a, X_b)``, the two block orders (``steps = blocks_m * bn * nk``). With one K chunk
  (``nk = 1``, ``refetch = 0``) ``a_res = blocks_m * ach + steps * bch`` and ``b_res = steps * ach + bnb *
  bch``; with several (``refetch = steps``, at least ``blocks_m`` and ``bnb``) every chunk moves every step,
  ``a_res = b_res = steps * (ach + bch)``. So ``X_a = min(low(blocks_m * ach | nk = 1), low(blocks_m * nk *
  ach | nk > 1) * low(bn)) + low(blocks_m) * low(bn * nk * bch)`` and ``X_b = low(blocks_m * nk * ach) *
  low(bn) + min(low(bnb * bch | nk = 1), low(blocks_m) * low(bn * nk * bch | nk > 1))`` (``| nk = 1``: the
  minimum over the K choices with one chunk only), and ``mte2 >= gm / mte2_rate`` with ``gm = min(X_a,
  X_b)``;
- ``fix >= out / fix_rate`` with ``out = low(bo_m) * low(bo_n) <= out_bytes``;
- ``hbm >= min_bytes / hbm_rate``, and with the inputs in HBM (not L2-resident) ``offchip = max(min_bytes,
  cores_m * cores_n * (gm_core + out_bytes))``, floored by the same ``X_a``, ``X_b`` with ``cores_m`` in
  every factor of the M side and ``cores_n`` in every factor of the N side (``gm_all``), plus
  ``low(cores_m * bo_m) * low(cores_n * bo_n)``.

A feasible point passes the checks of `cost.cube_checks`, so the terms of ``u`` and ``a1`` are taken
only over the (base_m, base_k) choices with ``rng_m`` and ``l0a * h <= L0A``, and those of ``v`` and
``b1`` over the (base_k, base_n) choices with ``rng_n`` and ``l0b * h <= L0B`` (``h`` of double
buffering); ``inf`` where none passes (then the structure has no feasible point and its exact
bound is ``inf`` too). The GM terms take an M side's blocks and A chunks only where that side passes
alone what a feasible point needs: L0A as above, its A chunk beside the least B chunk of the same K
choice in L1 (``(l1a + least l1b) * h <= L1``), its accumulator rows beside the narrowest columns in
L0C; the N side likewise. The floor is ``max(F, hbm floor) / clock`` with ``F`` the sum of
the four term floors (double buffering off) or the ``doubled`` floor above (on); a structure that does not fix
double buffering takes the lower of the two. It is finally scaled by ``1 - FLOOR_SLACK``: the
products of minima are rounded differently from the model's products, and the floor must not
exceed the exact bound by a rounding (best-first's visit order relies on floor <= exact bound).
`tests/costmodels/test_structure_bounds.py` checks floor <= exact bound on many structures of
random problems.

**Feasibility.** A structure none of whose points passes every check of `cost.cube_checks` gets
``inf`` (`_feasible`, exact): the checks other than the grid's (TMATMUL ranges, L0A, L0B, L0C and
L1 holding both chunks) span only the tile, L1 and double-buffering axes, so they are evaluated
jointly over the product of those axes (one boolean per combination, 60,840 on Llama-7B prefill
attn.scores) and reduced over the free ones; the grid's check spans the grid alone. Cells with a floor
but no feasible point were 95% of the cells a Llama-7B attn.scores latency + energy front left open
on ascend-910b (counted once by hand outside `bench/`, 1,500 sampled).
"""

from __future__ import annotations

import functools

import numpy as np

from costmodels.ascend.cube_tables import CUBE_ORDER
from costmodels.ascend.scoring import Prepared

#: the axes of the tables' layout of base_k and l1_k, base_m and l1_m, base_n and l1_n
_K, _M, _N = ((CUBE_ORDER.index(a), CUBE_ORDER.index(b)) for a, b in ((1, 4), (0, 3), (2, 5)))
#: the objectives `cube_structure_front_floors` floors
FRONT_FLOORED = frozenset({"latency", "offchip_bytes", "energy", "footprint"})
#: relative margin that keeps a floor below the exact bound despite rounding (far below `mapper.bounds.RTOL`)
FLOOR_SLACK = 1e-12


class FloorGrid:
    """The cube tables' fields seen from the structures of the `names` parameters.

    `low` takes a product's minimum over the parameters the structures leave free, and `laid_out`
    turns a floor over the tables' axes into one entry per structure (the names' choices in C order).

    Raises:
        ValueError: a name is not a parameter of the space.
    """

    def __init__(self, prep: Prepared, names: tuple[str, ...]) -> None:
        order = [p.name for p in prep.space.params]
        unknown = sorted(set(names) - set(order))
        if unknown:
            raise ValueError(f"no parameter {unknown[0]!r} in this space: its parameters are {sorted(order)}")
        self.keep = {CUBE_ORDER.index(order.index(n)) for n in names}
        self.drop = tuple(i for i in range(len(CUBE_ORDER)) if i not in self.keep)
        self.shape = [
            len(prep.space.params[order.index(n)].choices) if i in self.keep else 1 for i, n in _axis_names(order)
        ]
        self.axes = [CUBE_ORDER.index(order.index(n)) for n in names]
        self.f = {k: v for t in prep.tables for k, v in t.fields.items()}
        self.c = prep.consts

    def low(self, *factors: np.ndarray) -> np.ndarray:
        """The minimum of the factors' product over the parameters the structures leave free (kept axes stay,
        size 1 elsewhere). Each factor is first reduced over the free axes no other factor spans: the factors
        are non-negative, so ``min_x a(x, y) b(y) = b(y) min_x a(x, y)`` and the product spans fewer cells."""
        drop = self.drop
        solo = [
            tuple(ax for ax in drop if a.shape[ax] > 1 and all(b.shape[ax] == 1 for b in factors if b is not a))
            for a in factors
        ]
        prod = functools.reduce(
            np.multiply, [a.min(axis=s, keepdims=True) if s else a for a, s in zip(factors, solo, strict=True)]
        )
        return np.asarray(prod).min(axis=drop, keepdims=True)

    def high(self, *factors: np.ndarray) -> np.ndarray:
        """At least the maximum of the factors' product over the parameters the structures leave free: the product
        of each factor's maximum over its free axes (non-negative factors), then the maximum over the free axes."""
        drop = self.drop
        maxima = [a.max(axis=tuple(ax for ax in drop if a.shape[ax] > 1), keepdims=True) for a in factors]
        return np.asarray(functools.reduce(np.multiply, maxima)).max(axis=drop, keepdims=True)

    def laid_out(self, floor: np.ndarray) -> np.ndarray:
        """`floor` (over the tables' axes) as one entry per structure: the least over the free axes it still
        spans, in the names' C order."""
        spans = tuple(ax for ax in self.drop if np.shape(floor)[ax] > 1)
        if spans:
            floor = np.min(floor, axis=spans, keepdims=True)
        full = np.broadcast_to(floor, self.shape)
        drop = [i for i in range(len(CUBE_ORDER)) if i not in self.axes]
        return np.array(full.transpose(*self.axes, *drop).reshape(tuple(self.shape[a] for a in self.axes)), order="C")


def _terms(g: FloorGrid) -> dict[str, np.ndarray]:
    """Per-core floors of the model's terms (the module's docstring) over the tables' axes, the free ones
    reduced: the pipes' cycles (``cube``, ``mte1``, ``mte2``, ``fix``), GM bytes (``gm``), output bytes
    (``out``) and the off-chip bytes of all cores (``offchip``)."""
    f, c, low = g.f, g.c, g.low
    inf = np.inf
    ok_a = f["rng_m"] & (f["l0a"] * f["h"] <= c.l0a)  # (double_buffer, base_k, base_m)
    ok_b = f["rng_n"] & (f["l0b"] * f["h"] <= c.l0b)  # (double_buffer, base_k, base_n)
    u, a1 = np.where(ok_a, f["u"], inf), np.where(ok_a, f["a1"], inf)
    v, b1 = np.where(ok_b, f["v"], inf), np.where(ok_b, f["b1"], inf)
    tm, lknk, tn = f["tiles_m"], f["lknk"], f["tiles_n"]
    # GM bytes: each side's blocks and chunks only where that side can be feasible (its tiles in L0A/L0B, its
    # chunk alone in L1, its accumulators in L0C beside the narrowest other side's)
    h, l1a, l1b = f["h"], f["l1a"], f["l1b"]
    fit_a = ok_a & (l1a * h <= c.l1) & (f["acc_m"] * np.min(f["acc_n"]) <= c.l0c)
    fit_b = ok_b & (l1b * h <= c.l1) & (f["acc_n"] * np.min(f["acc_m"]) <= c.l0c)
    # L1 holds both chunks: each beside the least chunk the other side can have with the same K chunk
    least_a = np.min(np.where(fit_a, l1a, inf), axis=_M, keepdims=True)
    least_b = np.min(np.where(fit_b, l1b, inf), axis=_N, keepdims=True)
    fit_a, fit_b = fit_a & ((l1a + least_b) * h <= c.l1), fit_b & ((l1b + least_a) * h <= c.l1)
    side_a, side_b = fit_a.any(axis=_K, keepdims=True), fit_b.any(axis=_K, keepdims=True)
    ach, bch = np.where(fit_a, f["ach"], inf), np.where(fit_b, f["bch"], inf)
    blocks_m, bn, bnb = np.where(side_a, f["blocks_m"], inf), np.where(side_b, f["bn"], inf), f["bnb"]
    bnb = np.where(side_b, bnb, inf)
    # one K chunk (nk = 1): the resident operand's chunks once per block; several: every chunk every step.
    # Each side's chunk bytes times the K chunk count form one factor, so `low` takes K's minimum first.
    one, nk = f["kmulti"] == 0, f["nk"]
    a_k, a_k1, a_km = nk * ach, np.where(one, ach, inf), np.where(one, inf, nk * ach)
    b_k, b_k1, b_km = nk * bch, np.where(one, bch, inf), np.where(one, inf, nk * bch)

    def gm_floor(cm: np.ndarray, cn: np.ndarray) -> np.ndarray:
        """GM bytes of `cm` x `cn` cores (1 x 1: one core), the better block order's."""
        mb, nb = cm * blocks_m, cn * bn  # each side's blocks on all its cores
        a_steps = low(mb, a_k) * low(nb)  # A's chunks every step
        a_res = np.minimum(low(mb, a_k1) * low(cn), low(mb, a_km) * low(nb)) + low(mb) * low(nb, b_k)
        b_res = a_steps + np.minimum(low(cm) * low(cn * bnb, b_k1), low(mb) * low(nb, b_km))
        return np.minimum(a_res, b_res)

    one_core = np.ones((1,) * len(CUBE_ORDER))
    gm = gm_floor(one_core, one_core)
    out = low(f["bo_m"]) * low(f["bo_n"])
    cm, cn = f["cores_m"], f["cores_n"]
    gm_all = gm_floor(cm, cn)  # each side's core count taken with the blocks along that side
    offchip = np.full((1,) * len(CUBE_ORDER), c.min_bytes)
    if not c.l2_resident:
        offchip = np.maximum(c.min_bytes, gm_all + low(cm, f["bo_m"]) * low(cn, f["bo_n"]))
    return {
        "cube": low(tm, lknk, u) * low(tn, v) + c.head * low(tm, lknk) * low(tn),
        "mte1": low(tm, lknk, a1) * low(tn) + low(tm) * low(lknk, tn, b1),
        "mte2": gm / c.mte2_rate,
        "fix": out / c.fix_rate,
        "gm": gm,
        "gm_all": gm_all,
        "offchip": offchip,
        "ok_a": ok_a,
        "ok_b": ok_b,
        "steps_high": g.high(f["blocks_m"], f["bn"], f["nk"]),
        "blocks_high": g.high(f["blocks_m"], f["bn"]),
        "overlap": 2 * low(f["acc_m"], f["acc_n"]) <= c.l0c,
        "feasible": _feasible(g),
    }


def _gm_all_joint(g: FloorGrid) -> np.ndarray:
    """GM bytes of all cores, floored with each chunk's bytes taken jointly with the blocks over the points that
    pass every check but the grid's (`_joint_ok`): one K chunk with A resident (A's chunks once per M block,
    B's every step) or B resident (A's every step, B's once per N block and batch block), or several K
    chunks (every chunk every step). Each term is ``low`` of the blocks beside the chunk bytes, the chunk
    bytes reduced over the K choices first (they are the only factor along them). Tighter than the
    ``gm_all`` of `_terms`, whose chunk floors hold beside any choice of the other side's; costlier (the
    product of the M and N sides' axes and the grid's), so taken for energy only."""
    f, low, inf = g.f, g.low, np.inf
    joint, one, nk = _joint_ok(g), f["kmulti"] == 0, f["nk"]
    a_1, b_1 = np.where(joint & one, f["ach"], inf), np.where(joint & one, f["bch"], inf)
    several = np.where(joint & ~one, nk * (f["ach"] + f["bch"]), inf)
    cm, cn = f["cores_m"], f["cores_n"]
    mb, nb = cm * f["blocks_m"], cn * f["bn"]
    a_resident = low(mb, a_1) * low(cn) + low(mb, nb, b_1)
    b_resident = low(mb, nb, a_1) + low(cm) * low(cn * f["bnb"], b_1)
    return np.minimum(np.minimum(a_resident, b_resident), low(mb, nb, several))


def _joint_ok(g: FloorGrid) -> np.ndarray:
    """The checks of `cost.cube_checks` but the grid's, over the product of the tile, L1 and double-buffering
    axes (one boolean per combination: they span no other axis)."""
    f, c = g.f, g.c
    h = f["h"]
    ok = f["rng_m"] & f["rng_n"] & (f["l0a"] * h <= c.l0a) & (f["l0b"] * h <= c.l0b)
    return np.asarray(ok & (f["acc_m"] * f["acc_n"] <= c.l0c) & ((f["l1a"] + f["l1b"]) * h <= c.l1))


def _feasible(g: FloorGrid) -> np.ndarray:
    """Whether some choice of the free parameters passes every check of `cost.cube_checks`, over the tables'
    axes with the free ones reduced: the checks but the grid's jointly (`_joint_ok`), the grid's alone (it
    spans no other axis, so a passing combination and a passing grid make a feasible point together)."""

    def some(a: np.ndarray) -> np.ndarray:
        return np.any(a, axis=tuple(ax for ax in g.drop if a.shape[ax] > 1), keepdims=True)

    return some(_joint_ok(g)) & some(g.f["grid_ok"])


def _latency(g: FloorGrid, t: dict[str, np.ndarray]) -> np.ndarray:
    """Seconds, over the tables' axes: the pipes summed (double buffering off) or pipelined over at most
    ``steps_high`` steps, FIX beside or after them (on: the module's docstring), at least the HBM time, less
    `FLOOR_SLACK`."""
    cube, mte1, mte2, fix = t["cube"], t["mte1"], t["mte2"], t["fix"]
    top = np.maximum(np.maximum(cube, mte1), mte2)
    with np.errstate(invalid="ignore"):  # inf - inf where a structure has no feasible tile: inf below
        pipe = np.where(np.isfinite(top), top + (cube + mte1 + mte2 - top) / t["steps_high"], np.inf)
    # FIX overlaps the next block only where two accumulators fit L0C (cost._core): else it follows the pipe
    # overlapping: min(max(pipe, fix) + fix / blocks, pipe + fix) = max(pipe, fix) + min(fix / blocks, pipe, fix)
    with np.errstate(invalid="ignore"):  # (inf / inf where a structure has no feasible tile: inf by `feasible`)
        tail = np.minimum(np.minimum(fix / t["blocks_high"], pipe), fix)
    doubled = np.where(t["overlap"], np.maximum(pipe, fix) + tail, pipe + fix)
    core = np.where(g.f["db"], doubled, cube + mte1 + mte2 + fix)  # double buffering's axis: both choices
    seconds = np.maximum(core, t["offchip"] / g.c.hbm_rate) / g.c.clock_hz * (1 - FLOOR_SLACK)
    return np.where(t["feasible"], seconds, np.inf)


def cube_structure_floors(prep: Prepared, names: tuple[str, ...]) -> np.ndarray:
    """An admissible floor (seconds) of every structure of the `names` parameters, in their choices' C order.

    Raises:
        ValueError: a name is not a parameter of the space.
    """
    g = FloorGrid(prep, names)
    return g.laid_out(_latency(g, _terms(g)))


def cube_structure_front_floors(prep: Prepared, names: tuple[str, ...], objectives: tuple[str, ...]) -> np.ndarray:
    """An admissible floor of each of `objectives` for every structure of `names` (structures x objectives).

    Every feasible point of a structure is no better than its row on every objective, by the rules of
    the module's docstring applied to each objective's formula (ascend/cost.py, ascend/energy.py):

    - ``latency``: `cube_structure_floors`;
    - ``offchip_bytes``: ``max(min_bytes, cores x (gm_core + out))``, or ``min_bytes`` with the inputs in
      L2, floored as in the latency's HBM term;
    - ``energy``: the MACs' energy plus each level's pJ per byte times a floor of its bytes (all of them
      non-negative, so the sum of floors is a floor): HBM the off-chip floor; GM and L1 ``cores x
      gm_core``, the larger of two floors of it: ``gm_all`` (`_terms`, each side's blocks with its core
      count) and `_gm_all_joint` (each chunk's bytes jointly with the blocks over the points that pass
      every check); L0A ``cores x tiles x l0a >= low(cores_m * tiles_m
      * lknk * l0a) * low(cores_n * tiles_n)``, L0B the same with the N side; L0C ``cores x blocks x
      acc_m x acc_n >= low(cores_m * blocks_m * acc_m) * low(cores_n * bn * acc_n)``;
    - ``footprint``: ``(fa + fb) x h + acc_m x acc_n >= low(fa x h) + low(fb x h) + low(acc)``.

    L0A/L0B terms are taken only over the tiles that fit their buffer (`_terms`), the A and B chunks only
    where they fit L1 alone, the accumulators only where they fit L0C: a feasible point passes those
    checks (`cost.cube_checks`), so leaving out the others keeps the floor admissible. A structure with no
    such choice, or no point passing every check (`_feasible`), gets ``inf``.
    `tests/costmodels/ascend/test_ascend_front_floors.py` checks every row against the structure's feasible
    points on random problems.

    Raises:
        ValueError: a name is not a parameter of the space, or an objective is not priced here.
    """
    unknown = sorted(set(objectives) - FRONT_FLOORED)
    if unknown:
        raise ValueError(f"no floor of {unknown[0]!r}: the cube floors {', '.join(sorted(FRONT_FLOORED))}")
    g = FloorGrid(prep, names)
    f, c, low, inf = g.f, g.c, g.low, np.inf
    t = _terms(g)
    cm, cn = f["cores_m"], f["cores_n"]
    cols: dict[str, np.ndarray] = {}
    if "latency" in objectives:
        cols["latency"] = _latency(g, t)
    if "offchip_bytes" in objectives:
        cols["offchip_bytes"] = t["offchip"]
    if "energy" in objectives:
        on_chip = np.maximum(t["gm_all"], _gm_all_joint(g))
        l0a, l0b = np.where(t["ok_a"], f["l0a"], inf), np.where(t["ok_b"], f["l0b"], inf)
        levels = {
            "hbm": t["offchip"],
            "gm": on_chip,
            "l1": on_chip,
            "l0a": low(cm, f["tiles_m"], f["lknk"], l0a) * low(cn, f["tiles_n"]),
            "l0b": low(cm, f["tiles_m"]) * low(cn, f["tiles_n"], f["lknk"], l0b),
            "l0c": low(cm, f["blocks_m"], f["acc_m"]) * low(cn, f["bn"], f["acc_n"]),
        }
        cols["energy"] = np.asarray(prep.energy.total(levels), dtype=np.float64)
    if "footprint" in objectives:
        h = f["h"]
        fa = np.where(t["ok_a"] & (f["l1a"] * h <= c.l1), f["fa"], inf)
        fb = np.where(t["ok_b"] & (f["l1b"] * h <= c.l1), f["fb"], inf)
        acc = f["acc_m"] * f["acc_n"]
        cols["footprint"] = low(fa, h) + low(fb, h) + low(np.where(acc <= c.l0c, acc, inf))
    feasible = t["feasible"]
    return np.stack([g.laid_out(np.where(feasible, cols[o], np.inf)).reshape(-1) for o in objectives], axis=1)


def _axis_names(order: list[str]) -> list[tuple[int, str]]:
    """(axis of the tables' layout, parameter name) for every axis of `CUBE_ORDER`."""
    return [(i, order[d]) for i, d in enumerate(CUBE_ORDER)]
