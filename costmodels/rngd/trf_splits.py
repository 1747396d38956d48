"""The ``trf_split`` choices of the RNGD space: every candidate split that some row of the space needs.

``trf_split`` is the number of TRF loads (N chunks) per slice (contraction-engine-rngd.txt,
"TRF Sequencer": the weight tile of one load must fit the TRF, hardware-facts.md §1.1 "TRF": 64 KB
per slice, 32 KB double-buffered); nothing in the references limits the count or asks for a power
of two, so every positive integer is legal. The candidates (`rngd.factors.TRF_CANDIDATES`) are every
integer up to 8, then the powers of two up to 64. The space offers each candidate up to the first one
at least the N extent (`all_splits`) that is its own image (`rngd.factors.trf_image`) for at least
one row of the space: one stage-1 choice (which fixes every N axis's extent on a slice) and one
``rows`` choice (`kept_splits`). A candidate that is no row's own image is dominated on every point
of the space by a smaller candidate, its image, which the space offers (the proof is in
`trf_image`), so leaving it out loses no optimum; `tests/costmodels/rngd/test_rngd_trf_prune.py`
checks this against the space of every candidate.

Restriction kept (issue #12): splits 9-63 other than 16 and 32, and splits above 64, are not
offered. Every integer up to 64 made the spaces of the benchmark's layers 2-18x larger (median
about 6x) and the searches of 7 of them 2-9x slower, 2 no longer proven within their budget
(measured before the bound's lane minima were made a loop, on a loaded machine), and the own-image
splits of a 4096^3 GEMM run to 4,096. A row whose N extent needs more than 64 loads to fit the TRF
has no feasible point.
"""

from __future__ import annotations

import numpy as np

from costmodels.rngd.factors import TRF_CANDIDATES, spread_factor, trf_image
from costmodels.rngd.slices import Stage1, stage1_factors
from costmodels.rngd.space import Roles


def all_splits(r: Roles) -> tuple[int, ...]:
    """Every candidate split (`rngd.factors.TRF_CANDIDATES`) up to the N extent: the unpruned choices.

    A split above the N extent ``E`` has ``hn = 1`` and ``tn >= E`` (`rngd.factors.trf_image`), as
    the smallest candidate at least ``E`` on a row has at best; the first such candidate stays.
    """
    if not r.axes["n"]:
        return (1,)
    n_size = int(np.prod([r.sizes[a] for a in r.axes["n"]]))
    above = [c for c in TRF_CANDIDATES if c >= n_size][:1]
    return tuple(c for c in TRF_CANDIDATES if c < n_size) + tuple(above)


def kept_splits(s: Stage1, rows: tuple[int, ...]) -> tuple[int, ...]:
    """The splits of `all_splits` that are their own image for some stage-1 choice and rows choice.

    The N axes' extents on a row are those `rngd.factors.lane_factors` computes with the N axes
    outside the packet (the only case the batch scorer tabulates; a point with an N axis in the
    packet is scored by the per-point formulas, which apply the same rule to any split).
    """
    r = s.roles
    splits = all_splits(r)
    nx = list(r.axes["n"])
    if not nx or len(splits) == 1:
        return splits
    _, f = stage1_factors(s)
    e2 = np.unique(np.stack([f[f"e2:{a}"] for a in nx], axis=1), axis=0)  # distinct N extents of a slice
    n_e, n_r, n_t = len(e2), len(rows), len(splits)
    ext = [np.repeat(e2[:, i], n_r * n_t) for i in range(len(nx))]  # (extent, rows, split), split fastest
    row = np.repeat(np.tile(np.asarray(rows, dtype=np.int64), n_e), n_t)
    got = spread_factor(ext, row, inner=True)
    rem = [-(-x // g) for x, g in zip(ext, got, strict=True)]
    trf = np.tile(np.asarray(splits, dtype=np.int64), n_e * n_r)
    own = (trf_image(rem, trf) == trf).reshape(-1, n_t).any(axis=0)
    return tuple(t for t, k in zip(splits, own, strict=True) if k)
