"""Feasibility and cost of TMATMUL mappings, written once over numpy arrays.

`cube_model` combines the fields of the per-parameter tables (ascend/cube_tables.py) into every
term of the cost model; `AscendTarget.cost` runs it on one point, and `cube_scores` runs the
same steps (`_pipes`, `_core`, `_offchip`) on many (per point or per cell of a grid,
param_tables.py), so they cannot drift. Pricing a whole space (ascend/cube_grid.py) repeats these
steps operation for operation, in place; the tests compare it with both. The recipe is
hardware-facts.md §3.2 (Ascend A2/A3, A5):

1. fractal padding ``m' = ceil16(m)``, ``k' = ceil(k/k0)*k0``, ``n' = ceil16(n)``;
2. L0 feasibility per TMATMUL, halved for ping-pong double buffering (ASSUMPTION of the sheet);
   the L0C holds the ``l1_m x l1_n`` accumulators of one L1 output block;
3. cube time ``6 + r*(m'/16)*(k'/k0)*(n'/16)`` per TMATMUL;
4. MTE1 ``bytes_A/rate_L0A + bytes_B/rate_L0B``, MTE2 GM->L1 at the HBM (or L2) rate per core,
   FIX L0C->GM at the PTO rate; the GM bytes of the block loops in the better of their two orders
   (**Block loop order** below);
5. per core: the sum of the pipes without double buffering; with it, the slowest pipe plus one
   step of the others (pipeline fill), FIX overlapping only if two accumulator sets fit in L0C
   and the overlap is faster;
6. ``max`` over cores (the uniform split prices the busiest core) and the aggregate HBM check.

**Block loop order** (issue #12): A-resident or B-resident, whichever moves fewer GM bytes.
A core's output blocks are visited by two loops, over its M blocks (with the batch blocks) and
over its N blocks. TMATMUL constrains only its three tiles (pto-tmatmul.txt, Constraints: tile
locations Left/Right/Acc, their shapes, m/k/n in [1, 4095]), not the order in which output blocks
are computed: that is a schedule choice (hardware-facts.md §3.2 step 6 cites PTO's "N-swizzle /
M-zigzag" block orders). When K fits one L1 chunk (``nk == 1``) the chunk of the operand whose
loop is outer stays in L1 while the inner loop runs:

- A-resident (N innermost): A loads ``blocks_m``, B loads ``steps`` (one per block);
- B-resident (N outermost): A loads ``steps``, B loads ``bnb`` = N blocks x batch blocks (a B
  without batch axes has one batch block).

With several K chunks every block reloads both (``steps`` each), so the orders cost the same.
Both orders hold the same buffers (one A chunk, one B chunk: L1, L0 and the footprint are equal)
and run the same TMATMULs, so they differ only in the GM bytes ``gm_core``. Every objective is
nondecreasing in ``gm_core`` with the rest fixed (MTE2 time ``gm_core / rate`` enters the per-core
time through ``max``, sums and ``top + (three - top) / steps`` with ``steps >= 1``; the off-chip
bytes are ``max(min_bytes, cores x (gm_core + out))``). So the order with fewer GM bytes is at least
as good in latency, off-chip bytes and footprint, and offering the other as a choice could never
help: the model takes the better order at every point (ties: A-resident) instead of doubling the
space, and `cube_mapping` writes the block loops in that order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodels.ascend.energy import cube_level_bytes
from costmodels.ascend.space import CubeSetup
from costmodels.ascend.tiling import round_up
from costmodels.energy import EnergyPricer
from costmodels.protocol import Violation

#: Stage names reported in the breakdown, and the bound each maps to.
STAGES = (("cube", "compute"), ("mte2", "dma"), ("mte1", "stream"), ("fix", "dma"), ("hbm", "dma"))
Arrays = dict[str, np.ndarray]
#: What `cube_scores` returns, and its dtypes.
SCORE_OUTPUTS = {
    "ok": np.dtype(bool),
    "latency": np.dtype(np.float64),
    "offchip_bytes": np.dtype(np.float64),
    "footprint": np.dtype(np.float64),
    "energy": np.dtype(np.float64),
}


@dataclass(frozen=True)
class CubeConsts:
    """The point-independent numbers of the formulas (hoisted out of the per-point path)."""

    head: float
    mte2_rate: float
    fix_rate: float
    hbm_rate: float  # aggregate: all AI cores
    min_bytes: float
    l2_resident: bool
    clock_hz: float
    l0a: int
    l0b: int
    l0c: int
    l1: int
    aic: int


def cube_consts(s: CubeSetup) -> CubeConsts:
    hw = s.hw
    return CubeConsts(
        head=hw.cube_head_cycles,
        mte2_rate=hw.l2_bytes_per_cycle_per_core if s.l2_resident else hw.hbm_bytes_per_cycle_per_core,
        fix_rate=hw.l0c_to_gm_bytes_per_cycle,
        hbm_rate=hw.aic_cores * hw.hbm_bytes_per_cycle_per_core,
        min_bytes=s.min_bytes,
        l2_resident=s.l2_resident,
        clock_hz=hw.clock_hz,
        l0a=hw.l0a_bytes,
        l0b=hw.l0b_bytes,
        l0c=hw.l0c_bytes,
        l1=hw.l1_bytes,
        aic=hw.aic_cores,
    )


def _pipes(c: CubeConsts, f: Arrays) -> Arrays:
    """Steps 3-4 per core: TMATMULs and their cube cycles, MTE1, MTE2 (GM bytes) and FIX times."""
    tiles = f["tiles_m"] * f["lknk"] * f["tiles_n"]  # TMATMULs per core
    blocks = f["blocks_m"] * f["bn"]
    steps = blocks * f["nk"]
    # when K fits one L1 chunk, one operand's chunk stays in L1 across the other's blocks: A across N
    # blocks (A-resident) or B across M blocks (B-resident); the better order (**Block loop order** above)
    refetch = steps * f["kmulti"]
    a_resident = np.maximum(refetch, f["blocks_m"]) * f["ach"] + steps * f["bch"]
    b_resident = steps * f["ach"] + np.maximum(refetch, f["bnb"]) * f["bch"]
    gm_core = np.minimum(a_resident, b_resident)
    out_bytes = f["bo_m"] * f["bo_n"]  # blocks x output block bytes
    return {
        "tiles": tiles,
        "cube": tiles * (c.head + f["u"] * f["v"]),  # step 3, per TMATMUL 6 + r*(m'/16)*(k'/k0)*(n'/16)
        "mte1": tiles * (f["a1"] + f["b1"]),
        "mte2": gm_core / c.mte2_rate,
        "fix": out_bytes / c.fix_rate,
        "blocks": blocks,
        "steps": steps,
        "gm_core": gm_core,
        "out_bytes": out_bytes,
        "b_resident": b_resident < a_resident,
    }


def _core(c: CubeConsts, f: Arrays, p: Arrays, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step 5: cycles of one core (pipes summed, or pipelined with double buffering), and whether FIX overlaps."""
    mte2, mte1, cube, fix, steps = p["mte2"], p["mte1"], p["cube"], p["fix"], p["steps"]
    three = mte2 + mte1 + cube
    serial = three + fix
    top = np.maximum(np.maximum(mte2, mte1), cube)
    pipe = top + (three - top) / steps
    overlap = 2 * acc <= c.l0c
    # FIX overlaps the next block only where that helps (else it follows the pipe: a schedule choice, so the
    # time is nonincreasing as the accumulators shrink; the tile dominance rule of space.py relies on it)
    doubled = np.where(overlap, np.minimum(np.maximum(pipe, fix) + fix / p["blocks"], pipe + fix), pipe + fix)
    return np.where(f["db"], doubled, serial), overlap


