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

import numpy as np

from costmodels.rngd.factors import shard_factors
from costmodels.rngd.space import ROLES, Roles, grid_parts


def stage1_factors(
    r: Roles,
    grids: tuple[int, ...],
    clusters: tuple[int, ...],
    c_roles: tuple[str, ...],
    s_roles: tuple[str, ...],
    shifts: tuple[bool, ...],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every stage-1 choice (cluster, cluster role, shift, slice role, grid; grid fastest) and its shard factors.

    Returns the cluster count of each choice (the grid's length) and `shard_factors` over the grid.
    """
    grid = np.meshgrid(
        np.asarray(clusters, dtype=np.int64),
        np.asarray(c_roles),
        np.asarray(shifts, dtype=bool),
        np.asarray(s_roles),
        np.asarray(grids, dtype=np.int64),
        indexing="ij",
    )
    c, rc, sh, rs, g = (x.reshape(-1) for x in grid)
    return c, shard_factors(r, c, g, rc, rs, sh)


def slice_images(
    r: Roles,
    grids: tuple[int, ...],
    clusters: tuple[int, ...],
    c_roles: tuple[str, ...],
    s_roles: tuple[str, ...],
    shifts: tuple[bool, ...],
) -> tuple[np.ndarray, np.ndarray]:
    """For every stage-1 choice, the (slice_role, slice_grid) it maps to: indices into `s_roles` and `grids`.

    Two arrays of shape ``(len(clusters), len(c_roles), len(shifts), len(s_roles), len(grids))``.
    The image of ``(role, g)`` is the choice of fewest slices (first role, then first grid, on a tie)
    among those whose ``e2`` equals that of ``(role, g)`` on every axis, when it has fewer slices and
    gives no role more slices; otherwise ``(role, g)`` itself (see the module's proof). An image is
    its own image: no choice of fewer slices has its ``e2``.
    """
    n_r, n_s = len(s_roles), len(grids)
    c, f = stage1_factors(r, grids, clusters, c_roles, s_roles, shifts)
    m = n_r * n_s  # choices (role, count) of one combination of the other stage-1 choices
    n_combo = len(c) // m
    combo = np.repeat(np.arange(n_combo), m)
    e2 = np.stack([f[f"e2:{a}"] for a in sorted(r.sizes)], axis=1)
    ones = np.ones_like(c)
    share = np.stack([np.prod([f[f"sl:{a}"] for a in r.axes[role]] or [ones], axis=0) for role in ROLES], axis=1)
    _, gid = np.unique(np.column_stack([combo, e2]), axis=0, return_inverse=True)
    gid = gid.reshape(-1)
    a, b = grid_parts(np.asarray(grids, dtype=np.int64))
    cnt = np.tile(a * b, n_combo * n_r)  # slices of each choice
    idx = np.arange(len(c))
    order = np.lexsort((idx, cnt, gid))  # by group, then slices, then role and grid
    g_sorted = gid[order]
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
    head = np.empty(len(c), dtype=np.int64)
    head[order] = order[np.repeat(starts, np.diff(np.r_[starts, len(c)]))]  # smallest-count choice of the group
    better = (cnt[head] < cnt) & (share[head] <= share).all(axis=1)
    out = np.where(better, head, idx) - combo * m
    shape = (len(clusters), len(c_roles), len(shifts), n_r, n_s)
    return (out // n_s).reshape(shape), (out % n_s).reshape(shape)


def kept_grids(
    r: Roles,
    grids: tuple[int, ...],
    clusters: tuple[int, ...],
    c_roles: tuple[str, ...],
    s_roles: tuple[str, ...],
    shifts: tuple[bool, ...],
) -> tuple[int, ...]:
    """The grids that are their own image for some other stage-1 choice (the others are dominated)."""
    role_img, grid_img = slice_images(r, grids, clusters, c_roles, s_roles, shifts)
    own = (grid_img == np.arange(len(grids))) & (role_img == np.arange(len(s_roles))[:, None])
    keep = own.reshape(-1, len(grids)).any(axis=0)
    return tuple(int(x) for x, k in zip(grids, keep, strict=True) if k)
