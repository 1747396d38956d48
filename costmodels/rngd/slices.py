"""Slice counts of the RNGD space: every legal count, the 2-D split of a count, and the dominance rule.

A cluster has ``slices_per_cluster`` slices (256 on RNGD: hardware-facts.md §1.1, "Hierarchy
(vISA)"), and any number of them may run one loop nest: the space offers every count from 1 to
that number (or to the largest extent a role could use), not only powers of two (issue #12).

Two roles over the slices (``slice_role`` of two letters, both orders) split a count ``s`` into
``first x s / first`` slices, ``first`` being the smallest divisor of ``s`` that is at least
``sqrt(s)`` (`balanced_first`): the most even factorisation, the first-named role taking the
larger part (``"nm"``: N over 16 and M over 12 of 192 slices). On powers of two this is the split
the space always used (``2**ceil(k/2) x 2**floor(k/2)``), so those points keep their cost.

Dominance (`slice_images`): a count ``s`` is left out of the space when, for every other stage-1
choice (clusters, cluster_role, slice_role, shift), a smaller count ``s'`` keeps the same extent
``e2`` of every axis on one slice and gives each role no more slices (``sl`` products). Proof that
``s'`` is at least as good on every objective and feasible whenever ``s`` is: the later stages
(`rngd.factors.packet_factors`, `lane_factors`) read only ``e2``, so every loop factor and every
per-slice term (packets, stream, drain, TRF tile and fill, accumulator cells, DM share) is the
same; the stage-1 terms (`rngd.terms.shard_quantities`) besides ``e2`` are the role shard
products (re-read moving input ``off_n``, stationary ``off_m``, K split ``ksplit``: its tail
``ksplit`` cycles when > 1), which are no larger, the slices used ``clusters x s`` (energy: DM and
TRF bytes times slices), which is smaller, and the ``shards`` constraint ``s <= slices_per_cluster``,
which ``s' < s`` keeps. Every cost term and objective is non-decreasing in these
(`rngd.cost.combine`: sums, products of non-negative terms and maxima). The smallest such ``s'``
is itself never left out (no smaller count dominates it, or it would dominate ``s`` too), so
every left-out point has its image in the space: `tests/costmodels/rngd/test_rngd_slices.py`
checks this point by point against the unpruned space.
"""

from __future__ import annotations

import numpy as np

from costmodels.rngd.factors import shard_factors
from costmodels.rngd.space import ROLES, Roles


def stage1_factors(
    r: Roles,
    counts: tuple[int, ...],
    clusters: tuple[int, ...],
    c_roles: tuple[str, ...],
    s_roles: tuple[str, ...],
    shifts: tuple[bool, ...],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every stage-1 choice (cluster, cluster role, shift, slice role, count; count fastest) and its shard factors.

    Returns the cluster count of each choice (the grid's length) and `shard_factors` over the grid.
    """
    grid = np.meshgrid(
        np.asarray(clusters, dtype=np.int64),
        np.asarray(c_roles),
        np.asarray(shifts, dtype=bool),
        np.asarray(s_roles),
        np.asarray(counts, dtype=np.int64),
        indexing="ij",
    )
    c, rc, sh, rs, s = (g.reshape(-1) for g in grid)
    return c, shard_factors(r, c, s, rc, rs, sh)


def slice_images(
    r: Roles,
    counts: tuple[int, ...],
    clusters: tuple[int, ...],
    c_roles: tuple[str, ...],
    s_roles: tuple[str, ...],
    shifts: tuple[bool, ...],
) -> tuple[np.ndarray, np.ndarray]:
    """For every stage-1 choice, the (slice_role, count) it maps to: indices into `s_roles` and `counts`.

    Two arrays of shape ``(len(clusters), len(c_roles), len(shifts), len(s_roles), len(counts))``.
    The image of ``(role, s)`` is the choice with the smallest count (first role on a tie) among
    those whose ``e2`` equals that of ``(role, s)`` on every axis, when its count is smaller and
    it gives no role more slices; otherwise ``(role, s)`` itself (see the module's proof). An
    image is its own image: no choice with a smaller count has its ``e2``. `counts` must be
    increasing.
    """
    n_r, n_s = len(s_roles), len(counts)
    c, f = stage1_factors(r, counts, clusters, c_roles, s_roles, shifts)
    m = n_r * n_s  # choices (role, count) of one combination of the other stage-1 choices
    n_combo = len(c) // m
    combo = np.repeat(np.arange(n_combo), m)
    e2 = np.stack([f[f"e2:{a}"] for a in sorted(r.sizes)], axis=1)
    ones = np.ones_like(c)
    share = np.stack([np.prod([f[f"sl:{a}"] for a in r.axes[role]] or [ones], axis=0) for role in ROLES], axis=1)
    _, gid = np.unique(np.column_stack([combo, e2]), axis=0, return_inverse=True)
    gid = gid.reshape(-1)
    cnt = np.tile(np.arange(n_s), n_combo * n_r)  # count index of each choice
    idx = np.arange(len(c))
    order = np.lexsort((idx, cnt, gid))  # by group, then count, then role
    g_sorted = gid[order]
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
    head = np.empty(len(c), dtype=np.int64)
    head[order] = order[np.repeat(starts, np.diff(np.r_[starts, len(c)]))]  # smallest-count choice of the group
    better = (cnt[head] < cnt) & (share[head] <= share).all(axis=1)
    out = np.where(better, head, idx) - combo * m
    shape = (len(clusters), len(c_roles), len(shifts), n_r, n_s)
    return (out // n_s).reshape(shape), (out % n_s).reshape(shape)


def kept_counts(
    r: Roles,
    counts: tuple[int, ...],
    clusters: tuple[int, ...],
    c_roles: tuple[str, ...],
    s_roles: tuple[str, ...],
    shifts: tuple[bool, ...],
) -> tuple[int, ...]:
    """The counts that are their own image for some other stage-1 choice (the others are dominated)."""
    role_img, count_img = slice_images(r, counts, clusters, c_roles, s_roles, shifts)
    own = (count_img == np.arange(len(counts))) & (role_img == np.arange(len(s_roles))[:, None])
    keep = own.reshape(-1, len(counts)).any(axis=0)
    return tuple(int(x) for x, k in zip(counts, keep, strict=True) if k)
