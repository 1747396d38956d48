"""Feasibility and cost of TMATMUL mappings, written once over numpy arrays.

`cube_terms` prices every point of `cube_arrays` at once; `AscendTarget.cost` calls it with
one point, `score_batch` with thousands, so the two cannot drift. The recipe is
hardware-facts.md §3.2 (Ascend A2/A3, A5):

1. fractal padding ``m' = ceil16(m)``, ``k' = ceil(k/k0)*k0``, ``n' = ceil16(n)``;
2. L0 feasibility per TMATMUL, halved for ping-pong double buffering (ASSUMPTION of the sheet);
   the L0C holds the ``l1_m x l1_n`` accumulators of one L1 output block;
3. cube time ``6 + r*(m'/16)*(k'/k0)*(n'/16)`` per TMATMUL;
4. MTE1 ``bytes_A/rate_L0A + bytes_B/rate_L0B``, MTE2 GM->L1 at the HBM (or L2) rate per core,
   FIX L0C->GM at the PTO rate;
5. per core: the sum of the pipes without double buffering; with it, the slowest pipe plus one
   step of the others (pipeline fill), FIX overlapping only if two accumulator sets fit in L0C;
6. ``max`` over cores (the uniform split prices the busiest core) and the aggregate HBM check.
"""

from __future__ import annotations

import numpy as np

from costmodels.ascend_cube import CubeSetup
from costmodels.protocol import Violation
from workload import dtypes

#: Stage names reported in the breakdown, and the bound each maps to.
STAGES = (("cube", "compute"), ("mte2", "dma"), ("mte1", "stream"), ("fix", "dma"), ("hbm", "dma"))


