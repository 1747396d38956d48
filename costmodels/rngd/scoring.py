"""Fast scoring for RNGD: the stage terms tabulated over the space's choices, gathered per point by code.

Every cost term of a point is fixed by a few of its choices (`rngd.terms`): the shard terms by
the stage-1 choices ``S`` (clusters, cluster_role, slice_grid, slice_role, shift), the packet terms
by ``S`` and ``P`` (packet_k, packet_free, feed_flits, inner), the lane terms by ``S`` and ``L``
(rows, trf_split). `build_tables` evaluates those functions once on the grids ``S x P`` and
``S x L`` of the space's choices (the packet terms once per distinct slice extents and shift of the S
rows, a few hundred to a few thousand, then copied to every S row); `score_codes` turns each point's choice
codes straight into its two grid rows (sums of ``code * stride``), gathers its terms and runs
`rngd.cost.combine`, the formula `check` and `cost` use, in cache-sized chunks.

`build_tables` returns None when the tables could not give the per-point formulas' bits (loop
products past 2**53, an N axis in the packet); the target then scores with `rngd.cost.evaluate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from costmodels.energy import EnergyPricer, pricer
from costmodels.protocol import Choice, SearchSpace
from costmodels.rngd.cost import combine, point_violations
from costmodels.rngd.energy import level_bytes
from costmodels.rngd.factors import Arrays, distinct_rows, lane_factors, packet_factors, shard_factors
from costmodels.rngd.hardware import ENERGY_LEVELS, RngdHardware
from costmodels.rngd.space import grid_parts, roles_of
from costmodels.rngd.terms import Consts, consts_of, lane_quantities, packet_quantities, shard_quantities
from workload.problem import Problem

S_PARAMS = ("clusters", "cluster_role", "slice_grid", "slice_role", "shift")
P_PARAMS = ("packet_k", "packet_free", "feed_flits", "inner")
L_PARAMS = ("rows", "trf_split")
CHUNK = 1 << 13  # points per pass: 64 KiB arrays, below malloc's mmap threshold; the temporaries stay in L2
A_KEYS = ("la", "sflb", "nbc", "lgog", "og", "hld", "kvw", "hb")
WINDOW_KEYS = ("rem", "sdiv", "flb")
N_KEYS = ("tn", "tnhn", "rtnhn", "rhn", "rows", "hn", "kval", "kflag", "dma")
PENALTY = np.array([-np.inf, np.inf])  # fmax with it keeps a value (-inf) or makes it inf
EXACT = float(1 << 53)  # integers below this are exact in float64, and so are their products


@dataclass(frozen=True)
class Tables:
    """Stage terms of one problem over the grids ``S x P`` (``qa``) and ``S x L`` (``qn``).

    Row ``s * n_p + p`` of ``qa`` holds the terms of the S-grid combination ``s`` and the P-grid
    combination ``p``; each grid numbers its combinations in C order of its parameters' codes, so
    ``s`` is the sum of ``code * stride`` over the S parameters (``s_mults``), and so on.
    """

    n_p: int
    n_l: int
    s_mults: tuple[tuple[str, int], ...]  # (parameter, stride in its grid), parameters of 2+ choices only
    p_mults: tuple[tuple[str, int], ...]
    l_mults: tuple[tuple[str, int], ...]
    consts: Consts
    qa: Arrays
    qn: Arrays
    energy: EnergyPricer  # the problem's energy model (the "energy" objective)

    @property
    def n_s(self) -> int:
        """Rows of the S grid (stage-1 combinations): ``qa`` holds ``n_s x n_p`` rows, ``qn`` ``n_s x n_l``."""
        return len(self.qa["la"]) // self.n_p


def grid_values(choices: dict[str, tuple[Choice, ...]], names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Every combination of the named parameters (last fastest), as value columns."""
    shape = tuple(len(choices[nm]) for nm in names)
    digits = np.unravel_index(np.arange(math.prod(shape), dtype=np.int64), shape)
    return {nm: np.asarray(choices[nm])[d] for nm, d in zip(names, digits, strict=True)}


