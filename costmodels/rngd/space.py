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
- ``clusters``/``cluster_role`` and ``slices``/``slice_role``: sharding of one role over each.
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


def build_space(problem: Problem, hw: RngdHardware, *, prune: bool = True) -> SearchSpace:
    """The mapping space of a binary problem: every legal choice, less those a proved rule dominates.

    Legal choices (issue #12): every slice count of a cluster, 1 to ``slices_per_cluster``
    (hardware-facts.md §1.1: 256 slices per cluster), and every cluster count; each role over the
    slices alone, or two roles split 2-D in both orientations (`rngd.factors.balanced_first`);
    ``packet_k`` every divisor of the packet (the power-of-two element count has no others:
    contraction-engine-rngd.txt, "Mixed configurations" via the packet reducer's groups; a
    non-divisor fails ``packet``); rows 1, 2, 4 or 8 (Constraints, "Row utilization"); feed_flits
    up to the flit buffer (3 only with shift-reuse). ``trf_split`` every split up to 8, then the
    powers of two up to 64 (`rngd.factors.TRF_CANDIDATES`; larger or other splits remain left out,
    see `rngd.trf_splits`). With ``prune`` (the default) slice counts a smaller count dominates are
    left out (`rngd.slices`, proved there and checked point by point against ``prune=False`` in
    `tests/costmodels/rngd/test_rngd_slices.py`), and so are the splits no row needs (a smaller split
    gives it no more TRF loads and none larger: `rngd.trf_splits`, `rngd.factors.trf_image`; any
    split such a rule dominates fails ``trf-split``, checked in `test_rngd_trf_prune.py`).

    Sizes (points; `tests/costmodels/rngd/test_rngd_slices.py` recomputes the first two), bf16, preset
    rngd; "splits 2^k" is the pruned space before the splits widened (powers of two up to 64):

    ====================================================  ===========  ===========  ==========  ==========
    problem                                               pruned       unpruned     splits 2^k  before #12
    ====================================================  ===========  ===========  ==========  ==========
    4096^3 GEMM                                           17,259,264   19,464,192   10,983,168  290,304
    ResNet-50 3x3 conv 64->64 @56, batch 16, padding 1    23,493,888   58,392,576   14,950,656  870,912
    ====================================================  ===========  ===========  ==========  ==========

    Above the mapper's enumeration limit (2,000,000 points) the search is branch and bound over
    structures, with `RngdTarget.structure_bound` (`rngd.bounds`) as each structure's bound.
    """
    from costmodels.rngd.slices import kept_counts  # (they build on rngd.factors, which imports this module)
    from costmodels.rngd.trf_splits import all_splits, kept_splits

    r = roles_of(problem)
    size = {role: int(np.prod([r.sizes[a] for a in r.axes[role]])) for role in ROLES}
    p_full = hw.packet_elements(r.in_dtype)
    free = tuple(x for x in ("b", "m") if r.present(x) and size[x] > 1) or tuple(x for x in ("b", "m") if r.present(x))
    k_choices = tuple(d for d in range(1, p_full + 1) if p_full % d == 0) if free else (p_full,)
    shard = [x for x in ROLES if r.present(x) and size[x] > 1]
    c_roles = tuple(x for x in shard if x in SHARD_ROLES_CLUSTER) or ("b",)
    pairs = tuple(a + b for a in shard for b in shard if a != b)
    s_roles = (*shard, *pairs) or ("b",)
    biggest = max([size[x] for x in shard] or [1])
    most = max([size[x] for x in c_roles if x in size] or [1])
    clusters = tuple(range(1, min(hw.clusters, most) + 1))
    rows = tuple(x for x in ROW_CHOICES if x <= hw.rows) if r.present("n") else (1,)
    shift = (False, True) if shift_possible(r.conv) else (False,)
    feeds = tuple(range(1, hw.max_feed_flits + 1)) if shift[-1] else tuple(range(1, min(2, hw.max_feed_flits) + 1))
    # a count above every role's extent (or above their product for a 2-D split) only pads: it is dominated
    top = min(hw.slices_per_cluster, biggest * (max(sorted(size[x] for x in shard)[-2:-1] or [1])))
    slices = tuple(range(1, max(top, 1) + 1))
    trf = all_splits(r)
    if prune:
        slices = kept_counts(r, slices, clusters, c_roles, s_roles, shift)
        trf = kept_splits(r, slices, clusters, c_roles, s_roles, shift, rows)
    # Stage-1 choices first, so that the points the mapper scores in a row (last parameter fastest)
    # share their stage-1 row of the scorer's tables (`rngd.scoring`): gathers stay in cache.
    params = (
        Param(name="clusters", choices=clusters, doc="clusters used"),
        Param(name="cluster_role", choices=c_roles, doc="role sharded over clusters"),
        Param(name="slices", choices=slices, doc="slices used per cluster (any count; dominated counts left out)"),
        Param(name="slice_role", choices=s_roles, doc="role(s) sharded over slices; two letters split them 2-D"),
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
