"""Fast `score_batch` for RNGD: the stage terms tabulated over the space's choices, gathered per point.

Every cost term of a point is fixed by a few of its choices (`rngd_terms`): the shard terms by
the stage-1 choices ``S`` (clusters, cluster_role, slices, slice_role, shift), the packet terms
by ``S`` and ``P`` (packet_k, packet_free, feed_flits, inner), the lane terms by ``S`` and ``L``
(rows, trf_split). `build_tables` evaluates those functions once on the grid ``S x P`` and
``S x L`` of the space's choices (a few thousand rows); `score_columns` maps each column to
choice codes with a lookup table (no per-point Python), gathers the terms of each point and
runs `rngd_cost.combine`, the formula `check` and `cost` use, in cache-sized chunks.

Points whose values are not choices of the space, or columns of a type the lookup does not
read (object arrays, long strings), are left to the generic path (`rngd_cost.evaluate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from costmodels.protocol import Choice, SearchSpace
from costmodels.rngd_cost import combine, point_violations
from costmodels.rngd_factors import Arrays, lane_factors, packet_factors, shard_factors
from costmodels.rngd_hardware import RngdHardware
from costmodels.rngd_space import roles_of
from costmodels.rngd_terms import Consts, consts_of, lane_quantities, packet_quantities, shard_quantities
from workload.problem import Problem

S_PARAMS = ("clusters", "cluster_role", "slices", "slice_role", "shift")
P_PARAMS = ("packet_k", "packet_free", "feed_flits", "inner")
L_PARAMS = ("rows", "trf_split")
NEG = -(1 << 40)  # code of a value that is not a choice: any sum of codes containing it is negative
CHUNK = 1 << 14  # points per pass: the temporaries stay in the core's L2 cache
A_KEYS = ("la", "sflb", "nbc", "lgog", "og", "hld", "kvw", "hb")
WINDOW_KEYS = ("rem", "sdiv", "flb")
N_KEYS = ("tn", "tnhn", "rtnhn", "rhn", "rows", "hn", "kval", "kflag", "dma")
PENALTY = np.array([-np.inf, np.inf])  # fmax with it keeps a value (-inf) or makes it inf
EXACT = float(1 << 53)  # integers below this are exact in float64, and so are their products


@dataclass
class Tables:
    """Stage terms of one problem over the grids ``S x P`` (``qa``) and ``S x L`` (``qn``)."""

    choices: dict[str, tuple[Choice, ...]]
    strides: dict[str, int]  # code multiplier of each parameter inside its grid
    n_p: int
    n_l: int
    consts: Consts
    qa: Arrays
    qn: Arrays
    luts: dict[tuple[str, str, int], np.ndarray | None] = field(default_factory=dict)


def _grid(choices: dict[str, tuple[Choice, ...]], names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Every combination of the named parameters (last fastest), as value columns."""
    shape = tuple(len(choices[nm]) for nm in names)
    digits = np.unravel_index(np.arange(math.prod(shape), dtype=np.int64), shape)
    return {nm: np.asarray(choices[nm])[d] for nm, d in zip(names, digits, strict=True)}


def _strides(choices: dict[str, tuple[Choice, ...]], names: tuple[str, ...]) -> dict[str, int]:
    out, m = {}, 1
    for nm in reversed(names):
        out[nm] = m
        m *= len(choices[nm])
    return out