def _offchip(c: CubeConsts, f: Arrays, p: Arrays) -> tuple[np.ndarray, np.ndarray]:
    """Step 6: bytes all cores move to and from HBM (the minimum when the inputs stay in L2), and cores used."""
    cores_used = f["cores_m"] * f["cores_n"]
    traffic = cores_used * (p["gm_core"] + p["out_bytes"])
    offchip = np.full(np.shape(traffic), c.min_bytes) if c.l2_resident else np.maximum(c.min_bytes, traffic)
    return offchip, cores_used


def cube_model(c: CubeConsts, f: Arrays) -> Arrays:
    """Every term of the cube cost model from the table fields (one entry per point or cell)."""
    p = _pipes(c, f)
    acc = f["acc_m"] * f["acc_n"]
    core, overlap = _core(c, f, p, acc)
    offchip, cores_used = _offchip(c, f, p)
    hbm = offchip / c.hbm_rate
    return {
        **{k: p[k] for k in ("cube", "mte2", "mte1", "fix", "tiles", "blocks", "gm_core", "out_bytes", "b_resident")},
        "hbm": hbm,
        "core": core,
        "cycles": np.maximum(core, hbm),
        "offchip": offchip,
        "footprint": (f["fa"] + f["fb"]) * f["h"] + acc,
        "acc": acc,
        "l1": f["l1a"] + f["l1b"],
        "cores_used": cores_used,
        "fix_overlap": overlap,
    }


def cube_checks(c: CubeConsts, f: Arrays, t: Arrays) -> Arrays:
    """Constraint code -> boolean array (True where the point satisfies it)."""
    h = f["h"]  # ping-pong halves the buffers
    return {
        "tmatmul-range": f["rng_m"] & f["rng_n"],
        "l0a-capacity": f["l0a"] * h <= c.l0a,
        "l0b-capacity": f["l0b"] * h <= c.l0b,
        "l0c-capacity": t["acc"] <= c.l0c,
        "l1-capacity": t["l1"] * h <= c.l1,
        "core-count": f["grid_ok"],
    }


