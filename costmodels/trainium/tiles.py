"""Instruction tile sizes of the Trainium space: the legal ones, the rule that leaves most out, the ladders of before.

Legal tiles (nki-nc_matmul.txt, "Parameters" layouts; hardware-facts.md §2.1, "nc_matmul tile
limits"): stationary free <= 128 (``pe_cols``), moving free <= 512 (``moving_free_max``),
contraction <= 128 partitions (``pe_rows``; 256 with fp8 double_row on NeuronCore-v3). A tile
``t`` of an axis of extent ``E`` takes ``n = ceil(E / t)`` tiles, the last one padded (zero-filled
on a contraction axis, `costmodels.family.zero_fill`), so every ``1 <= t <= limit`` is legal.

**Rule T1 (balanced tiles).** Among the tiles of an axis with the same tile count ``n``, the
balanced tile ``ceil(E / n)`` (the smallest of them) is at least as good on every objective
(latency, off-chip bytes, footprint, energy) and feasible whenever any of them is. So the space
offers, per tile cap, only the balanced tile of that cap's count: `nest.split_inner` builds it,
and caps with the same split are merged (`distinct_caps`).

Proof. `nest.split_role` splits the tile *counts* over the cores, the SBUF block and the block
loops, so two tiles with one count give the same factors at the ``chip``, ``hbm`` and ``sbuf``
levels, the same trips, fetches and open blocks; in `cost.Quantities` they differ in ``ts`` /
``tm`` / ``tk`` only. Every output of `cost.evaluate` is non-decreasing in those at fixed counts:
the instruction cost ``max(min(64, ts), tm)`` (x4 fp32); the block extents ``ts*bs``, ``tm*bm``,
``tk*bk`` and with them the block bytes, the HBM bytes per core and per chip (maxima and sums of
non-decreasing terms), the DMA and fill cycles; the eviction ``n_out*(tm + 60)`` (and the add
``2*tm + 60`` per extra K block); the latency ``fill + max(te, dma - fill, evict)`` =
``max(fill + te, dma, fill, fill + evict)``; the SBUF bytes per partition (``ceil(tk / 128)``
slots of those extents, open accumulators of ``tm`` elements), the PSUM banks
``ceil(4*tm / 2048)`` per open accumulator and the footprint; the SBUF and PSUM bytes moved (so
the energy, a non-negative sum of them and the fixed MACs). Every feasibility mask is a
threshold ``x > limit`` on one of those quantities or on a count. A role of several axes is split
by `nest.split_inner` (inner axes whole while they fit, then a balanced part of the next axis):
the rule holds axis by axis. Tile shapes that split two axes of one role at once are legal but
not offered (not covered by this rule). `tests/costmodels/trainium/test_trainium_tiles.py`
checks the rule on priced mappings: every unbalanced tile of random points of small problems
costs at least as much as the kept balanced one, and is infeasible whenever the kept one is.

After T1 the tiles of an axis are one per count, up to ``limit`` of them (e.g. 96 stationary,
about 120 moving and 96 contraction tiles for a 4096^3 GEMM), and the space offers every one of
them (``space.build_space``, default ``tiles=EVERY``): up to ~5e10 points, far past what the priced
grid (`scoring.price_grid`, 32 bytes per point) and the mapper's exhaustive enumeration can hold.
Such a space is scored by the sub-grids a search asks for (`costmodels.trainium.subgrid`) and
searched by best-first branch and bound with the (stationary, tile) choices as structures and
every structure's admissible bound computed at once (`bounds.tile_bounds`), so "proven optimal"
is over every tile count. The ladders (`LADDERS`: powers of two from the limit down to a floor,
32 stationary and contraction, 64 moving; `THREE_HALVES` adds the caps ``3 * 2^a`` between them,
a role's wider ladder taken only while the space stays within `POINT_BUDGET`) are the space
offered before (``build_space(tiles=LADDER)``), kept to compare with.

The restriction that remains is on SBUF blocks: ``block_stat`` / ``block_mov`` / ``block_k`` are
caps from (1, 2, 4, 8, 16) (`space.BLOCK_CAPS`), not every block of instruction tiles that SBUF
holds; no rule like T1 is proved for them, so a mapping with, e.g., 3 or 32 tiles per block is
legal but not offered, and "optimal" is over the offered block caps.
"""

from __future__ import annotations

from costmodels.trainium.hardware import TrainiumHardware

#: the mapper's default exhaustive enumeration limit (mapper/settings.py ``enumerate_limit``): the
#: ladder of a role is widened only while the ladder space stays within it
POINT_BUDGET = 2_000_000
#: smallest cap of each role's ladder (stationary free, moving free, contraction)
FLOORS = {"s": 32, "m": 64, "k": 32}
#: the two ladders: powers of two only, or with the caps 3 * 2^a between them
POW2, THREE_HALVES = "pow2", "three-halves"
LADDERS = (POW2, THREE_HALVES)


def role_limit(hw: TrainiumHardware, role: str, double_row: bool) -> int:
    """Largest legal tile of a role (nki-nc_matmul.txt, "Parameters"; hardware-facts.md §2.1 FP8 double-row)."""
    return {"s": hw.pe_cols, "m": hw.moving_free_max, "k": hw.max_contraction(double_row)}[role]


def ladder(limit: int, floor: int, kind: str) -> tuple[int, ...]:
    """Caps from `limit` down to `floor`, largest first: the limit over powers of two (and 3/4 of each, `kind`).

    Raises:
        ValueError: an unknown ladder kind.
    """
    if kind not in LADDERS:
        raise ValueError(f"unknown tile ladder {kind!r}: use one of {', '.join(LADDERS)}")
    caps: set[int] = set()
    c = limit
    while c >= floor:
        caps.add(c)
        if kind == THREE_HALVES and c * 3 // 4 >= floor and c % 4 == 0:
            caps.add(c * 3 // 4)
        c //= 2
    return tuple(sorted(caps, reverse=True)) or (limit,)


def every_tile(limit: int) -> tuple[int, ...]:
    """Every legal tile cap of a role, largest first (the space before rule T1 and any ladder)."""
    return tuple(range(limit, 0, -1))


def balanced(extent: int, tile: int) -> int:
    """The balanced tile of `tile`'s count: ``ceil(E / ceil(E / t))``, never larger than `tile` (rule T1)."""
    n = -(-extent // tile)
    return -(-extent // n)
