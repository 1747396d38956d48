"""Per-axis loop factors of RNGD points, in three stages that depend on disjoint groups of choices.

A point's loop nest (see `rngd.mapping`) is fixed by per-axis factors ``<level>:<axis>``:
``cl`` (clusters), ``sl`` (slices), ``pkt`` (packet), ``z`` (zero slots of a shift-reuse
group), ``row`` (rows, N only), ``t`` (TRF chunks, N only) and ``h`` (the remaining H / time
loop). They are computed in stages, each from a few of the point's choices:

1. `shard_factors` (clusters, cluster_role, slice_grid, slice_role, shift): ``cl``, ``sl`` and the
   extent ``e2`` of every axis left to one slice;
2. `packet_factors` (``e2``, packet_k, packet_free, feed_flits, shift): ``pkt``, ``z``, the
   shift-reuse geometry ``geo:*``, and ``h`` of the axes that are not N;
3. `lane_factors` (``e2`` and ``pkt`` of the N axes, rows, trf_split): ``row``, ``t`` and ``h``
   of the N axes.

`factors` chains them over columns of points (any length); the batch scorer (`rngd.scoring`) runs
the same stages once over the grid of each stage's choices and gathers, so both paths share
one formula.
"""

from __future__ import annotations

import math

import numpy as np

from costmodels.rngd.hardware import RngdHardware
from costmodels.rngd.space import ROLES, Cols, Roles, grid_parts, roles_of
from workload import dtypes
from workload.conv2d import Conv2dParams
from workload.problem import Problem

Arrays = dict[str, np.ndarray]


def spread_factor(sizes: list[np.ndarray], f: np.ndarray, *, inner: bool) -> list[np.ndarray]:
    """Split factor `f` over axes of the given extents (outer to inner), from the inner or outer end.

    An axis that is at least the remaining factor takes all of it; a smaller axis that divides the
    remaining factor is taken whole; otherwise the axis takes the whole remaining factor, padded.
    """
    order = list(range(len(sizes) - 1, -1, -1) if inner else range(len(sizes)))
    out: list[np.ndarray | None] = [None] * len(sizes)
    rem = f
    for i in order:
        if not (rem > 1).any():  # the whole factor placed: every axis left takes 1
            break
        s = sizes[i]
        done = rem <= 1
        big = s >= rem
        quot, left = np.divmod(rem, np.maximum(s, 1))
        div = left == 0
        out[i] = np.where(done, 1, np.where(big, rem, np.where(div, s, rem)))
        rem = np.where(done | big | ~div, 1, quot)
    return [np.ones_like(f) if o is None else o for o in out]  # (an axis the factor does not reach takes 1)


