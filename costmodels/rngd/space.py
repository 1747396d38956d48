"""The RNGD mapping space and its vectorised loop factors.

A point chooses how a binary problem (seen through `gemm_view`: batch ``b``, ``m``, ``n``, ``k``)
lands on ``[chip | cluster | slice (H loops) | row | time | packet]``
(contraction-engine-rngd.txt, case studies; hardware-facts.md §1.2 notation):

- ``packet_k``: K elements per packet. ``packet_k == P`` (P = packet elements) is the
  reference's *K contraction*; ``packet_k == 1`` with ``packet_free="b"`` is *V vectorized*,
  with ``packet_free="m"`` it is *N x M tiled*; anything between mixes them (the packet
  reducer sums groups of ``packet_k``).
- ``rows``: lanes used, holding N (1, 2, 4, 8).
- ``inner``: innermost time loop, ``"k"`` (time reduction) or ``"n"`` (time broadcast of the
  streamed packet over N/rows groups held in the accumulator).
- ``trf_split``: N chunks per slice, each a separate TRF load (a split that only adds padding,
  dominated by a smaller split, is pruned: `rngd.factors.trf_image`, violation ``trf-split``);
  ``double_buffer``: FirstHalf / SecondHalf TRF mode.
- ``clusters``/``cluster_role``: sharding of one role over clusters; ``slice_grid``/``slice_role``:
  a grid ``a x b`` of slices and the pair of roles over it (one role: ``a x 1`` or ``1 x b``).
- ``feed_flits``: flits per packet (1 or 2) or, with ``shift``, the shift buffer depth (2, 3).
- ``shift``: convolution shift-reuse (conv problems only), as in the conv case studies.

`rngd.factors` turns columns of points into per-axis loop factors with numpy, so that one code
path serves `score_batch` and the single-point `mapping` / `check` / `cost`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodels.gemm_view import gemm_view
from costmodels.problem_memo import ProblemMemo
from costmodels.protocol import Param, SearchSpace
from costmodels.rngd.hardware import ROW_CHOICES, RngdHardware
from workload import dtypes
from workload.conv2d import Conv2dParams, as_conv2d
from workload.problem import Problem

ROLES = ("b", "m", "n", "k")
SHARD_ROLES_CLUSTER = ("b", "m", "n")  # K split across clusters would need the Switch Engine ring
Cols = dict[str, np.ndarray]
#: a slice grid ``a x b`` is the choice ``a`` when ``b`` is 1, else ``a * GRID_BASE + b`` (`grid_code`);
#: above any part's slices per cluster (the presets stay below 4,096), so codes and grids are one to one
GRID_BASE = 10_000


def grid_code(a: int, b: int) -> int:
    """The ``slice_grid`` choice of ``a x b`` slices: ``a`` (one role, or ``b`` = 1), else ``a * GRID_BASE + b``."""
    return a if b == 1 else a * GRID_BASE + b


def grid_parts(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` of slice grid codes (`grid_code`), as int64 columns."""
    g = np.asarray(g, dtype=np.int64)
    wide = g >= GRID_BASE
    return np.where(wide, g // GRID_BASE, g), np.where(wide, g % GRID_BASE, 1)


def grid_label(g: int) -> str:
    """``"8x4"`` for the code of 8 x 4 slices, ``"8"`` for 8 slices on one role."""
    a, b = (int(x[0]) for x in grid_parts(np.asarray([g])))
    return f"{a}x{b}" if b != 1 else str(a)


@dataclass(frozen=True)
class Roles:
    """Axes of each GEMM role (outer to inner) and facts of the problem the planner needs.

    `roles_of` shares one instance per problem between callers: read it, never modify it.
    """

    axes: dict[str, tuple[str, ...]]
    sizes: dict[str, int]
    in_dtype: str  # the wider input dtype sets the packet element count
    conv: Conv2dParams | None

    def role_of(self, axis: str) -> str:
        return next(r for r, ax in self.axes.items() if axis in ax)

    def present(self, role: str) -> bool:
        return bool(self.axes[role])


def _roles(problem: Problem) -> Roles:
    gv = gemm_view(problem)
    ins = [o.dtype for o in problem.inputs]
    wide = max(ins, key=lambda d: dtypes.info(d).bits)
    axes = {"b": gv.batch_axes, "m": gv.m_axes, "n": gv.n_axes, "k": gv.k_axes}
    return Roles(axes=axes, sizes=dict(problem.axes), in_dtype=wide, conv=as_conv2d(problem))


_ROLES: ProblemMemo[Roles] = ProblemMemo(_roles, size=16)


def roles_of(problem: Problem) -> Roles:
    """GEMM roles of a binary problem, worked out once per problem (one `check` asks for them several times)."""
    return _ROLES.get(problem)


def shift_possible(conv: Conv2dParams | None) -> bool:
    """Shift-reuse applies to convs whose width stride and dilation the stream adapter can express."""
    if conv is None or conv.kernel[1] < 2:
        return False
    sw, dw = conv.stride[1], conv.dilation[1]
    return sw == 1 or dw == 1 or dw % sw == 0


def slice_grids(shard: list[str], size: dict[str, int], per_cluster: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The unpruned ``slice_role`` and ``slice_grid`` choices: every split of a cluster's slices.

    With two roles or more to shard, each unordered pair ``xy`` (letters in `ROLES` order) over every
    grid ``a x b`` with ``a * b <= per_cluster`` (hardware-facts.md §1.1: 256 slices per cluster):
    ``"xy"`` with ``a x b`` is the other orientation ``"yx"`` with ``b x a`` (the same loop factors
    and loop nest, `rngd.mapping.build_levels` orders axes by role, not by this choice), and
    ``a x 1`` / ``1 x b`` is one role alone, so these choices are every split over every role and
    pair of roles in both orientations. With one role (or none: ``b``) the grids are the counts.
    Grids no pair needs are left out: a side above the largest extent, or a count above the product
    of the two largest extents (then a side is above its own role's extent). Such a side takes its
    role's axes whole, outer first, and pads the last one it reaches (`rngd.factors.spread_factor`),
    so the grid whose side is the product of the axes it reached (no more than the role's extent)
    keeps the same ``e2`` and the same other shares with fewer slices: it dominates by the rule of
    `rngd.slices`, and it is offered here.
    """
    if len(shard) < 2:
        top = min(per_cluster, max([size[x] for x in shard] or [1]))
        return (tuple(shard) or ("b",)), tuple(range(1, max(top, 1) + 1))
    ext = sorted(size[x] for x in shard)
    top = min(per_cluster, ext[-1] * ext[-2])
    pairs = tuple(x + y for i, x in enumerate(shard) for y in shard[i + 1 :])
    grids = [grid_code(a, b) for a in range(1, min(top, ext[-1]) + 1) for b in range(1, min(top // a, ext[-1]) + 1)]
    return pairs, tuple(sorted(grids))


def build_space(problem: Problem, hw: RngdHardware, *, prune: bool = True) -> SearchSpace:
    """The mapping space of a binary problem: every legal choice, less those a proved rule dominates.

    Legal choices (issue #12): every split of a cluster's slices over one role or a pair of roles in
    both orientations, every factorisation ``a x b <= slices_per_cluster`` of every count
    (hardware-facts.md §1.1: 256 slices per cluster; `slice_grids`: ``slice_role`` a pair ``xy``,
    ``slice_grid`` the grid ``a x b``, `grid_code`), and every cluster count;
    ``packet_k`` every divisor of the packet (the power-of-two element count has no others:
    contraction-engine-rngd.txt, "Mixed configurations" via the packet reducer's groups; a
    non-divisor fails ``packet``); rows 1, 2, 4 or 8 (Constraints, "Row utilization"); feed_flits
    up to the flit buffer (3 only with shift-reuse). ``trf_split`` every split up to 8, then the
    powers of two up to 64 (`rngd.factors.TRF_CANDIDATES`; larger or other splits remain left out,
    see `rngd.trf_splits`). With ``prune`` (the default) slice grids a grid of fewer slices dominates
    are left out (`rngd.slices`, proved there and checked point by point against ``prune=False`` in
    `tests/costmodels/rngd/test_rngd_slices.py`), and so are the splits no row needs (a smaller split
    gives it no more TRF loads and none larger: `rngd.trf_splits`, `rngd.factors.trf_image`; any
    split such a rule dominates fails ``trf-split``, checked in `test_rngd_trf_prune.py`).

    Sizes (points; `tests/costmodels/rngd/test_rngd_slices.py` recomputes the first two), bf16, preset
    rngd; "balanced 2-D only" is the pruned space that split each count of a pair one way (the most
    even factorisation, both orders of the pair; unpruned it had 19,464,192 and 58,392,576 points),
    "splits 2^k" the pruned space before the TRF splits widened (powers of two up to 64):

    ==================================================  ===========  ===========  ===========  ==========  ==========
    problem                                             pruned       unpruned     balanced     splits 2^k  before #12
                                                                                  2-D only
    ==================================================  ===========  ===========  ===========  ==========  ==========
    4096^3 GEMM                                         27,929,088   37,154,304   17,259,264   10,983,168  290,304
    ResNet-50 3x3 conv 64->64 @56, batch 16, padding 1  23,721,984   111,462,912  23,493,888   14,950,656  870,912
    ==================================================  ===========  ===========  ===========  ==========  ==========

    Above the mapper's enumeration limit (2,000,000 points) the search is branch and bound over
    structures, with `RngdTarget.structure_bound` (`rngd.bounds`) as each structure's bound.
    """
    from costmodels.rngd.slices import Stage1, kept_grids  # (they build on rngd.factors, which imports this module)
    from costmodels.rngd.trf_splits import all_splits, kept_splits

    r = roles_of(problem)
    size = {role: int(np.prod([r.sizes[a] for a in r.axes[role]])) for role in ROLES}
    p_full = hw.packet_elements(r.in_dtype)
    free = tuple(x for x in ("b", "m") if r.present(x) and size[x] > 1) or tuple(x for x in ("b", "m") if r.present(x))
    k_choices = tuple(d for d in range(1, p_full + 1) if p_full % d == 0) if free else (p_full,)
    shard = [x for x in ROLES if r.present(x) and size[x] > 1]
    c_roles = tuple(x for x in shard if x in SHARD_ROLES_CLUSTER) or ("b",)
    most = max([size[x] for x in c_roles if x in size] or [1])
    clusters = tuple(range(1, min(hw.clusters, most) + 1))
    rows = tuple(x for x in ROW_CHOICES if x <= hw.rows) if r.present("n") else (1,)
    shift = (False, True) if shift_possible(r.conv) else (False,)
    feeds = tuple(range(1, hw.max_feed_flits + 1)) if shift[-1] else tuple(range(1, min(2, hw.max_feed_flits) + 1))
    s_roles, grids = slice_grids(shard, size, hw.slices_per_cluster)
    trf = all_splits(r)
    if prune:
        stage1 = Stage1(roles=r, grids=grids, clusters=clusters, c_roles=c_roles, s_roles=s_roles, shifts=shift)
        grids = kept_grids(stage1)
        trf = kept_splits(stage1.with_grids(grids), rows)
    # Stage-1 choices first, so that the points the mapper scores in a row (last parameter fastest)
    # share their stage-1 row of the scorer's tables (`rngd.scoring`): gathers stay in cache.
    params = (
        Param(name="clusters", choices=clusters, doc="clusters used"),
        Param(name="cluster_role", choices=c_roles, doc="role sharded over clusters"),
        Param(name="slice_grid", choices=grids, doc="slices a x b per cluster (`grid_code`; dominated grids left out)"),
        Param(name="slice_role", choices=s_roles, doc="role(s) over the slice grid: xy puts x over a and y over b"),
        Param(name="shift", choices=shift, doc="conv shift-reuse of the input window"),
        Param(name="double_buffer", choices=(False, True), doc="TRF FirstHalf/SecondHalf double buffering"),
        Param(name="packet_k", choices=k_choices, doc="K elements per packet (P = K contraction)"),
        Param(name="packet_free", choices=free or ("m",), doc="free role filling the rest of the packet"),
        Param(name="feed_flits", choices=feeds, doc="flits per packet / shift buffer depth"),
        Param(name="inner", choices=("k", "n"), doc="innermost time loop: reduce K or broadcast over N"),
        Param(name="rows", choices=rows, doc="rows (lanes) used, holding N"),
        Param(
            name="trf_split", choices=trf, doc="TRF loads per slice (N chunks; splits a smaller one dominates left out)"
        ),
    )
    return SearchSpace(params=params)
