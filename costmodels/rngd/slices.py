"""Slice grids of the RNGD space: every split of a cluster's slices, and the dominance rule.

A cluster has ``slices_per_cluster`` slices (256 on RNGD: hardware-facts.md §1.1, "Hierarchy
(vISA)"), and any number of them may run one loop nest, split over one role or two (issue #12).
A point's ``slice_grid`` is ``a x b`` slices (`rngd.space.grid_code`) and its ``slice_role`` a pair
``xy``: ``x`` over ``a``, ``y`` over ``b`` (`rngd.factors.slice_factor`). The space offers every grid
with ``a * b <= slices_per_cluster`` for every pair (`rngd.space.slice_grids`): every factorisation
of every count, a role alone being ``a x 1`` or ``1 x b``. Before this the space offered one
factorisation per count and pair, the most even one (192 = 16 x 12, never 24 x 8 or 64 x 3).

Dominance (`slice_images`): a grid ``g`` is left out of the space when, for every other stage-1
choice (clusters, cluster_role, slice_role, shift), a choice ``(role', g')`` of fewer slices
(``a' * b' < a * b``) keeps the same extent ``e2`` of every axis on one slice and gives each role
no more slices (``sl`` products). Proof that ``(role', g')`` is at least as good on every objective
and feasible whenever ``(role, g)`` is: the later stages (`rngd.factors.packet_factors`,
`lane_factors`) read only ``e2``, so every loop factor and every per-slice term (packets, stream,
drain, TRF tile and fill, accumulator cells, DM share) is the same; the stage-1 terms
(`rngd.terms.shard_quantities`) besides ``e2`` are the role shard products (re-read moving input
``off_n``, stationary ``off_m``, K split ``ksplit``: its tail ``ksplit`` cycles when > 1), which are
no larger, the slices used ``clusters x a' x b'`` (energy: DM and TRF bytes times slices), which is
smaller, and the ``shards`` constraint ``a' * b' <= slices_per_cluster``, which it keeps. Every cost
term and objective is non-decreasing in these (`rngd.cost.combine`: sums, products of non-negative
terms and maxima). Nothing else of the grid or the role enters the cost: a 2-D split differs from
a 1-D one only through ``e2`` and the shares, so the rule for counts carries over to grids unchanged.
The image (fewest slices, then first role and grid on a tie) is itself never left out (no choice
of fewer slices dominates it, or it would dominate ``(role, g)`` too), so every left-out point has
its image in the space: `tests/costmodels/rngd/test_rngd_slices.py` checks this point by point
against the unpruned space.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from costmodels.protocol import SearchSpace
from costmodels.rngd.factors import distinct_rows, shard_factors
from costmodels.rngd.space import ROLES, Roles, grid_parts


@dataclass(frozen=True)
class Stage1:
    """A problem's roles and the choices of its space's stage-1 parameters, which the dominance rules read.

    Stage 1 (`rngd.factors.shard_factors`) places the problem on clusters and slices: ``clusters``,
    ``cluster_role`` (`c_roles`), ``slice_role`` (`s_roles`), ``shift`` and ``slice_grid`` (`grids`).
    """

    roles: Roles
    grids: tuple[int, ...]
    clusters: tuple[int, ...]
    c_roles: tuple[str, ...]
    s_roles: tuple[str, ...]
    shifts: tuple[bool, ...]

    @classmethod
    def of_space(cls, roles: Roles, space: SearchSpace) -> Stage1:
        """The stage-1 choices of `space` (an RNGD space of the problem whose roles are `roles`)."""
        ch = {p.name: p.choices for p in space.params}
        return cls(
            roles=roles,
            grids=tuple(int(x) for x in ch["slice_grid"]),
            clusters=tuple(int(x) for x in ch["clusters"]),
            c_roles=tuple(str(x) for x in ch["cluster_role"]),
            s_roles=tuple(str(x) for x in ch["slice_role"]),
            shifts=tuple(bool(x) for x in ch["shift"]),
        )

    def with_grids(self, grids: tuple[int, ...]) -> Stage1:
        """The same choices with `grids` as the slice grids."""
        return replace(self, grids=grids)


def stage1_factors(s: Stage1) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every stage-1 choice (cluster, cluster role, shift, slice role, grid; grid fastest) and its shard factors.

    Returns the cluster count of each choice (the grid's length) and `shard_factors` over the grid.
    """
    grid = np.meshgrid(
        np.asarray(s.clusters, dtype=np.int64),
        np.asarray(s.c_roles),
        np.asarray(s.shifts, dtype=bool),
        np.asarray(s.s_roles),
        np.asarray(s.grids, dtype=np.int64),
        indexing="ij",
    )
    c, rc, sh, rs, g = (x.reshape(-1) for x in grid)
    return c, shard_factors(s.roles, c, g, rc, rs, sh)


def slice_images(s: Stage1) -> tuple[np.ndarray, np.ndarray]:
    """For every stage-1 choice, the (slice_role, slice_grid) it maps to: indices into `s.s_roles` and `s.grids`.

    Two arrays of shape ``(len(s.clusters), len(s.c_roles), len(s.shifts), len(s.s_roles), len(s.grids))``.
    The image of ``(role, g)`` is the choice of fewest slices (first role, then first grid, on a tie)
    among those whose ``e2`` equals that of ``(role, g)`` on every axis, when it has fewer slices and
    gives no role more slices; otherwise ``(role, g)`` itself (see the module's proof). An image is
    its own image: no choice of fewer slices has its ``e2``.
    """
    r = s.roles
    n_r, n_s = len(s.s_roles), len(s.grids)
    c, f = stage1_factors(s)
    m = n_r * n_s  # choices (role, count) of one combination of the other stage-1 choices
    n_combo = len(c) // m
    combo = np.repeat(np.arange(n_combo), m)

    ones = np.ones_like(c)
    share = np.stack([np.prod([f[f"sl:{a}"] for a in r.axes[role]] or [ones], axis=0) for role in ROLES], axis=1)
    _, gid = distinct_rows([combo, *(f[f"e2:{a}"] for a in sorted(r.sizes))])
    a, b = grid_parts(np.asarray(s.grids, dtype=np.int64))
    cnt = np.tile(a * b, n_combo * n_r)  # slices of each choice
    idx = np.arange(len(c))
    order = np.lexsort((idx, cnt, gid))  # by group, then slices, then role and grid
    g_sorted = gid[order]
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
    head = np.empty(len(c), dtype=np.int64)
    head[order] = order[np.repeat(starts, np.diff(np.r_[starts, len(c)]))]  # smallest-count choice of the group
    better = (cnt[head] < cnt) & (share[head] <= share).all(axis=1)
    out = np.where(better, head, idx) - combo * m
    shape = (len(s.clusters), len(s.c_roles), len(s.shifts), n_r, n_s)
    return (out // n_s).reshape(shape), (out % n_s).reshape(shape)


def kept_grids(s: Stage1) -> tuple[int, ...]:
    """The grids that are their own image for some other stage-1 choice (the others are dominated)."""
    role_img, grid_img = slice_images(s)
    own = (grid_img == np.arange(len(s.grids))) & (role_img == np.arange(len(s.s_roles))[:, None])
    keep = own.reshape(-1, len(s.grids)).any(axis=0)
    return tuple(int(x) for x, k in zip(s.grids, keep, strict=True) if k)
