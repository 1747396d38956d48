"""Splitting a group of axes (the M, N, K or batch axes of a GEMM view) across mapping levels.

A tile of the flattened group is built from its innermost axis outwards: axes that fit are
taken whole, the first that does not fit is split, the rest stay outside. Each level asks for a
number of units of the level inside it; the outermost level takes what remains (rounded up,
so a level may pad). The factors per axis and level go straight into the `Mapping` loops, and
the products per level are what the cost model prices (`level_sizes` gives them for many counts
at once, for the batch scorer's tables), so both always agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import overload

import numpy as np


@dataclass(frozen=True)
class GroupNest:
    """Factors of a group of axes per level, innermost level first.

    Attributes:
        axes: the group's axes, outermost first (problem order).
        factors: per level (innermost first) the factor of each axis.
    """

    axes: tuple[str, ...]
    factors: tuple[tuple[int, ...], ...]

    def size(self, level: int) -> int:
        """Product of the factors of one level (the level's count of inner units)."""
        return math.prod(self.factors[level])

    def factor(self, level: int, axis: str) -> int:
        return self.factors[level][self.axes.index(axis)]

    @property
    def padded(self) -> int:
        return math.prod(self.size(i) for i in range(len(self.factors)))


@cache
def nest_group(
    axes: tuple[tuple[str, int], ...], counts: tuple[int, ...], split: tuple[int, ...] | None = None
) -> GroupNest:
    """Split a group of axes over ``len(counts) + 1`` levels (``+ 2`` with `split`).

    Args:
        axes: (axis, size) pairs, outermost axis first.
        counts: the units wanted at each level, innermost first; the first is a tile size in
            elements of the flattened group, each next one a count of the previous level's units.
        split: one more level after `counts` whose count is given per axis (outermost first), not
            split innermost first: axis ``i`` gets ``min(split[i], what is left of it)`` (a core split
            over the axes of a group, ascend/grids.py).

    Returns:
        The factors per level; the last level holds whatever remains.
    """
    names = tuple(a for a, _ in axes)
    remaining = [s for _, s in axes]
    levels: list[tuple[int, ...]] = []
    for want in counts:
        q = max(1, int(want))
        fac = [1] * len(axes)
        for i in reversed(range(len(axes))):
            r = remaining[i]
            if q <= 1 or r <= 1:
                continue
            if r <= q:
                fac[i] = r
                q //= r
            else:
                fac[i] = q
                q = 1
        for i, f in enumerate(fac):
            remaining[i] = -(-remaining[i] // f)
        levels.append(tuple(fac))
    if split is not None:
        fac = [min(max(1, int(c)), r) for c, r in zip(split, remaining, strict=True)]
        remaining = [-(-r // f) for r, f in zip(remaining, fac, strict=True)]
        levels.append(tuple(fac))
    levels.append(tuple(remaining))
    return GroupNest(axes=names, factors=tuple(levels))


def level_sizes(
    axes: tuple[tuple[str, int], ...], counts: tuple[np.ndarray, ...], split: tuple[np.ndarray, ...] | None = None
) -> np.ndarray:
    """The level sizes of `nest_group` for many counts at once: ``[*broadcast shape, len(counts) + 1]`` int64.

    The same greedy split, elementwise over the broadcast of the `counts` arrays (one array per
    level, innermost first), so ``out[..., i] == nest_group(axes, counts at ...).size(i)``. Each
    step broadcasts only what it reads (a level's counts, the axes' remainders), so it costs a few
    numpy calls on small arrays. `split` (one array per axis, outermost first, broadcast like the
    counts): where its entries are positive the *last* level is split per axis as `nest_group`'s
    ``split`` does (axis ``i`` gets ``min(split[i], what is left)``), elsewhere innermost first by
    its count.
    """
    shape = np.broadcast(*counts, *(split or ())).shape if counts else ()
    out = np.empty((*shape, len(counts) + 1), dtype=np.int64)
    remaining: list[int | np.ndarray] = [size for _, size in axes]
    last = len(counts) - 1
    for level, want in enumerate(counts):
        q = np.maximum(np.asarray(want, dtype=np.int64), 1)
        size: np.ndarray | None = None  # the product of the level's factors (None: no factor yet, 1)
        for i in reversed(range(len(axes))):  # nest_group's branches, folded: q >= 1 and r >= 1 always
            r = remaining[i]
            if isinstance(r, int) and r == 1:
                continue  # nothing left of this axis: a factor of 1, q unchanged
            fac = np.minimum(r, q)
            if i:  # what the axes outside this one still get (nothing is outside the first)
                q = np.maximum(q // r, 1)
            if split is not None and level == last:  # per axis where the split says so
                per_axis = np.asarray(split[i], dtype=np.int64)
                fac = np.where(per_axis > 0, np.minimum(r, np.maximum(per_axis, 1)), fac)
            remaining[i] = (r - 1) // fac + 1  # ceil(r / fac)
            size = fac if size is None else size * fac
        out[..., level] = 1 if size is None else size
    rest: int | np.ndarray = 1
    for r in remaining:
        rest = rest * r
    out[..., len(counts)] = rest
    return out


@cache
def tighten(axes: tuple[tuple[str, int], ...], tile: int) -> int:
    """The smallest tile whose greedy split leaves the same remainder as `tile`.

    The dominance rule of the tiles (ascend/space.py) and of the core grids' sides (ascend/grids.py).
    """
    nest = nest_group(axes, (tile,))
    return math.prod(-(-size // rest) for (_, size), rest in zip(axes, nest.factors[1], strict=True))


@cache
def exact_tiles(axes: tuple[tuple[str, int], ...], limit: int = 8) -> tuple[int, ...]:
    """Tile sizes of a group whose greedy split pads nothing, largest first.

    A tile is the innermost axes whole times a divisor of the next axis. Used where padding is
    not allowed (product, max and min reductions).
    """
    out: set[int] = set()
    inner = 1
    for _, size in reversed(axes):
        for d in range(1, size + 1):
            if size % d == 0:
                out.add(inner * d)
        inner *= size
    ordered = sorted(out, reverse=True)
    if len(ordered) <= limit:
        return tuple(ordered)
    # keep the whole group, then a spread of the rest (geometric spacing)
    picks = {ordered[0]}
    for target in (ordered[0] / 2**i for i in range(1, 40)):
        best = min(ordered, key=lambda t: abs(math.log(t) - math.log(max(target, 1))))
        picks.add(best)
        if len(picks) >= limit:
            break
    return tuple(sorted(picks, reverse=True))


def capped_choices(values: Sequence[int], extent: int) -> tuple[int, ...]:
    """The values below `extent`, plus the smallest one that covers it (never empty)."""
    vals = sorted(set(values))
    out = [v for v in vals if v < extent]
    cover = [v for v in vals if v >= extent]
    if cover:
        out.append(cover[0])
    return tuple(out) if out else (vals[-1],)


@overload
def round_up(x: int, m: int) -> int: ...
@overload
def round_up(x: np.ndarray, m: int) -> np.ndarray: ...
def round_up(x: int | np.ndarray, m: int) -> int | np.ndarray:
    """`x` rounded up to a multiple of `m` (elementwise for an array)."""
    return -(-x // m) * m


#: One side of a core grid: a count split over its group's axes innermost first, or one count per axis.
Side = int | tuple[int, ...]


def side_cores(side: Side) -> int:
    """The cores one side of a grid spans: its count, or the product of its per-axis counts."""
    return side if isinstance(side, int) else math.prod(side)


def side_text(side: Side) -> str:
    """``4`` or ``2*3`` (per axis, outermost first): the form `parse_grid` reads."""
    return str(side) if isinstance(side, int) else "*".join(str(c) for c in side)


def grid_text(sides: tuple[Side, Side, Side]) -> str:
    return "x".join(side_text(s) for s in sides)


@lru_cache(maxsize=1 << 12)
def parse_grid(grid: str) -> tuple[Side, Side, Side]:
    """``"1x4x6"`` -> (1, 4, 6); ``"1x1*2*3x4"`` -> (1, (1, 2, 3), 4): a side with ``*`` gives its cores per
    axis of its group, outermost first (ascend/grids.py).

    Raises:
        ValueError: not three sides of positive integers.
    """
    parts = str(grid).split("x")

    def side(part: str) -> Side:
        counts = part.split("*")
        if not all(c.isdigit() and int(c) > 0 for c in counts):
            raise ValueError(f"core grid {grid!r} is not BxMxN (e.g. 1x4x6, or 1x2*3x4: 2x3 cores over two M axes)")
        return int(counts[0]) if len(counts) == 1 else tuple(int(c) for c in counts)

    if len(parts) != 3:
        raise ValueError(f"core grid {grid!r} is not BxMxN (e.g. 1x4x6, or 1x2*3x4: 2x3 cores over two M axes)")
    b, m, n = (side(p) for p in parts)
    return b, m, n
