"""The Trainium loop nest: GEMM roles, role splits, and the four levels of a mapping.

A binary problem is seen as a GEMM (costmodels.gemm_view): batch axes, the free axes of the
stationary operand (role ``s``, at most 128 per ``nc_matmul``), the free axes of the moving
operand (role ``m``, at most 512) and the contraction axes (role ``k``, at most 128 per
instruction on the partitions, 256 with fp8 double_row on NeuronCore-v3), accumulated in PSUM
(nki-nc_matmul.txt). Which input is stationary is a mapping choice: the weight (the default
GEMM view) or the other input. A conv2d is seen through im2col (M = n*oh*ow, K = fh*fw*ci):
NKI has no conv primitive (hardware-facts.md §2.2 and §5), so this is an ASSUMPTION.

Each role's axes are split, innermost first, into four factors per axis:

- ``nc_matmul`` (instruction tile): the innermost axes whole, then a balanced part of the next;
- ``sbuf`` (tiles of one SBUF block): the same greedy split over the tile counts;
- ``hbm`` (block loops, one DMA of a block per iteration);
- ``chip`` (spatial over NeuronCores): taken from the outermost axes of the sharded role first;
  with a pair shard (``m2s``: see `shard_cores`) two roles each take their share of the cores.

The mixed-radix split always covers every point exactly once; padding points on a contraction
axis are zero-filled in both inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from costmodels.gemm_view import gemm_view
from workload.problem import Problem

LEVELS: tuple[str, ...] = ("chip", "hbm", "sbuf", "nc_matmul")
#: Role codes used in the vectorised loop arrays.
B, S, M, K = 0, 1, 2, 3
ROLE_CODE: dict[str, int] = {"b": B, "s": S, "m": M, "k": K}
ROLE_NAME: dict[int, str] = {B: "batch", S: "stationary free", M: "moving free", K: "contraction"}


@dataclass(frozen=True)
class Roles:
    """Which input is stationary and which problem axes play each GEMM role (outer to inner)."""

    stationary: str  # "weight" | "other"
    stat_input: int
    mov_input: int
    axes: dict[str, tuple[str, ...]]  # "b" | "s" | "m" | "k" -> axes

    def role_of(self, axis: str) -> str:
        for role, axes in self.axes.items():
            if axis in axes:
                return role
        raise KeyError(axis)

    def label(self, role: str) -> str:
        """Axis names of a role for messages, e.g. ``n`` or ``oh*ow`` (``1`` when the role is empty)."""
        return "*".join(self.axes[role]) or "1"


def roles_of(problem: Problem, stationary: str) -> Roles:
    """The GEMM roles of a binary problem when `stationary` ("weight" or "other") is stationary."""
    v = gemm_view(problem)
    if stationary == "weight":
        stat, mov, s_axes, m_axes = v.stationary, v.moving, v.n_axes, v.m_axes
    elif stationary == "other":
        stat, mov, s_axes, m_axes = v.moving, v.stationary, v.m_axes, v.n_axes
    else:
        raise ValueError(f"stationary must be 'weight' or 'other', not {stationary!r}")
    return Roles(stationary, stat, mov, {"b": v.batch_axes, "s": s_axes, "m": m_axes, "k": v.k_axes})


def split_inner(sizes: Sequence[int], cap: int) -> tuple[int, ...]:
    """Factors per axis (outer to inner) of an inner chunk of at most `cap` points.

    Inner axes are taken whole while they fit; the first axis that does not fit takes a balanced
    part ``ceil(s / ceil(s / room))`` (fewest padding points for the fewest chunks) and the
    split stops there.
    """
    out = [1] * len(sizes)
    room = max(cap, 1)
    for i in reversed(range(len(sizes))):
        s = sizes[i]
        if s <= room:
            out[i] = s
            room //= s
            continue
        if room > 1:
            out[i] = math.ceil(s / math.ceil(s / room))
        break
    return tuple(out)


def split_outer(sizes: Sequence[int], cap: int) -> tuple[int, ...]:
    """Like `split_inner` but taking the outermost axes first (for core sharding)."""
    return tuple(reversed(split_inner(tuple(reversed(sizes)), cap)))


@dataclass(frozen=True)
class RoleSplit:
    """Per-axis factors of one role at each level (``chip * hbm * sbuf * tile >= size``)."""

    chip: tuple[int, ...]
    hbm: tuple[int, ...]
    sbuf: tuple[int, ...]
    tile: tuple[int, ...]


def split_role(sizes: Sequence[int], tile_cap: int, cores: int, block_cap: int) -> RoleSplit:
    """Split one role: instruction tile, then cores (outermost first), then SBUF block, then block loops."""
    tile = split_inner(sizes, tile_cap)
    tiles = [math.ceil(s / t) for s, t in zip(sizes, tile, strict=True)]
    chip = split_outer(tiles, cores)
    per_core = [math.ceil(n / c) for n, c in zip(tiles, chip, strict=True)]
    sbuf = split_inner(per_core, block_cap)
    hbm = tuple(math.ceil(n / b) for n, b in zip(per_core, sbuf, strict=True))
    return RoleSplit(chip=chip, hbm=hbm, sbuf=sbuf, tile=tile)


def shard_roles(shard: str) -> tuple[str, ...]:
    """The roles a shard choice spreads over the cores: ``"m"`` -> (m,), ``"m2s"`` -> (m, s)."""
    return (shard,) if len(shard) == 1 else (shard[0], shard[-1])


def shard_cores(shard: str, cores: int) -> dict[str, int]:
    """Cores each role of a shard choice gets out of `cores` (their product is `cores`).

    A single role (``"m"``, ``"s"``, ``"b"``) gets them all. A pair ``"<x><d><y>"`` (``"m2s"``)
    splits them over two roles: x gets ``gcd(d, cores)`` and y the rest, so on 8 cores ``m2s`` is
    2 x 4 and ``m4s`` is 4 x 2 (both orientations of the pair); on fewer cores the pair degrades to
    a valid split (``m4s`` on 2 cores is all on m).
    """
    if len(shard) == 1:
        return {shard: cores}
    x, d, y = shard[0], int(shard[1:-1]), shard[-1]
    g = math.gcd(d, cores)
    return {x: g, y: cores // g}


def role_splits(problem: Problem, roles: Roles, point: dict[str, object]) -> dict[str, RoleSplit]:
    """Split every role of `roles` for one point of the space."""
    share = shard_cores(str(point["shard"]), int(point["cores"]))  # type: ignore[call-overload]
    caps = {
        "s": (int(point["tile_stat"]), int(point["block_stat"])),  # type: ignore[call-overload]
        "m": (int(point["tile_mov"]), int(point["block_mov"])),  # type: ignore[call-overload]
        "k": (int(point["tile_k"]), int(point["block_k"])),  # type: ignore[call-overload]
        "b": (1, 1),
    }
    out: dict[str, RoleSplit] = {}
    for role, axes in roles.axes.items():
        sizes = [problem.axes[a] for a in axes]
        tile_cap, block_cap = caps[role]
        out[role] = split_role(sizes, tile_cap, share.get(role, 1), block_cap)
    return out