def build_tables(problem: Problem, hw: RngdHardware, space: SearchSpace) -> Tables | None:
    """Term tables of a supported problem, or None when its points need the generic path."""
    ch = {p.name: p.choices for p in space.params}
    if set(ch) != {*S_PARAMS, *P_PARAMS, *L_PARAMS, "double_buffer"}:
        return None
    r = roles_of(problem)
    g = _grid(ch, S_PARAMS)
    shift_s = g["shift"].astype(bool)
    fs = shard_factors(r, g["clusters"], g["slices"], g["cluster_role"], g["slice_role"], shift_s)
    fs["clusters"], fs["slices"] = g["clusters"], g["slices"]
    qs = shard_quantities(problem, hw, r, fs)
    n_s = len(shift_s)
    # ---- S x P: packet terms ----
    gp = _grid(ch, P_PARAMS)
    n_p = len(gp["packet_k"])
    e2 = {a: np.repeat(fs[f"e2:{a}"], n_p) for a in r.sizes}
    shift_a = np.repeat(shift_s, n_p)
    pa = {nm: np.tile(v, n_s) for nm, v in gp.items()}
    fp = packet_factors(r, hw, e2, pa["packet_k"].astype(np.int64), pa["feed_flits"].astype(np.int64),
                        pa["packet_free"], shift_a)  # fmt: skip
    if any((fp[f"pkt:{a}"] != 1).any() for a in r.axes["n"]):
        return None  # an N axis in the packet: the lane terms would depend on packet choices
    exact = bool((packet_quantities(hw, consts_of(problem, hw, r), r, fp, pa["packet_free"], shift_a,
                                    pa["inner"] == "n")["rem"] != 0).any())  # fmt: skip
    k = consts_of(problem, hw, r, exact_windows=exact)
    qa = packet_quantities(hw, k, r, fp, pa["packet_free"], shift_a, pa["inner"] == "n")
    bad_a = np.repeat(qs["bad:shards"], n_p)
    for key, v in qa.items():
        if key.startswith("bad:"):
            bad_a = bad_a | v
    # ---- S x L: lane terms ----
    gl = _grid(ch, L_PARAMS)
    n_l = len(gl["rows"])
    e2n = {a: np.repeat(fs[f"e2:{a}"], n_l) for a in r.axes["n"]}
    ones = {a: np.ones(n_s * n_l, dtype=np.int64) for a in r.axes["n"]}
    rows, trf = np.tile(gl["rows"], n_s).astype(np.int64), np.tile(gl["trf_split"], n_s).astype(np.int64)
    fl = lane_factors(r, e2n, ones, rows, trf)
    qn = lane_quantities(hw, k, r, fl, {key: np.repeat(v, n_l) for key, v in qs.items()})
    keys_a = A_KEYS + (WINDOW_KEYS if exact else ())
    big_a = max(float(np.max(qa[key])) for key in keys_a)
    big_n = max(float(np.max(qn[key])) for key in N_KEYS if key != "dma")
    if big_a * big_n * (big_a if exact else 1.0) >= EXACT:
        return None  # products could round in float64: the generic integer path keeps every bit
    # A point of a bad S x P or S x L entry costs infinity (la, dma), so only the point-level
    # constraints remain to check per point; its objectives are masked to inf anyway.
    fa = {key: np.where(bad_a, np.inf, qa[key]) if key == "la" else qa[key].astype(float) for key in keys_a}
    fn = {key: np.where(qn["bad:rows"], np.inf, qn[key]) if key == "dma" else qn[key].astype(float) for key in N_KEYS}
    fn.update({key: qn[key] for key in ("offchip", "share_r", "wpen")})
    return Tables(
        choices=ch,
        strides={**_strides(ch, S_PARAMS), **_strides(ch, P_PARAMS), **_strides(ch, L_PARAMS), "double_buffer": 1},
        n_p=n_p,
        n_l=n_l,
        consts=k,
        qa=fa,
        qn=fn,
    )


