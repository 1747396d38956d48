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
- ``trf_split``: N chunks per slice, each a separate TRF load; ``double_buffer``: FirstHalf /
  SecondHalf TRF mode.
- ``clusters``/``cluster_role`` and ``slices``/``slice_role``: sharding of one role over each.
- ``feed_flits``: flits per packet (1 or 2) or, with ``shift``, the shift buffer depth (2, 3).
- ``shift``: convolution shift-reuse (conv problems only), as in the conv case studies.

`factors` turns columns of points into per-axis loop factors with numpy, so that one code path
serves `score_batch` and the single-point `mapping` / `check` / `cost`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodels.gemm_view import gemm_view
from costmodels.protocol import Param, SearchSpace
from costmodels.rngd_hardware import ROW_CHOICES, RngdHardware
from workload import dtypes
from workload.conv2d import Conv2dParams, as_conv2d
from workload.problem import Problem

ROLES = ("b", "m", "n", "k")
SHARD_ROLES_CLUSTER = ("b", "m", "n")  # K split across clusters would need the Switch Engine ring
Cols = dict[str, np.ndarray]


@dataclass(frozen=True)
class Roles:
    """Axes of each GEMM role (outer to inner) and facts of the problem the planner needs."""

    axes: dict[str, tuple[str, ...]]
    sizes: dict[str, int]
    in_dtype: str  # the wider input dtype sets the packet element count
    conv: Conv2dParams | None

    def role_of(self, axis: str) -> str:
        return next(r for r, ax in self.axes.items() if axis in ax)

    def present(self, role: str) -> bool:
        return bool(self.axes[role])


def roles_of(problem: Problem) -> Roles:
    """GEMM roles of a binary problem."""
    gv = gemm_view(problem)
    ins = [o.dtype for o in problem.inputs]
    wide = max(ins, key=lambda d: dtypes.info(d).bits)
    axes = {"b": gv.batch_axes, "m": gv.m_axes, "n": gv.n_axes, "k": gv.k_axes}
    return Roles(axes=axes, sizes=dict(problem.axes), in_dtype=wide, conv=as_conv2d(problem))


def shift_possible(conv: Conv2dParams | None) -> bool:
    """Shift-reuse applies to convs whose width stride and dilation the stream adapter can express."""
    if conv is None or conv.kernel[1] < 2:
        return False
    sw, dw = conv.stride[1], conv.dilation[1]
    return sw == 1 or dw == 1 or dw % sw == 0


def _pow2_upto(limit: int) -> tuple[int, ...]:
    out = [1]
    while out[-1] * 2 <= limit:
        out.append(out[-1] * 2)
    return tuple(out)


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def build_space(problem: Problem, hw: RngdHardware) -> SearchSpace:
    """The finite mapping space of a binary problem."""
    r = roles_of(problem)
    size = {role: int(np.prod([r.sizes[a] for a in r.axes[role]])) for role in ROLES}
    p_full = hw.packet_elements(r.in_dtype)
    free = tuple(x for x in ("b", "m") if r.present(x) and size[x] > 1) or tuple(x for x in ("b", "m") if r.present(x))
    k_choices = _pow2_upto(p_full) if free else (p_full,)
    shard = [x for x in ROLES if r.present(x) and size[x] > 1]
    c_roles = tuple(x for x in shard if x in SHARD_ROLES_CLUSTER) or ("b",)
    pairs = tuple(a + b for i, a in enumerate(shard) for b in shard[i + 1 :])
    s_roles = (*shard, *pairs) or ("b",)
    biggest = max([size[x] for x in shard] or [1])
    slices = _pow2_upto(min(hw.slices_per_cluster, _next_pow2(biggest)))
    clusters = _pow2_upto(min(hw.clusters, _next_pow2(max([size[x] for x in c_roles if x in size] or [1]))))
    rows = tuple(x for x in ROW_CHOICES if x <= hw.rows) if r.present("n") else (1,)
    trf = _pow2_upto(min(64, _next_pow2(size["n"]))) if r.present("n") else (1,)
    shift = (False, True) if shift_possible(r.conv) else (False,)
    feeds = tuple(range(1, hw.max_feed_flits + 1)) if shift[-1] else tuple(range(1, min(2, hw.max_feed_flits) + 1))
    params = (
        Param(name="packet_k", choices=k_choices, doc="K elements per packet (P = K contraction)"),
        Param(name="packet_free", choices=free or ("m",), doc="free role filling the rest of the packet"),
        Param(name="rows", choices=rows, doc="rows (lanes) used, holding N"),
        Param(name="inner", choices=("k", "n"), doc="innermost time loop: reduce K or broadcast over N"),
        Param(name="trf_split", choices=trf, doc="TRF loads per slice (N chunks)"),
        Param(name="double_buffer", choices=(False, True), doc="TRF FirstHalf/SecondHalf double buffering"),
        Param(name="clusters", choices=clusters, doc="clusters used"),
        Param(name="cluster_role", choices=c_roles, doc="role sharded over clusters"),
        Param(name="slices", choices=slices, doc="slices used per cluster"),
        Param(name="slice_role", choices=s_roles, doc="role(s) sharded over slices; two letters split them 2D"),
        Param(name="feed_flits", choices=feeds, doc="flits per packet / shift buffer depth"),
        Param(name="shift", choices=shift, doc="conv shift-reuse of the input window"),
    )
    return SearchSpace(params=params)