def _ru(x: np.ndarray, m: int) -> np.ndarray:
    return -(-x // m) * m


def cube_terms(s: CubeSetup, a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every intermediate quantity of the cube cost model, one entry per point."""
    hw = s.hw
    sa, sb, so = (dtypes.info(d).bytes for d in (s.left, s.right, s.out))
    tm, lm, cm_used, bm = a["m0"], a["m1"], a["m2"], a["m3"]
    tn, ln, cn_used, bn = a["n0"], a["n1"], a["n2"], a["n3"]
    tk, lk, nk = a["k0"], a["k1"], a["k2"]
    cb_used, bb = a["b0"], a["b1"]
    db = a["db"]
    mp, kp, np_ = _ru(tm, hw.fractal_m), _ru(tk, s.k0), _ru(tn, hw.fractal_n)
    t: dict[str, np.ndarray] = {"mp": mp, "kp": kp, "np": np_, "tm": tm, "tk": tk, "tn": tn}
    t["l0a"] = mp * kp * sa
    t["l0b"] = kp * np_ * sb
    t["acc"] = lm * ln * mp * np_ * 4  # fp32 / int32 accumulator (pto-tmatmul.txt, Constraints)
    t["l1"] = lm * mp * lk * kp * sa + lk * kp * ln * np_ * sb
    blocks = bb * bm * bn
    steps = blocks * nk
    tiles = steps * lm * ln * lk  # TMATMULs per core
    t_m = hw.cube_head_cycles + s.repeats * (mp / hw.fractal_m) * (kp / s.k0) * (np_ / hw.fractal_n)
    t_mte1 = t["l0a"] / hw.l1_to_l0a_bytes_per_cycle + t["l0b"] / hw.l1_to_l0b_bytes_per_cycle
    a_chunk = lm * tm * lk * tk * sa * s.a_ratio
    b_chunk = lk * tk * ln * tn * sb * s.b_ratio
    a_loads = bb * bm * np.where(nk > 1, bn, 1) * nk  # A stays in L1 across N blocks when K fits one chunk
    gm_core = a_loads * a_chunk + steps * b_chunk
    rate = hw.l2_bytes_per_cycle_per_core if s.l2_resident else hw.hbm_bytes_per_cycle_per_core
    out_block = lm * ln * tm * tn * so
    mte2 = gm_core / rate
    mte1 = tiles * t_mte1
    cube = tiles * t_m
    fix = blocks * out_block / hw.l0c_to_gm_bytes_per_cycle
    serial = mte2 + mte1 + cube + fix
    top = np.maximum(np.maximum(mte2, mte1), cube)
    pipe = top + (mte2 + mte1 + cube - top) / steps
    overlap = 2 * t["acc"] <= hw.l0c_bytes
    doubled = np.where(overlap, np.maximum(pipe, fix) + fix / blocks, pipe + fix)
    core = np.where(db, doubled, serial)
    cores_used = cb_used * cm_used * cn_used
    traffic = cores_used * (gm_core + blocks * out_block)
    min_bytes = s.problem.min_bytes
    offchip = np.full(tm.shape, float(min_bytes)) if s.l2_resident else np.maximum(min_bytes, traffic)
    hbm = offchip / (hw.aic_cores * hw.hbm_bytes_per_cycle_per_core)
    t.update(
        cube=cube,
        mte2=mte2,
        mte1=mte1,
        fix=fix,
        hbm=hbm,
        core=core,
        cycles=np.maximum(core, hbm),
        offchip=offchip,
        footprint=(t["l1"] + t["l0a"] + t["l0b"]) * (1 + db) + t["acc"],
        tiles=tiles,
        cores_used=cores_used,
        gm_bytes=cores_used * gm_core,
        l0a_bytes=cores_used * tiles * t["l0a"],
        l0b_bytes=cores_used * tiles * t["l0b"],
        l0c_bytes=cores_used * blocks * t["acc"],
        fix_overlap=overlap,
    )
    return t


def cube_feasible(s: CubeSetup, a: dict[str, np.ndarray], t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Constraint code -> boolean array (True where the point satisfies it)."""
    hw = s.hw
    halve = 1 + a["db"]
    lim = hw.tmatmul_max_dim
    return {
        "tmatmul-range": (t["tm"] >= 1)
        & (t["tm"] <= lim)
        & (t["tk"] >= 1)
        & (t["tk"] <= lim)
        & (t["tn"] >= 1)
        & (t["tn"] <= lim),
        "l0a-capacity": t["l0a"] * halve <= hw.l0a_bytes,
        "l0b-capacity": t["l0b"] * halve <= hw.l0b_bytes,
        "l0c-capacity": t["acc"] <= hw.l0c_bytes,
        "l1-capacity": t["l1"] * halve <= hw.l1_bytes,
        "core-count": a["grid_b"] * a["grid_m"] * a["grid_n"] <= hw.aic_cores,
    }


def _kib(x: float) -> str:
    return f"{x / 1024:g} KiB"


def cube_violations(s: CubeSetup, a: dict[str, np.ndarray], t: dict[str, np.ndarray]) -> list[Violation]:
    """Violations of the first point of the arrays, with what is wrong and how to fix it."""
    ok = {k: bool(v[0]) for k, v in cube_feasible(s, a, t).items()}
    hw = s.hw
    db = bool(a["db"][0])
    pp = " (halved for double buffering)" if db else ""
    v = {k: float(x[0]) for k, x in t.items() if x.ndim == 1}
    out: list[Violation] = []
    if not ok["tmatmul-range"]:
        out.append(
            Violation(
                code="tmatmul-range",
                message=f"TMATMUL m={int(v['tm'])}, k={int(v['tk'])}, n={int(v['tn'])}: each must be in "
                f"[1, {hw.tmatmul_max_dim}] (pto-tmatmul.txt, Runtime): use smaller base tiles",
            )
        )
    caps = (
        ("l0a-capacity", "L0A", "left tile", v["l0a"], hw.l0a_bytes, "base_m or base_k"),
        ("l0b-capacity", "L0B", "right tile", v["l0b"], hw.l0b_bytes, "base_k or base_n"),
    )
    for code, buf, what, need, have, fix in caps:
        if not ok[code]:
            avail = have / (2 if db else 1)
            out.append(
                Violation(
                    code=code,
                    message=f"{buf} needs {_kib(need)} for the {what} ({int(v['mp'])}x{int(v['kp'])}x{int(v['np'])} "
                    f"after fractal padding), {_kib(avail)} available{pp}: reduce {fix}",
                )
            )
    if not ok["l0c-capacity"]:
        out.append(
            Violation(
                code="l0c-capacity",
                message=f"L0C needs {_kib(v['acc'])} for the accumulators of one L1 block, {_kib(hw.l0c_bytes)} "
                "available: reduce base_m, base_n, l1_m or l1_n",
            )
        )
    if not ok["l1-capacity"]:
        out.append(
            Violation(
                code="l1-capacity",
                message=f"L1 needs {_kib(v['l1'])} for the A and B chunks, {_kib(hw.l1_bytes / (2 if db else 1))} "
                f"available{pp}: reduce l1_k, l1_m or l1_n",
            )
        )
    if not ok["core-count"]:
        want = int(a["grid_b"][0] * a["grid_m"][0] * a["grid_n"][0])
        out.append(
            Violation(
                code="core-count",
                message=f"the core grid uses {want} AI cores, {hw.aic_cores} available: choose a smaller grid",
            )
        )
    return out


def cube_bound(t: dict[str, np.ndarray], i: int = 0) -> str:
    """The stage with the largest total time of point `i`."""
    vals = [float(t[name][i]) for name, _ in STAGES]
    return STAGES[int(np.argmax(vals))][1]
