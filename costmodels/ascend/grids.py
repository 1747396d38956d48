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
be priced from the references. Within a group of several axes (a conv's output rows and columns)
the cores split its axes innermost first, as every level of `tiling.nest_group` does.

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
   the cores. The witness of rule 1 tightens each side of a pruned point separately, which keeps
   each side in its kept set and the product within the cores, so it is a kept grid.

`tests/costmodels/ascend/test_ascend_grids.py` checks both point by point against the unpruned
grids (every ``BxMxN`` with at most the cores) on small problems.
"""

from __future__ import annotations

from collections.abc import Iterable

from costmodels.ascend.tiling import tighten

Axes = tuple[tuple[str, int], ...]


def every_grid(cores: int) -> tuple[tuple[int, int, int], ...]:
    """Every ``(B, M, N)`` with ``B * M * N <= cores``: the legal grids before the rules, most cores first."""
    out = [
        (b, m, n) for b in range(1, cores + 1) for m in range(1, cores // b + 1) for n in range(1, cores // (b * m) + 1)
    ]
    return tuple(sorted(out, key=lambda g: (-(g[0] * g[1] * g[2]), g)))


def tight_sides(rems: Iterable[Axes], cores: int) -> frozenset[int]:
    """Sides (1..cores) that are tight for at least one of the per-axis remainders `rems` (rule 1 above)."""
    out: set[int] = set()
    for rem in set(rems):
        out.update(int(tighten(rem, g)) for g in range(1, cores + 1))
    return frozenset(s for s in out if s <= cores)


def grid_choices(
    cores: int, sides: tuple[frozenset[int], frozenset[int], frozenset[int]] | None = None
) -> tuple[str, ...]:
    """The grids offered: every legal grid (``sides`` None), or those whose B, M and N sides are kept (rule 2).

    Most cores first (then by B, M, N), so the first is one of the largest.
    """
    grids = every_grid(cores)
    if sides is not None:
        sb, sm, sn = sides
        grids = tuple(g for g in grids if g[0] in sb and g[1] in sm and g[2] in sn)
    return tuple(f"{b}x{m}x{n}" for b, m, n in grids)