def _take(sizes: list[np.ndarray], f: np.ndarray, *, inner: bool) -> list[np.ndarray]:
    """Split factor `f` over axes of the given extents (outer to inner), from the inner or outer end.

    An axis that is at least the remaining factor takes all of it; a smaller axis that divides the
    remaining factor is taken whole; otherwise the axis takes the whole remaining factor, padded.
    """
    out = [np.ones_like(f) for _ in sizes]
    rem = f.copy()
    order = range(len(sizes) - 1, -1, -1) if inner else range(len(sizes))
    for i in order:
        s = sizes[i]
        done = rem <= 1
        big = s >= rem
        div = (rem % np.maximum(s, 1)) == 0
        take = np.where(done, 1, np.where(big, rem, np.where(div, s, rem)))
        out[i] = take
        rem = np.where(done | big | ~div, 1, rem // np.maximum(s, 1))
    return out


def _ceil(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return -(-a // b)


def slice_factor(rs: np.ndarray, s: np.ndarray, role: str) -> np.ndarray:
    """Slices given to `role`: all of them, or for a two-role choice the larger / smaller half."""
    first = 1 << ((np.log2(np.maximum(s, 1)).astype(np.int64) + 1) // 2)
    out = np.where(rs == role, s, 1)
    for other in ROLES:
        if other != role:
            out = np.where(rs == role + other, first, out)
            out = np.where(rs == other + role, s // first, out)
    return out


def column_ints(cols: Cols, name: str, n: int) -> np.ndarray:
    return np.asarray(cols[name], dtype=np.int64).reshape(n)


def factors(problem: Problem, hw: RngdHardware, cols: Cols) -> dict[str, np.ndarray]:
    """Per-axis loop factors of every point: keys ``<level>:<axis>`` plus point columns.

    Levels: ``cl`` (clusters), ``sl`` (slices), ``t`` (TRF chunks, N only), ``h`` (remaining
    H / time loop), ``row``, ``pkt`` (packet), and for shift-reuse ``z`` (zero slots per group).
    """
    r = roles_of(problem)
    n = len(next(iter(cols.values())))
    out: dict[str, np.ndarray] = {}
    shift = np.asarray(cols["shift"], dtype=bool).reshape(n)
    feed = column_ints(cols, "feed_flits", n)
    bits = dtypes.info(r.in_dtype).bits
    full = hw.packet_bytes // hw.flit_bytes
    p_el = np.minimum(feed, full) * hw.flit_bytes * 8 // bits
    pk = column_ints(cols, "packet_k", n)
    pf = np.maximum(p_el // pk, 1)
    role_p = np.asarray(cols["packet_free"]).reshape(n)
    rows = column_ints(cols, "rows", n)
    c, s = column_ints(cols, "clusters", n), column_ints(cols, "slices", n)
    rc, rs = np.asarray(cols["cluster_role"]).reshape(n), np.asarray(cols["slice_role"]).reshape(n)
    trf = column_ints(cols, "trf_split", n)
    sz = {a: np.full(n, v, dtype=np.int64) for a, v in r.sizes.items()}
    conv = r.conv
    fixed_shift = ("fw",) if conv is not None else ()
    e1 = dict(sz)
    for a in sz:
        out[f"cl:{a}"] = np.ones(n, dtype=np.int64)
        out[f"sl:{a}"] = np.ones(n, dtype=np.int64)
    for role in ROLES:
        axes = list(r.axes[role])
        if not axes:
            continue
        got = _take([sz[a] for a in axes], c, inner=False)
        for a, f in zip(axes, got, strict=True):
            out[f"cl:{a}"] = np.where(rc == role, f, 1)
            e1[a] = _ceil(sz[a], out[f"cl:{a}"])
        # shift-reuse keeps the filter width whole in the slice (it is the shift loop)
        s_role = slice_factor(rs, s, role)
        plain = _take([e1[a] for a in axes], s_role, inner=False)
        sh_axes = [a for a in axes if a not in fixed_shift]
        shifted = _take([e1[a] for a in sh_axes], s_role, inner=False) if sh_axes else []
        sh_map = dict(zip(sh_axes, shifted, strict=True))
        for a, f in zip(axes, plain, strict=True):
            alt = sh_map.get(a, np.ones(n, dtype=np.int64))
            out[f"sl:{a}"] = np.where(shift, alt, f)
    e2 = {a: _ceil(e1[a], out[f"sl:{a}"]) for a in sz}
    for a in sz:
        out[f"pkt:{a}"] = np.ones(n, dtype=np.int64)
        out[f"row:{a}"] = np.ones(n, dtype=np.int64)
        out[f"t:{a}"] = np.ones(n, dtype=np.int64)
        out[f"z:{a}"] = np.ones(n, dtype=np.int64)
    kx = list(r.axes["k"])
    if kx:
        for a, f in zip(kx, _take([e2[a] for a in kx], pk, inner=True), strict=True):
            out[f"pkt:{a}"] = f
    for role in ("b", "m"):
        ax = list(r.axes[role])
        if ax:
            for a, f in zip(ax, _take([e2[a] for a in ax], pf, inner=True), strict=True):
                out[f"pkt:{a}"] = np.where(role_p == role, f, out[f"pkt:{a}"])
    nx = list(r.axes["n"])
    if nx:
        for a, f in zip(nx, _take([e2[a] for a in nx], rows, inner=True), strict=True):
            out[f"row:{a}"] = f
    rem = {a: _ceil(e2[a], out[f"pkt:{a}"] * out[f"row:{a}"]) for a in sz}
    if conv is not None:
        _shift_packet(conv, hw, r.in_dtype, feed, shift, e2, out, rem)
    if nx:
        for a, f in zip(nx, _take([rem[a] for a in nx], trf, inner=False), strict=True):
            out[f"t:{a}"] = f
            rem[a] = _ceil(rem[a], f)
    for a in sz:
        out[f"h:{a}"] = rem[a]
    out["p_el"], out["pk"], out["pf"] = p_el, pk, pf
    out["feed"], out["rows"], out["shift"] = feed, rows, shift.astype(np.int64)
    out["clusters"], out["slices"], out["trf"] = c, s, trf
    for name in ("e2",):
        for a in sz:
            out[f"{name}:{a}"] = e2[a]
    return out


def shift_geometry(conv: Conv2dParams, hw: RngdHardware, dtype: str, feed: np.ndarray) -> dict[str, np.ndarray]:
    """Shift-reuse geometry of the conv case studies (contraction-engine-rngd.txt, 2D Convolution).

    Returns group size G (packet slots per output: the stride), shift count and stride, the W
    slots of a packet, the valid W per window ``w_v`` and the window span of ``w`` outputs.
    Stride 1: G=1, shifts=Fw, shift stride = dilation. Stride s, dilation 1: the packet holds
    ``(W, Fw=s)`` pairs, shifts = ceil(Fw/s) with shift stride s. Stride s, dilation d (d % s == 0):
    the packet holds ``(W, 1+(s-1)z)``, shifts = Fw with shift stride d.
    """
    fw, sw, dw = conv.kernel[1], conv.stride[1], conv.dilation[1]
    bits = dtypes.info(dtype).bits
    g = sw
    if sw == 1:
        shifts, ss, zero = fw, dw, 1
    elif dw == 1:
        shifts, ss, zero = -(-fw // sw), sw, 1
    else:
        shifts, ss, zero = fw, dw, sw
    p_el = (hw.packet_bytes * 8) // bits
    cap = feed * hw.flit_bytes * 8 // bits  # elements the shift buffer holds
    slots = p_el // g
    extra = (shifts - 1) * ss + g - sw
    w_v = np.minimum(slots, (cap - extra - g) // sw + 1)
    return {
        "G": np.full_like(feed, g),
        "shifts": np.full_like(feed, shifts),
        "shift_stride": np.full_like(feed, ss),
        "zero": np.full_like(feed, zero),
        "slots": np.full_like(feed, slots),
        "w_v": w_v,
        "extra": np.full_like(feed, extra),
        "cap": cap,
    }


def _shift_packet(
    conv: Conv2dParams,
    hw: RngdHardware,
    dtype: str,
    feed: np.ndarray,
    shift: np.ndarray,
    e2: dict[str, np.ndarray],
    out: dict[str, np.ndarray],
    rem: dict[str, np.ndarray],
) -> None:
    """Overwrite packet factors for shift-reuse points: W (and Fw pairs or a zero slot) in the packet."""
    geo = shift_geometry(conv, hw, dtype, feed)
    w_pkt = np.maximum(np.minimum(geo["w_v"], e2["ow"]), 1)
    pair = (geo["G"] > 1) & (geo["zero"] == 1)
    fw_pkt = np.where(pair, geo["G"], 1)
    for a in e2:
        pk = np.where(a == "ow", w_pkt, np.where(a == "fw", fw_pkt, 1))
        out[f"pkt:{a}"] = np.where(shift, pk, out[f"pkt:{a}"])
        base = _ceil(e2[a], out[f"pkt:{a}"] * out[f"row:{a}"])
        rem[a] = np.where(shift, base, rem[a])
    out["z:fw"] = np.where(shift, geo["zero"], 1)
    for key, v in geo.items():
        out[f"geo:{key}"] = v
