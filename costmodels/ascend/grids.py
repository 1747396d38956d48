"""Core grids of the Ascend cube space: every split of the AI cores over the batch, M and N groups.

A grid ``BxMxN`` sends the output blocks of a GEMM view over ``B * M * N`` AI cores: ``B`` along the
batch axes, ``M`` along the M axes (the L1 blocks of rows), ``N`` along the N axes (of columns).
hardware-facts.md §3.2 step 6 distributes "(M/baseM)x(N/baseN) output blocks over the 24 AIC (36 on
950PR_9599)" and prices ``T = max_core T_core``; a side that does not divide its blocks pads the
last cores' share (`tiling.nest_group`: every core is priced with ``ceil(blocks / side)`` blocks,
the busiest core's). Legal grids are all those with ``B * M * N <= aic_cores``
(`costmodels.ascend.cost.cube_checks`, ``core-count``), in both orientations (``1x4x6`` and
``1x6x4``), and using fewer cores than all of them: with the inputs in HBM, fewer cores move fewer
bytes and can be faster (tests/costmodels/ascend/test_ascend_grids.py).

Not offered: a split of K over cores. TMATMUL accumulates only into its own L0C tile
(pto-tmatmul.txt, Constraints: ``TileRes::Loc == Acc``), the recipe distributes output blocks only
(hardware-facts.md §3.2 step 6), and no reference here documents how partial accumulators of
several cores would be summed (an atomic FIX write or a vector-core pass), so a split-K could not
be priced from the references.

**Core splits within a group.** A group of several axes (a conv's ``M = n*oh*ow``, several batch
axes) can take its side's cores on any of its axes: a side is then written per axis, outermost
first (``1x1*2*3x4``: 2 cores along ``oh``, 3 along ``ow``, `tiling.parse_grid`), and axis ``i``
gets ``min(c_i, rem_i)`` cores and ``ceil(rem_i / c_i)`` blocks each (`tiling.nest_group` with
``split``; padded where ``c_i`` does not divide ``rem_i``). The legal sides of such a group are
every count (split innermost first, as every level of `tiling.nest_group` does) and every tuple of
per-axis counts whose product is at most the cores (`every_side`); a count is the split its greedy
pass picks, so at every point it equals the per-axis split of its own factors (rule 3's witness
covers it). A group of one axis has only counts (a per-axis split of one axis is the count).

**Dominance rules** (`grid_choices`, with ``prune``). Fix every parameter of a point but the grid.
The tile and L1 levels leave, per group, a remainder per axis (``rem``: the L1 blocks along each
axis); the grid's side along the group splits ``rem`` greedily (`tiling.nest_group`), so the
cores used along it are the product of that level's factors and each core gets the rest (the
blocks per core, padded). The model (`cube_tables`, ``mt``/``nt``) reads the side only through
those two numbers: the blocks, tiles and output bytes per core (``blocks_m``, ``tiles_m``,
``bo_m``, ``bn``, ``tiles_n``, ``bo_n``, ``bnb``) depend on the blocks per core; only the cores used
(``cores_m``, ``cores_n``) depend on the rest. Then:

1. *Tight sides.* Replace a side ``g`` by ``g' = tighten(rem, g)``, the smallest side whose greedy
   split leaves the same blocks per core (`tiling.tighten`, the tiles' rule of ascend/space.py applied one level out).
   ``g' <= g`` and ``g'`` uses at most as many cores. Every per-core term is unchanged, so the core
   time (`cost._core`), the footprint and every capacity check are equal; the off-chip bytes
   ``max(min_bytes, cores_used * (gm_core + out_bytes))`` (`cost._offchip`), the HBM time
   ``offchip / hbm_rate``, hence the latency ``max(core, hbm)``, and the energy (every level of
   `energy.cube_level_bytes` is ``cores_used`` times a per-core count, or the off-chip bytes) are
   nondecreasing in ``cores_used``; and ``B' * M' * N' <= B * M * N``, so ``core-count`` passes
   whenever it did. The point with ``g'`` is feasible whenever the one with ``g`` is and no worse in
   any objective. So a side is kept only if it is tight for some remainder the space's tiles and
   L1 multiples leave (`tight_sides`); this also drops every side beyond the group's blocks (all
   of them are as tight as the group's whole count).
2. *Grids as products.* The kept grids are the ``BxMxN`` with each side kept and ``B*M*N`` at most
   the cores. The witness of rule 1 (or 3) replaces each side of a pruned point separately, by a
   kept side of at most its cores, so the product stays within the cores: it is a kept grid.
3. *Per-axis splits: the same blocks per core on the fewest cores* (`tight_splits`). The model
   reads a side through two products only (above): the blocks per core ``prod ceil(rem_i / c_i)``
   (``msz[..., 3]`` in cube_tables.py) and the cores used ``prod min(c_i, rem_i)`` (``msz[..., 2]``).
   Take a point whose side is a count or a split ``c`` and let ``f`` be its per-axis factors at
   the point's remainder ``rem`` (the greedy factors of a count, ``min(c_i, rem_i)`` of a split).
   (a) Tighten each axis: ``t_i = ceil(rem_i / ceil(rem_i / f_i))`` leaves every axis the same
   blocks per core with ``t_i <= f_i <= rem_i``, so the same blocks per core, at most the cores
   used, and ``prod t <= prod c``. (b) Of the tight splits with those blocks per core (each ``t_i``
   one of the values ``ceil(rem_i / b)``: the tight counts of one axis), take the one with the
   fewest cores ``prod k`` (ties: the first tuple); its cores used are ``prod k <= prod t``.
   Every per-core term is a function of the blocks per core (equal), and every objective is
   nondecreasing in the cores used (rule 1's argument), and the grid's cores do not grow, so the
   point with ``k`` is feasible whenever the point is and no worse in any objective. So per
   remainder the tight splits with the fewest cores per blocks-per-core value are kept, and the
   kept set is their union over the remainders the tiles and L1 multiples leave. A split with
   *fewer* blocks per core is not taken as a witness: the per-core time is not proved monotone
   in the blocks (with B-resident block loops, ``top + (three - top) / steps`` has a constant B
   load in ``three`` that shrinks per step as the steps grow), so only equal blocks are compared.

`tests/costmodels/ascend/test_ascend_grids.py` checks the rules point by point against the unpruned
grids (every ``BxMxN`` with at most the cores, every per-axis split for a conv's M) on small problems,
searching the kept sides for each witness independently of `tight_splits`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from functools import cache

import numpy as np

from costmodels.ascend.tiling import Side, grid_text, parse_grid, side_cores, side_text, tighten

Axes = tuple[tuple[str, int], ...]
Grid = tuple[Side, Side, Side]


def _products(arity: int, cores: int) -> Iterator[tuple[int, ...]]:
    """Every tuple of `arity` positive counts whose product is at most `cores`."""
    if arity == 0:
        yield ()
        return
    for c in range(1, cores + 1):
        for rest in _products(arity - 1, cores // c):
            yield (c, *rest)


def every_side(cores: int, arity: int) -> tuple[Side, ...]:
    """The legal sides of a group of `arity` axes: every count up to the cores (split innermost first) and, for a
    group of several axes, every tuple of per-axis counts whose product is at most the cores."""
    ints: list[Side] = list(range(1, cores + 1))
    return tuple(ints + (list(_products(arity, cores)) if arity > 1 else []))


def _order(g: Grid) -> tuple[int, tuple[int, int, int], str]:
    """Most cores first, then by the cores of each side, then by the text."""
    c = tuple(side_cores(x) for x in g)
    return (-(c[0] * c[1] * c[2]), (c[0], c[1], c[2]), grid_text(g))


def every_grid(cores: int, arity: tuple[int, int, int] = (1, 1, 1)) -> tuple[Grid, ...]:
    """Every ``(B, M, N)`` with at most `cores` cores: the legal grids before the rules, most cores first.

    `arity`: the axes of the batch, M and N groups (a group of several axes also gets every per-axis split).
    """
    sb, sm, sn = (every_side(cores, a) for a in arity)
    out = [
        (b, m, n)
        for b in sb
        for m in sm
        if side_cores(b) * side_cores(m) <= cores
        for n in sn
        if side_cores(b) * side_cores(m) * side_cores(n) <= cores
    ]
    return tuple(sorted(out, key=_order))


def tight_sides(rems: Iterable[Axes], cores: int) -> frozenset[int]:
    """Sides (1..cores) that are tight for at least one of the per-axis remainders `rems` (rule 1 above)."""
    out: set[int] = set()
    for rem in set(rems):
        out.update(int(tighten(rem, g)) for g in range(1, cores + 1))
    return frozenset(s for s in out if s <= cores)


@cache
def _kept_splits(rem: tuple[int, ...], cores: int) -> frozenset[tuple[int, ...]]:
    """Rule 3 for one remainder: of the tight per-axis splits with the same blocks per core, the fewest cores."""
    tight = [sorted({-(-r // b) for b in range(1, r + 1)} & set(range(1, cores + 1))) for r in rem]
    best: dict[int, tuple[int, tuple[int, ...]]] = {}

    def walk(i: int, left: int, picked: tuple[int, ...], blocks: int) -> None:
        if i == len(rem):
            key = (math.prod(picked), picked)
            if blocks not in best or key < best[blocks]:
                best[blocks] = key
            return
        for t in tight[i]:
            if t > left:
                break
            walk(i + 1, left // t, (*picked, t), blocks * -(-rem[i] // t))

    walk(0, cores, (), 1)
    return frozenset(split for _, split in best.values())


def tight_splits(rems: Iterable[Axes], cores: int) -> frozenset[tuple[int, ...]]:
    """The per-axis splits kept by rules 1 and 3 for at least one of the remainders `rems`."""
    out: set[tuple[int, ...]] = set()
    for rem in set(rems):
        out |= _kept_splits(tuple(r for _, r in rem), cores)
    return frozenset(out)


def grid_choices(
    cores: int,
    sides: tuple[frozenset[Side], frozenset[Side], frozenset[Side]] | None = None,
    arity: tuple[int, int, int] = (1, 1, 1),
) -> tuple[str, ...]:
    """The grids offered: every legal grid (``sides`` None), or every product of kept sides within the cores
    (rule 2). Most cores first (then by the cores of each side), so the first is one of the largest."""
    if sides is None:
        grids = every_grid(cores, arity)
    else:
        sb, sm, sn = (sorted(x, key=lambda v: (side_cores(v), side_text(v))) for x in sides)
        grids = tuple(
            sorted(
                (
                    (b, m, n)
                    for b in sb
                    for m in sm
                    for n in sn
                    if side_cores(b) * side_cores(m) * side_cores(n) <= cores
                ),
                key=_order,
            )
        )
    return tuple(grid_text(g) for g in grids)


def side_arrays(
    grids: tuple[str, ...], arity: tuple[int, ...]
) -> tuple[tuple[np.ndarray, tuple[np.ndarray, ...]], ...]:
    """Per side (B, M, N) of each grid: its cores, and its per-axis counts (0 where it splits innermost first;
    an empty tuple when no grid splits that side per axis).

    Raises:
        ValueError: a per-axis side whose counts do not match its group's axes.
    """
    parsed = [parse_grid(g) for g in grids]
    out: list[tuple[np.ndarray, tuple[np.ndarray, ...]]] = []
    for i, (name, n_axes) in enumerate(zip("BMN", arity, strict=True)):
        cores = np.array([side_cores(p[i]) for p in parsed], dtype=np.int64)
        per = [p[i] for p in parsed]
        if not any(isinstance(x, tuple) for x in per):
            out.append((cores, ()))
            continue
        for g, x in zip(grids, per, strict=True):
            if isinstance(x, tuple) and len(x) != n_axes:
                raise ValueError(
                    f"core grid {g!r}: its {name} side {side_text(x)} gives cores for {len(x)} axes, "
                    f"the {name} group has {n_axes}"
                )
        split = tuple(
            np.array([x[a] if isinstance(x, tuple) else 0 for x in per], dtype=np.int64) for a in range(n_axes)
        )
        out.append((cores, split))
    return tuple(out)