def cube_scores(c: CubeConsts, f: Arrays, energy: EnergyPricer | None = None) -> Arrays:
    """What `score_codes` and `score_batch` return: feasibility and the objectives (inf where infeasible).

    The same terms as `cube_model`, but each is dropped as soon as it is used: over a grid the
    temporaries are the bulk of the memory touched, and fresh memory is what costs the most.
    """
    p = _pipes(c, f)
    del p["b_resident"]  # reported only; p["tiles"] is kept: the energy model counts the L0A/L0B tiles
    acc = f["acc_m"] * f["acc_n"]
    core, _ = _core(c, f, p, acc)
    offchip, cores_used = _offchip(c, f, p)
    levels = cube_level_bytes(f, p["tiles"], p["blocks"], p["gm_core"], cores_used, offchip)
    pj = energy.total(levels) if energy is not None else np.inf
    del p, levels
    cycles = np.maximum(core, offchip / c.hbm_rate)
    del core
    ok: np.ndarray | None = None
    for passed in cube_checks(c, f, {"acc": acc, "l1": f["l1a"] + f["l1b"]}).values():
        ok = passed if ok is None else ok & passed
    assert ok is not None
    return {
        "ok": ok,
        "latency": np.where(ok, cycles / c.clock_hz, np.inf),
        "offchip_bytes": np.where(ok, offchip, np.inf),
        "footprint": np.where(ok, (f["fa"] + f["fb"]) * f["h"] + acc, np.inf),
        "energy": np.where(ok, pj, np.inf),
    }


def _kib(x: float) -> str:
    return f"{x / 1024:g} KiB"


def cube_violations(s: CubeSetup, c: CubeConsts, f: Arrays, t: Arrays) -> list[Violation]:
    """Violations of the first point of the arrays, with what is wrong and how to fix it."""
    ok = {k: bool(np.asarray(v).reshape(-1)[0]) for k, v in cube_checks(c, f, t).items()}
    hw = s.hw
    db = bool(f["db"][0])
    pp = " (halved for double buffering)" if db else ""
    tm, tk, tn = (int(f[k][0]) for k in ("tm", "tk", "tn"))
    mp, kp, np_ = (round_up(x, q) for x, q in ((tm, hw.fractal_m), (tk, s.k0), (tn, hw.fractal_n)))
    out: list[Violation] = []
    if not ok["tmatmul-range"]:
        out.append(
            Violation(
                code="tmatmul-range",
                message=f"TMATMUL m={tm}, k={tk}, n={tn}: each must be in "
                f"[1, {hw.tmatmul_max_dim}] (pto-tmatmul.txt, Runtime): use smaller base tiles",
            )
        )
    caps = (
        ("l0a-capacity", "L0A", "left tile", float(f["l0a"][0]), hw.l0a_bytes, "base_m or base_k"),
        ("l0b-capacity", "L0B", "right tile", float(f["l0b"][0]), hw.l0b_bytes, "base_k or base_n"),
    )
    for code, buf, what, need, have, fix in caps:
        if not ok[code]:
            avail = have / (2 if db else 1)
            out.append(
                Violation(
                    code=code,
                    message=f"{buf} needs {_kib(need)} for the {what} ({mp}x{kp}x{np_} "
                    f"after fractal padding), {_kib(avail)} available{pp}: reduce {fix}",
                )
            )
    if not ok["l0c-capacity"]:
        out.append(
            Violation(
                code="l0c-capacity",
                message=f"L0C needs {_kib(float(t['acc'][0]))} for the accumulators of one L1 block, "
                f"{_kib(hw.l0c_bytes)} available: reduce base_m, base_n, l1_m or l1_n",
            )
        )
    if not ok["l1-capacity"]:
        out.append(
            Violation(
                code="l1-capacity",
                message=f"L1 needs {_kib(float(t['l1'][0]))} for the A and B chunks, "
                f"{_kib(hw.l1_bytes / (2 if db else 1))} available{pp}: reduce l1_k, l1_m or l1_n",
            )
        )
    if not ok["core-count"]:
        out.append(
            Violation(
                code="core-count",
                message=f"the core grid uses {int(f['grid_cores'][0])} AI cores, {hw.aic_cores} available: "
                "choose a smaller grid",
            )
        )
    return out


def cube_report_terms(f: Arrays, t: Arrays) -> dict[str, float]:
    """The scalar terms `cost` reports for the first point: stages, bytes per level, counts."""
    pick = {k: float(np.asarray(v).reshape(-1)[0]) for k, v in t.items()}
    cores, tiles = pick["cores_used"], pick["tiles"]
    pick["gm_bytes"] = float(cores * t["gm_core"][0])
    pick["l0a_bytes"] = cores * tiles * float(f["l0a"][0])
    pick["l0b_bytes"] = cores * tiles * float(f["l0b"][0])
    pick["l0c_bytes"] = cores * pick["blocks"] * pick["acc"]
    return pick


def cube_bound(pick: dict[str, float]) -> str:
    """The stage with the largest total time."""
    vals = [pick[name] for name, _ in STAGES]
    return STAGES[int(np.argmax(vals))][1]