def _ceil(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return -(-a // b)


def slice_factor(rs: np.ndarray, g: np.ndarray, role: str) -> np.ndarray:
    """Slices given to `role` by the slice grid codes `g` (`rngd.space.grid_code`: ``a x b``) and roles `rs`.

    A two-role choice ``xy`` gives ``x`` the grid's ``a`` and ``y`` its ``b`` (either order of the
    letters reads the same way, so ``"nm"`` with ``a x b`` is ``"mn"`` with ``b x a``); a one-role
    choice gives its role every slice, ``a * b``.
    """
    a, b = grid_parts(g)
    out = np.where(rs == role, a * b, 1)
    for other in ROLES:
        if other != role:
            out = np.where(rs == role + other, a, out)
            out = np.where(rs == other + role, b, out)
    return out


def column_ints(cols: Cols, name: str, n: int) -> np.ndarray:
    return np.asarray(cols[name], dtype=np.int64).reshape(n)


def shard_factors(r: Roles, c: np.ndarray, g: np.ndarray, rc: np.ndarray, rs: np.ndarray, shift: np.ndarray) -> Arrays:
    """Stage 1: cluster and slice factors of every axis, and the extent ``e2:<axis>`` one slice keeps.

    ``g`` holds slice grid codes (`rngd.space.grid_code`), ``rs`` the slice roles (`slice_factor`).
    """
    n = len(c)
    sz = {a: np.full(n, v, dtype=np.int64) for a, v in r.sizes.items()}
    fixed_shift = ("fw",) if r.conv is not None else ()
    out: Arrays = {}
    e1 = dict(sz)
    for a in sz:
        out[f"cl:{a}"] = np.ones(n, dtype=np.int64)
        out[f"sl:{a}"] = np.ones(n, dtype=np.int64)
    for role in ROLES:
        axes = list(r.axes[role])
        if not axes:
            continue
        got = spread_factor([sz[a] for a in axes], c, inner=False)
        for a, f in zip(axes, got, strict=True):
            out[f"cl:{a}"] = np.where(rc == role, f, 1)
            e1[a] = _ceil(sz[a], out[f"cl:{a}"])
        # shift-reuse keeps the filter width whole in the slice (it is the shift loop)
        s_role = slice_factor(rs, g, role)
        plain = spread_factor([e1[a] for a in axes], s_role, inner=False)
        sh_axes = [a for a in axes if a not in fixed_shift]
        shifted = spread_factor([e1[a] for a in sh_axes], s_role, inner=False) if sh_axes else []
        sh_map = dict(zip(sh_axes, shifted, strict=True))
        for a, f in zip(axes, plain, strict=True):
            alt = sh_map.get(a, np.ones(n, dtype=np.int64))
            out[f"sl:{a}"] = np.where(shift, alt, f)
    for a in sz:
        out[f"e2:{a}"] = _ceil(e1[a], out[f"sl:{a}"])
    return out


def packet_factors(
    r: Roles,
    hw: RngdHardware,
    e2: dict[str, np.ndarray],
    pk: np.ndarray,
    feed: np.ndarray,
    role_p: np.ndarray,
    shift: np.ndarray,
) -> Arrays:
    """Stage 2: packet factors (and shift-reuse geometry) of every axis, ``h`` of the axes that are not N."""
    n = len(pk)
    bits = dtypes.info(r.in_dtype).bits
    full = hw.packet_bytes // hw.flit_bytes
    p_el = np.minimum(feed, full) * hw.flit_bytes * 8 // bits
    pf = np.maximum(p_el // pk, 1)
    out: Arrays = {"p_el": p_el, "pk": pk, "pf": pf, "feed": feed, "shift": shift.astype(np.int64)}
    for a in e2:
        out[f"pkt:{a}"] = np.ones(n, dtype=np.int64)
        out[f"z:{a}"] = np.ones(n, dtype=np.int64)
    kx = list(r.axes["k"])
    if kx:
        for a, f in zip(kx, spread_factor([e2[a] for a in kx], pk, inner=True), strict=True):
            out[f"pkt:{a}"] = f
    for role in ("b", "m"):
        ax = list(r.axes[role])
        if ax:
            for a, f in zip(ax, spread_factor([e2[a] for a in ax], pf, inner=True), strict=True):
                out[f"pkt:{a}"] = np.where(role_p == role, f, out[f"pkt:{a}"])
    if r.conv is not None:
        _shift_packet(r.conv, hw, r.in_dtype, feed, shift, e2, out)
    for a in e2:
        if a not in r.axes["n"]:
            out[f"h:{a}"] = _ceil(e2[a], out[f"pkt:{a}"])
    return out


def lane_factors(
    r: Roles, e2: dict[str, np.ndarray], pkt: dict[str, np.ndarray], rows: np.ndarray, trf: np.ndarray
) -> Arrays:
    """Stage 3: rows, TRF chunks and the remaining H loop of the N axes (``pkt`` of the N axes given).

    ``trf_image`` is the smallest split that is at least as good as ``trf_split`` (`trf_image`);
    ``trf_padding_only`` marks a split whose image is smaller: it is pruned (violation ``trf-split``).
    """
    out: Arrays = {
        "rows": rows,
        "trf": trf,
        "trf_image": trf.copy(),
        "trf_padding_only": np.zeros(len(trf), dtype=bool),
    }
    nx = list(r.axes["n"])
    if not nx:
        return out
    got = spread_factor([e2[a] for a in nx], rows, inner=True)
    rem = {a: _ceil(e2[a], pkt[a] * f) for a, f in zip(nx, got, strict=True)}
    for a, f in zip(nx, got, strict=True):
        out[f"row:{a}"] = f
    t, h = trf_loads([rem[a] for a in nx], trf)
    for a, ta, ha in zip(nx, t, h, strict=True):
        out[f"t:{a}"] = ta
        out[f"h:{a}"] = ha
    out["trf_image"] = trf_image([rem[a] for a in nx], trf)
    out["trf_padding_only"] = out["trf_image"] < trf
    return out


def trf_loads(rem: list[np.ndarray], trf: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """TRF chunks ``t`` and N groups per chunk ``h`` of each N axis (extents `rem` per row) for `trf` chunks."""
    t = spread_factor(rem, trf, inner=False)
    return t, [_ceil(x, f) for x, f in zip(rem, t, strict=True)]


#: every split a point's image is searched among (`trf_image`): every integer up to `TRF_DENSE`,
#: then the powers of two up to `TRF_LIMIT` (issue #12; the space of issue #13 had the powers of two)
TRF_DENSE = 8
TRF_LIMIT = 64
TRF_CANDIDATES = (*range(1, TRF_DENSE + 1), *(1 << i for i in range(TRF_DENSE.bit_length(), 7) if 1 << i <= TRF_LIMIT))


def trf_image(rem: list[np.ndarray], trf: np.ndarray) -> np.ndarray:
    """The smallest candidate split ``t' <= trf_split`` (`TRF_CANDIDATES`) whose TRF loads ``tn'`` and
    N groups per load ``hn'`` are no larger than the point's (``tn``, ``hn``: products over the N
    axes of `trf_loads`); the split itself when no smaller candidate qualifies.

    Dominance (issue #12; it generalises "half the split" of issue #13): the TRF split enters the
    RNGD cost only through ``tn`` and ``hn`` (and their products), and every cost term, objective
    and constraint is non-decreasing in each (`rngd.cost.combine`: packets ``la * tn * hn``, stream
    ``tn * max(hn * nbc, 1)``, drain ``rows * tn * hn``, the last group's drain ``hn``, TRF tile,
    working set and one fill ``rows * hn``, all fills ``tn * rows * hn``, HBM bytes ``tn`` when
    streaming, accumulator cells ``hn``; energy from those bytes; the totals are sums, products of
    non-negative terms and maxima; the TRF-capacity, accumulator and DM constraints are upper limits
    on them). So a point whose image ``t'`` is smaller than its split is matched or beaten on every
    objective by the point with ``trf_split = t'`` (the other choices the same), which is feasible
    whenever it is: the larger split only adds padding (dummy N chunks) or repeats a smaller split's
    loads. The image is its own image (a smaller candidate dominating it would dominate the point
    too, the order being transitive), so it is never pruned, and the space offers it: the space's
    splits are the candidates that are their own image for some row (`rngd.trf_splits`), and the
    image is a candidate. `tests/costmodels/rngd/test_rngd_trf_prune.py` checks this point by point
    against the space of every candidate, and the image against a search over every smaller candidate.

    Computed on the distinct (extents, split) rows, one pass per candidate below the largest split.
    """
    trf = np.asarray(trf, dtype=np.int64)
    if len(trf) == 0:
        return trf.copy()
    if len(rem) == 1:
        return _one_axis_image(np.asarray(rem[0], dtype=np.int64), trf)
    cols = [np.asarray(x, dtype=np.int64) for x in (*rem, trf)]
    u_cols, inv = distinct_rows(cols)
    u_rem, u_trf = u_cols[:-1], u_cols[-1]
    t, h = trf_loads(u_rem, u_trf)
    tn, hn = np.prod(np.stack(t), axis=0), np.prod(np.stack(h), axis=0)
    image = u_trf.copy()
    for c in TRF_CANDIDATES:
        if c >= int(u_trf.max()):
            break
        tc, hc = trf_loads(u_rem, np.full_like(u_trf, c))
        better = (image == u_trf) & (c < u_trf)
        better &= (np.prod(np.stack(tc), axis=0) <= tn) & (np.prod(np.stack(hc), axis=0) <= hn)
        image = np.where(better, c, image)
    return image[inv]


def _one_axis_image(big: np.ndarray, trf: np.ndarray) -> np.ndarray:
    """`trf_image` of one N axis of extent ``R`` (`big`) per row, without a search.

    ``t <= R``: ``tn = t``, ``hn = ceil(R / t)``; a candidate ``c < t`` qualifies when ``ceil(R / c) <=
    hn``, that is ``c >= ceil(R / hn)``: the image is the smallest candidate at least that (``t`` if none
    is below ``t``). ``t > R``: ``hn = 1`` and ``tn = R`` when ``R`` divides ``t``, else ``t``; a candidate
    ``c`` in ``[R, t)`` has ``hn = 1`` and ``tn = R`` (``R`` divides ``c``) or ``c``: the image is the
    smallest candidate in ``[R, t)``, a multiple of ``R`` when ``tn = R``.
    """
    cand = np.asarray(TRF_CANDIDATES, dtype=np.int64)
    big = np.maximum(big, 1)
    t = np.maximum(trf, 1)
    hn = _ceil(big, np.minimum(t, big))
    first = cand[np.minimum(np.searchsorted(cand, _ceil(big, hn)), len(cand) - 1)]
    first = np.where(first >= _ceil(big, hn), first, t)  # (no candidate at least the bound: keep t)
    image = np.where(first < t, first, t)
    whole = (t > big) & (t % big == 0)  # tn = R: only a multiple of R in [R, t) matches it
    at = np.flatnonzero(whole)
    if len(at):
        b, tw = big[at], t[at]
        mult = tw.copy()
        for c in cand[::-1]:
            mult = np.where((c >= b) & (c % b == 0) & (c < tw), c, mult)
        image[at] = mult
    return np.where(trf < 1, trf, image)


def distinct_rows(cols: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct rows of equal-length non-negative integer columns, and each row's index among them.

    One sort of a mixed-radix key when it fits in 62 bits (the tables' case), else a row-wise unique.
    """
    radix = [int(c.max(initial=0)) + 1 for c in cols]
    if math.prod(radix) < 1 << 62 and all(int(c.min(initial=0)) >= 0 for c in cols):
        key = np.zeros(len(cols[0]), dtype=np.int64)
        for c, b in zip(cols, radix, strict=True):
            key = key * b + c
        u_key, inv = np.unique(key, return_inverse=True)
        out = []
        for b in reversed(radix):
            out.append(u_key % b)
            u_key = u_key // b
        return out[::-1], inv.reshape(-1)
    uniq, inv = np.unique(np.column_stack(cols), axis=0, return_inverse=True)
    return [uniq[:, i] for i in range(len(cols))], inv.reshape(-1)


def factors(problem: Problem, hw: RngdHardware, cols: Cols) -> Arrays:
    """Per-axis loop factors of every point: keys ``<level>:<axis>`` plus point columns.

    Levels: ``cl`` (clusters), ``sl`` (slices), ``t`` (TRF chunks, N only), ``h`` (remaining
    H / time loop), ``row``, ``pkt`` (packet), and for shift-reuse ``z`` (zero slots per group).
    """
    r = roles_of(problem)
    n = len(next(iter(cols.values())))
    shift = np.asarray(cols["shift"], dtype=bool).reshape(n)
    c, g = column_ints(cols, "clusters", n), column_ints(cols, "slice_grid", n)
    rc, rs = np.asarray(cols["cluster_role"]).reshape(n), np.asarray(cols["slice_role"]).reshape(n)
    out = shard_factors(r, c, g, rc, rs, shift)
    e2 = {a: out[f"e2:{a}"] for a in r.sizes}
    pk, feed = column_ints(cols, "packet_k", n), column_ints(cols, "feed_flits", n)
    out.update(packet_factors(r, hw, e2, pk, feed, np.asarray(cols["packet_free"]).reshape(n), shift))
    rows, trf = column_ints(cols, "rows", n), column_ints(cols, "trf_split", n)
    out.update(lane_factors(r, e2, {a: out[f"pkt:{a}"] for a in r.axes["n"]}, rows, trf))
    ones = np.ones(n, dtype=np.int64)
    for a in r.sizes:
        out.setdefault(f"row:{a}", ones)
        out.setdefault(f"t:{a}", ones)
    ga, gb = grid_parts(g)
    out["clusters"], out["slices"] = c, ga * gb
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
    out: Arrays,
) -> None:
    """Overwrite packet factors for shift-reuse points: W (and Fw pairs or a zero slot) in the packet."""
    geo = shift_geometry(conv, hw, dtype, feed)
    w_pkt = np.maximum(np.minimum(geo["w_v"], e2["ow"]), 1)
    pair = (geo["G"] > 1) & (geo["zero"] == 1)
    fw_pkt = np.where(pair, geo["G"], 1)
    for a in e2:
        pk = np.where(a == "ow", w_pkt, np.where(a == "fw", fw_pkt, 1))
        out[f"pkt:{a}"] = np.where(shift, pk, out[f"pkt:{a}"])
    out["z:fw"] = np.where(shift, geo["zero"], 1)
    for key, v in geo.items():
        out[f"geo:{key}"] = v