def _mults(choices: dict[str, tuple[Choice, ...]], names: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """Stride of each named parameter in the C-order numbering of its grid (single choices left out: code 0)."""
    out, m = [], 1
    for nm in reversed(names):
        if len(choices[nm]) > 1:
            out.append((nm, m))
        m *= len(choices[nm])
    return tuple(reversed(out))


def build_tables(problem: Problem, hw: RngdHardware, space: SearchSpace) -> Tables | None:
    """Term tables of a supported problem, or None when its points need the generic path."""
    ch = {p.name: p.choices for p in space.params}
    if set(ch) != {*S_PARAMS, *P_PARAMS, *L_PARAMS, "double_buffer"} or ch["double_buffer"] != (False, True):
        return None  # (the code of a double_buffer choice is then not its 0/1 value)
    r = roles_of(problem)
    g = grid_values(ch, S_PARAMS)
    shift_s = g["shift"].astype(bool)
    fs = shard_factors(r, g["clusters"], g["slice_grid"], g["cluster_role"], g["slice_role"], shift_s)
    ga, gb = grid_parts(g["slice_grid"])
    fs["clusters"], fs["slices"] = g["clusters"], ga * gb
    qs = shard_quantities(problem, hw, r, fs)
    n_s = len(shift_s)
    # ---- S x P: packet terms ----
    # They depend on the S grid only through each axis's extent in a slice (e2) and shift (the inputs
    # of `packet_factors` and `packet_quantities`), which many S rows share: computed once per distinct
    # (e2, shift) row ``u`` over the P grid, then gathered to the rows ``s * n_p + p`` of the table.
    gp = grid_values(ch, P_PARAMS)
    n_p = len(gp["packet_k"])
    axes = tuple(r.sizes)
    distinct, of_s = distinct_rows([*(fs[f"e2:{a}"] for a in axes), shift_s.astype(np.int64)])
    n_u = len(distinct[0])
    e2 = {a: np.repeat(distinct[i], n_p) for i, a in enumerate(axes)}
    shift_u = np.repeat(distinct[-1].astype(bool), n_p)
    pa = {nm: np.tile(v, n_u) for nm, v in gp.items()}
    fp = packet_factors(r, hw, e2, pa["packet_k"].astype(np.int64), pa["feed_flits"].astype(np.int64),
                        pa["packet_free"], shift_u)  # fmt: skip
    if any((fp[f"pkt:{a}"] != 1).any() for a in r.axes["n"]):
        return None  # an N axis in the packet: the lane terms would depend on packet choices
    # (`packet_quantities` reads only the weight width of the constants, which `exact_windows` leaves alone)
    qu = packet_quantities(hw, consts_of(problem, hw, r), r, fp, pa["packet_free"], shift_u, pa["inner"] == "n")
    exact = bool((qu["rem"] != 0).any())
    k = consts_of(problem, hw, r, exact_windows=exact)
    bad_u = np.zeros(n_u * n_p, dtype=bool)
    for name, v in qu.items():
        if name.startswith("bad:"):
            bad_u |= v

    def gather(v: np.ndarray) -> np.ndarray:  # u x P -> S x P: the row block of each S row's u, copied whole
        return np.take(v.reshape(n_u, n_p), of_s, axis=0).reshape(-1)

    keys_a = A_KEYS + (WINDOW_KEYS if exact else ())
    bad_a = np.repeat(qs["bad:shards"], n_p) | gather(bad_u)
    # ---- S x L: lane terms ----
    gl = grid_values(ch, L_PARAMS)
    n_l = len(gl["rows"])
    e2n = {a: np.repeat(fs[f"e2:{a}"], n_l) for a in r.axes["n"]}
    ones = {a: np.ones(n_s * n_l, dtype=np.int64) for a in r.axes["n"]}
    rows, trf = np.tile(gl["rows"], n_s).astype(np.int64), np.tile(gl["trf_split"], n_s).astype(np.int64)
    fl = lane_factors(r, e2n, ones, rows, trf)
    qn = lane_quantities(hw, k, r, fl, {key: np.repeat(v, n_l) for key, v in qs.items()})
    big_a = max(float(np.max(qu[key])) for key in keys_a)  # (every distinct row is some S row's)
    big_n = max(float(np.max(qn[key])) for key in N_KEYS if key != "dma")
    if big_a * big_n * (big_a if exact else 1.0) >= EXACT:
        return None  # products could round in float64: the generic integer path keeps every bit
    # A point of a bad S x P or S x L entry costs infinity (la, dma), so only the point-level
    # constraints remain to check per point; its objectives are masked to inf anyway.
    fa = {key: gather(qu[key].astype(float)) for key in (*keys_a, "pelw")}
    fa["la"][bad_a] = np.inf
    bad_n = qn["bad:rows"] | qn["bad:trf-split"]
    fn = {key: np.where(bad_n, np.inf, qn[key]) if key == "dma" else qn[key].astype(float) for key in N_KEYS}
    fn.update({key: qn[key] for key in ("offchip", "share_r", "wpen", "slices")})
    return Tables(
        n_p=n_p,
        n_l=n_l,
        s_mults=_mults(ch, S_PARAMS),
        p_mults=_mults(ch, P_PARAMS),
        l_mults=_mults(ch, L_PARAMS),
        consts=k,
        energy=pricer(hw.energy, problem, ENERGY_LEVELS),
        qa=fa,
        qn=fn,
    )


def _add_index(out: np.ndarray, cols: dict[str, np.ndarray], mults: tuple[tuple[str, int], ...], sl: slice) -> None:
    """Add ``code * stride`` of each of a grid's parameters to ``out`` (points ``sl``): their row in the grid."""
    for nm, m in mults:
        c = cols[nm][sl]
        out += c if m == 1 else c * m


def score_codes(hw: RngdHardware, t: Tables, codes: dict[str, np.ndarray], n: int) -> Arrays:
    """Feasibility and objectives (inf where infeasible) of every point given by its choice codes.

    ``codes[name]`` is each point's index among the parameter's choices, which it must be (as the
    mapper and `choice_codes.score_values` give them): codes are not checked, and those of
    parameters with a single choice are not read.
    """
    names = {nm for mults in (t.s_mults, t.p_mults, t.l_mults) for nm, _ in mults} | {"double_buffer"}
    cols = {nm: np.asarray(codes[nm]).reshape(n) for nm in names}
    feasible = np.empty(n, dtype=bool)
    out = {k: np.empty(n) for k in ("latency", "offchip_bytes", "footprint", "energy")}
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        sl = slice(lo, hi)
        s = np.zeros(hi - lo, dtype=np.intp)
        _add_index(s, cols, t.s_mults, sl)
        ia = s * t.n_p  # row of S x P: s * n_p + p
        _add_index(ia, cols, t.p_mults, sl)
        il = s * t.n_l  # row of S x L: s * n_l + l
        _add_index(il, cols, t.l_mults, sl)
        qa = {k: v.take(ia) for k, v in t.qa.items()}
        qn = {k: v.take(il) for k, v in t.qn.items()}
        res = combine(hw, t.consts, qa, qn, cols["double_buffer"][sl])
        bad = ~(res["cycles"] < np.inf)  # a bad S x P or S x L entry made it inf (or nan)
        for m in point_violations(hw, res).values():
            bad |= m
        feasible[lo:hi] = ~bad
        pen = PENALTY.take(bad.view(np.uint8))  # -inf (keep) or inf, branch-free
        np.fmax(res["cycles"] / hw.clock_hz, pen, out=out["latency"][lo:hi])
        np.fmax(res["offchip"], pen, out=out["offchip_bytes"][lo:hi])
        np.fmax(res["footprint"], pen, out=out["footprint"][lo:hi])
        np.fmax(t.energy.total(level_bytes(res)), pen, out=out["energy"][lo:hi])
    return {"feasible": feasible, **out}