def _lut(choices: tuple[Choice, ...], stride: int, kind: str, width: int, *, flag: bool) -> np.ndarray | None:
    """Lookup table from a column's raw values to ``index * stride`` (``NEG`` for a non-choice).

    ``kind``/``width``: numpy kind and characters of the column (strings); ``flag``: map a
    bool to 1 for True instead of its index.
    """
    if kind == "b" and all(isinstance(c, bool) for c in choices):
        lut = np.full(2, NEG, dtype=np.int64)
        for i, c in enumerate(choices):
            lut[int(c)] = int(c) if flag else i * stride
        return lut
    if kind == "i" and all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
        ints = [int(c) for c in choices]
        if min(ints) < 1 or max(ints) > 1 << 20:
            return None
        lut = np.full(max(ints) + 2, NEG, dtype=np.int64)  # 0 and values past the largest choice: NEG
        for i, c in enumerate(ints):
            lut[c] = i * stride
        return lut
    if kind == "U" and width <= 2 and all(isinstance(c, str) for c in choices):
        lut = np.full(128**width, NEG, dtype=np.int64)
        for i, c in enumerate(choices):
            s = str(c)
            if len(s) <= width and all(0 < ord(ch) < 127 for ch in s):
                lut[sum(ord(ch) << (7 * j) for j, ch in enumerate(s))] = i * stride
        return lut
    return None


def _codes(t: Tables, name: str, col: np.ndarray) -> np.ndarray | None:
    """Code of each value of a column (``index * stride``; for double_buffer 1 = True), or None."""
    kind = col.dtype.kind
    width = col.dtype.itemsize // 4 if kind == "U" else 0
    key = (name, kind, width)
    if key not in t.luts:
        t.luts[key] = _lut(t.choices[name], t.strides[name], kind, width, flag=name == "double_buffer")
    lut = t.luts[key]
    if lut is None:
        return None
    if kind == "b":
        return lut.take(col.view(np.uint8), mode="clip")
    if kind == "i":
        return lut.take(col, mode="clip")
    chars = np.ascontiguousarray(col).view(np.uint32)
    if chars.size and int(chars.max()) >= 127:
        return None
    key_of = chars if width == 1 else chars[0::2] | (chars[1::2] << 7)
    return lut.take(key_of)


def _all_codes(t: Tables, cols: dict[str, np.ndarray], lo: int, hi: int) -> dict[str, np.ndarray] | None:
    out: dict[str, np.ndarray] = {}
    for nm, v in cols.items():
        c = _codes(t, nm, v[lo:hi])
        if c is None:
            return None
        out[nm] = c
    return out


def _sum(arrs: list[np.ndarray]) -> np.ndarray:
    out = arrs[0]
    for a in arrs[1:]:
        out = out + a
    return out


def score_columns(hw: RngdHardware, t: Tables, columns: dict[str, np.ndarray], n: int) -> Arrays | None:
    """Feasibility and objectives (inf where infeasible) of every point, or None: use the generic path."""
    cols = {nm: np.asarray(columns[nm]).reshape(n) for nm in t.choices}
    feasible = np.empty(n, dtype=bool)
    out = {k: np.empty(n) for k in ("latency", "offchip_bytes", "footprint")}
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        codes = _all_codes(t, cols, lo, hi)
        if codes is None:
            return None
        s, p, ln = (_sum([codes[nm] for nm in names]) for names in (S_PARAMS, P_PARAMS, L_PARAMS))
        dbuf = codes["double_buffer"]
        if min(int(s.min()), int(p.min()), int(ln.min()), int(dbuf.min())) < 0:
            return None
        ia = s * t.n_p + p
        il = s * t.n_l + ln
        qa = {k: v.take(ia) for k, v in t.qa.items()}
        qn = {k: v.take(il) for k, v in t.qn.items()}
        res = combine(hw, t.consts, qa, qn, dbuf)
        bad = ~(res["cycles"] < np.inf)  # a bad S x P or S x L entry made it inf (or nan)
        for m in point_violations(hw, res).values():
            bad |= m
        feasible[lo:hi] = ~bad
        pen = PENALTY.take(bad.view(np.uint8))  # -inf (keep) or inf, branch-free
        np.fmax(res["cycles"] / hw.clock_hz, pen, out=out["latency"][lo:hi])
        np.fmax(res["offchip"], pen, out=out["offchip_bytes"][lo:hi])
        np.fmax(res["footprint"], pen, out=out["footprint"][lo:hi])
    return {"feasible": feasible, **out}
