"""Cost and feasibility formulas of the Trainium tensor engine, written once over numpy arrays.

Both paths use these functions, so they cannot drift: `check`/`cost` call `evaluate` on one
mapping (arrays of length 1, read from its loops); the priced grid behind `score_codes` /
`score_batch` (costmodels.trainium.scoring) calls its parts on slabs of the space's grid, computing
only what the objectives and feasibility need: `traffic` once per slab, then `accumulation` and
the `capacity_violations` for each accumulator choice, with ``acc_psum`` one 0-d bool (`select`
then takes a branch without an elementwise pass). `evaluate` adds what only reports show
(``sbuf_bytes``, ``psum_bytes``). Sources of the rules (hardware-facts.md §2.2 is the recipe):

- instruction cost: ``max(min(64, N_stationary), N_moving)`` tensor-engine cycles for
  fp8/bf16/fp16/tf32 and 4x for fp32 (nki-nc_matmul.txt, "Estimated instruction cost");
  with fp8 double_row on NeuronCore-v3 a contraction of up to 256 takes the same time
  (hardware-facts.md §2.1, FP8 double-row row);
- HBM traffic of the blocked schedule: a block of an operand is fetched again whenever a loop it
  does not depend on advances outside its innermost (non-trivial) own loop
  (hardware-facts.md §2.2 step 5: ``s*(M*K*ceil(N/B_N) + K*N*ceil(M/B_M)) + s_out*M*N``);
- DMA: ``max(core bytes / (16 engines x rate), chip bytes / HBM bandwidth)`` (§2.2 step 5);
- PSUM eviction by the vector engine: ``N + 60`` cycles for a copy, ``2N + 60`` for an add into
  an SBUF accumulator, at the vector clock (§2.1 Vector/Scalar cost and SBUF/PSUM access rows,
  §2.2 step 3, an ASSUMPTION of the recipe);
- time: ``fill + max(tensor engine, steady DMA, eviction)`` with double-buffered blocks
  (§2.2 step 6, ASSUMPTION); fill = the first blocks' DMA, which nothing overlaps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.nest import B, K, M, S

F = np.ndarray


@dataclass(frozen=True)
class ProblemConsts:
    """Problem-level numbers the formulas need (one stationary choice)."""

    s_stat: float  # bytes per element of the stationary input
    s_mov: float
    s_out: float
    fp32: bool  # any f32 input: 4x instruction cost
    double_row: bool  # both inputs fp8 and the part has double_row
    real_stat_bytes: float
    real_mov_bytes: float
    macs: float
    supported: bool


@dataclass(frozen=True)
class Quantities:
    """Per-point loop-nest numbers: arrays that broadcast against each other.

    ``t*`` are instruction tile sizes, ``b*`` the tiles of one SBUF block per role and ``h*`` the
    block-loop trips (level ``hbm``) per role. ``fetch_stat`` / ``fetch_mov`` are the block fetches
    of each input (`fetches`) and ``live_out`` the output blocks open at once (`live_output_blocks`).
    One mapping gives arrays of length 1; the priced grid gives arrays shaped over a slab of the
    space's choices (each quantity varying only along the parameters it depends on).
    """

    ts: F
    tm: F
    tk: F
    tb: F
    bs: F
    bm: F
    bk: F
    bb: F
    hs: F
    hm: F
    hk: F
    hb: F
    fetch_stat: F
    fetch_mov: F
    live_out: F
    cores: F
    chip_k: F
    acc_psum: F


def role_trips(trips: F, roles: F, role: int) -> F:
    """Product of the block-loop trips of one role (rows of `trips`, one column per loop)."""
    return np.prod(np.where(roles == role, trips, 1), axis=1)


def fetches(trips: F, roles: F, relevant: tuple[int, ...]) -> F:
    """Block fetches of an operand: product of the trips of every loop up to its innermost own loop."""
    own = np.isin(roles, relevant) & (trips > 1)
    pos = np.arange(trips.shape[1])
    last = np.where(own, pos, -1).max(axis=1)
    cp = np.cumprod(trips, axis=1)
    at = np.take_along_axis(cp, np.maximum(last, 0)[:, None], axis=1)[:, 0]
    return np.where(last >= 0, at, 1)


def live_output_blocks(trips: F, roles: F) -> F:
    """Output blocks whose accumulation is open at once: output loops nested inside the outermost k loop."""
    kl = (roles == K) & (trips > 1)
    n = trips.shape[1]
    first = np.where(kl.any(axis=1), kl.argmax(axis=1), n)
    inside = np.arange(n)[None, :] > first[:, None]
    return np.prod(np.where(inside & np.isin(roles, (B, S, M)), trips, 1), axis=1)


def select(cond: F, a: F | float, b: F | float) -> F | float:
    """``np.where(cond, a, b)``; `a` or `b` itself when `cond` is one bool for every point (0-d: no copy)."""
    if np.ndim(cond) == 0:
        return a if cond else b
    return np.where(cond, a, b)


@dataclass(frozen=True)
class Traffic:
    """What a point costs whatever its accumulator: instructions, HBM traffic, DMA, open blocks.

    ``busy`` is the steady stage before eviction, ``max(tensor engine, steady DMA)``; ``inputs_pp``
    the double-buffered input blocks per SBUF partition and ``live_elems`` the elements per
    partition of the open output blocks (``live * tm``).
    """

    n_out: F
    n_inst: F
    ii: F
    te: F
    hbm_chip: F
    hbm_core: F
    dma: F
    prologue: F
    busy: F
    live: F
    inputs_pp: F
    live_elems: F


def traffic(hw: TrainiumHardware, c: ProblemConsts, q: Quantities) -> Traffic:
    """The accumulator-independent part of `evaluate` (see the module docstring for the sources)."""
    hs, hm, hk, hb = q.hs, q.hm, q.hk, q.hb
    n_out = (q.bs * hs) * (q.bm * hm) * (q.bb * hb)  # output tiles per core
    n_inst = n_out * (q.bk * hk)
    # nki-nc_matmul.txt, Estimated instruction cost
    ii = np.maximum(np.minimum(hw.matmul_floor_cycles, q.ts), q.tm) * (hw.fp32_cost_factor if c.fp32 else 1.0)
    te = n_inst * ii
    es, em, ek = q.ts * q.bs, q.tm * q.bm, q.tk * q.bk  # block extents (elements)
    stat_blk = es * ek * q.bb * c.s_stat
    mov_blk = em * ek * q.bb * c.s_mov
    core_stat = q.fetch_stat * stat_blk
    core_mov = q.fetch_mov * mov_blk
    core_out = es * hs * em * hm * q.bb * hb * c.s_out
    # every input is read whole at least once (strided im2col reads are not cheaper than the tensor)
    hbm_chip = (
        np.maximum(core_stat * q.cores, c.real_stat_bytes)
        + np.maximum(core_mov * q.cores, c.real_mov_bytes)
        + core_out * q.cores
    )
    hbm_core = core_stat + core_mov + core_out
    f = hw.te_clock_hz
    dma = np.maximum(hbm_core / hw.core_dma_bytes_per_s, hbm_chip / hw.hbm_bytes_per_s) * f
    prologue = (stat_blk + mov_blk) / hw.core_dma_bytes_per_s * f
    busy = np.maximum(te, np.maximum(dma - prologue, 0.0))
    live = q.bs * q.bm * q.bb * q.live_out
    kslots = np.ceil(q.tk / hw.pe_rows)
    inputs_pp = 2 * q.bk * kslots * q.bb * (es * c.s_stat + em * c.s_mov)
    return Traffic(n_out, n_inst, ii, te, hbm_chip, hbm_core, dma, prologue, busy, live, inputs_pp, live * q.tm)


@dataclass(frozen=True)
class Accumulation:
    """The numbers the accumulator choice changes (cycles in tensor-engine cycles)."""

    evict: F
    cycles: F
    sbuf_pp: F
    psum_banks: F
    footprint: F


def accumulation(hw: TrainiumHardware, c: ProblemConsts, q: Quantities, t: Traffic) -> Accumulation:
    """The rest of `evaluate` given its `traffic` (``q.acc_psum`` may be one 0-d bool for every point)."""
    psum = q.acc_psum.astype(bool)
    ve = hw.te_clock_hz / hw.ve_clock_hz  # tensor-engine cycles per vector-engine cycle
    copy = q.tm + hw.access_overhead_cycles
    add = 2 * q.tm + hw.access_overhead_cycles
    evict = select(psum, t.n_out * copy, t.n_out * (copy + (q.hk - 1) * add)) * ve
    # the first blocks' DMA (the fill) cannot overlap anything; the final drain is ignored, as in the recipe
    cycles = t.prologue + np.maximum(t.busy, evict)
    acc_bytes = select(psum, c.s_out, np.where(q.hk > 1, 4.0, c.s_out))
    sbuf_pp = t.inputs_pp + t.live_elems * acc_bytes
    banks_per_acc = np.ceil(q.tm * 4 / hw.psum_bank_bytes)
    psum_banks = select(psum, t.live, 2.0) * banks_per_acc
    footprint = sbuf_pp * hw.sbuf_partitions + psum_banks * hw.psum_bank_bytes * hw.sbuf_partitions
    return Accumulation(np.asarray(evict), cycles, sbuf_pp, psum_banks, footprint)


def tile_violations(hw: TrainiumHardware, c: ProblemConsts, q: Quantities) -> dict[str, F]:
    """Masks of the constraints the accumulator choice does not change (instruction limits, cores)."""
    return {
        "unsupported": np.full(np.shape(q.ts), not c.supported),
        "stationary-free": q.ts > hw.pe_cols,
        "moving-free": q.tm > hw.moving_free_max,
        "contraction": q.tk > hw.max_contraction(c.double_row),
        "psum-bank": q.tm * 4 > hw.psum_bank_bytes,
        "cores": q.cores > hw.cores_per_chip,
        "k-sharding": q.chip_k > 1,
        "batch-in-instruction": q.tb > 1,
    }


def capacity_violations(hw: TrainiumHardware, a: Accumulation) -> dict[str, F]:
    """Masks of the PSUM and SBUF capacities."""
    return {"psum-capacity": a.psum_banks > hw.psum_banks, "sbuf-capacity": a.sbuf_pp > hw.sbuf_partition_bytes}


def any_violated(masks: Iterable[F]) -> F | bool:
    """Points that violate some mask (small masks or'ed first: cheap broadcasts)."""
    bad: F | bool = False
    for mask in sorted(masks, key=np.size):
        bad = bad | mask
    return bad


@dataclass(frozen=True)
class Evaluation:
    """Every derived array of a batch of points (cycles in tensor-engine cycles)."""

    n_inst: F
    ii: F
    te: F
    dma: F
    evict: F
    fill: F
    cycles: F
    hbm_chip: F
    hbm_core: F
    sbuf_pp: F
    psum_banks: F
    live: F
    footprint: F
    sbuf_bytes: F
    psum_bytes: F
    violated: dict[str, F]


def onchip_bytes(c: ProblemConsts, q: Quantities, t: Traffic) -> tuple[F, F]:
    """Bytes moved at SBUF (instruction operands read, PSUM evictions written, HBM blocks landed) and
    at PSUM (results written, evictions read) over the chip: the report's and the energy model's."""
    psum = np.asarray(q.acc_psum).astype(bool)
    sbuf_bytes = (
        t.n_inst * q.tk * (q.ts * c.s_stat + q.tm * c.s_mov) + t.n_out * q.ts * q.tm * 4
    ) * q.cores + t.hbm_chip
    n_evict = np.where(psum, t.n_out, t.n_out * q.hk)
    psum_bytes = (t.n_inst + n_evict) * q.ts * q.tm * 4.0 * q.cores
    return sbuf_bytes, psum_bytes


def evaluate(hw: TrainiumHardware, c: ProblemConsts, q: Quantities) -> Evaluation:
    """Price and check every point of `q`: `traffic`, `accumulation` and both kinds of violations.

    Elementwise only, so the arrays of `q` may have any shapes that broadcast together.
    """
    t = traffic(hw, c, q)
    a = accumulation(hw, c, q, t)
    sbuf_bytes, psum_bytes = onchip_bytes(c, q, t)
    violated = {**tile_violations(hw, c, q), **capacity_violations(hw, a)}
    return Evaluation(
        t.n_inst, t.ii, t.te, t.dma, a.evict, t.prologue, a.cycles, t.hbm_chip, t.hbm_core, a.sbuf_pp, a.psum_banks,
        t.live, a.footprint, sbuf_bytes, psum_bytes, violated,
    )  # fmt: skip


def lower_bound_cycles(hw: TrainiumHardware, c: ProblemConsts, min_bytes: float) -> tuple[float, float]:
    """Roofline: (compute cycles, memory cycles) of the whole chip at peak (hardware-facts.md §2.1 peaks)."""
    peak = hw.cores_per_chip * hw.peak_macs_per_cycle(fp32=c.fp32, double_row=c.double_row)
    return c.macs / peak, min_bytes / hw.hbm_bytes_per_s * hw.te_clock_hz
