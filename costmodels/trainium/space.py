"""The Trainium mapping space: its parameters and the choices worth offering for a problem.

Parameters (hardware-facts.md §2.2 step 1 and nki-nc_matmul.txt limits):

- ``stationary``: which input sits in the array: the weight, or the other input;
- ``tile_stat`` / ``tile_mov`` / ``tile_k``: caps of the instruction tile (stationary free <= 128,
  moving free <= 512, contraction <= 128, or 256 with fp8 double_row on NeuronCore-v3);
- ``block_stat`` / ``block_mov`` / ``block_k``: instruction tiles per SBUF block and role;
- ``order``: block loops outermost first (s = stationary free, m = moving free, k = contraction);
- ``acc``: accumulate across K blocks in an SBUF fp32 tile (``sbuf``) or keep PSUM banks (``psum``);
- ``cores`` and ``shard``: NeuronCores used and the role split over them.

Choices that give the same loop nest as a kept choice for this problem are dropped (see
`build_space`), so small problems have small spaces. The space is a product of choices, so a
choice is dropped only when it repeats a mapping at every point: ``cores=1`` still comes with
every shard choice (the same nest).
"""

from __future__ import annotations

import math

from costmodels.protocol import Param, SearchSpace
from costmodels.trainium.cost import ProblemConsts
from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.nest import Roles, roles_of, split_role
from workload import dtypes
from workload.problem import Problem

TILE_STAT_CAPS: tuple[int, ...] = (128, 64, 32)
TILE_MOV_CAPS: tuple[int, ...] = (512, 256, 128, 64)
TILE_K_CAPS: tuple[int, ...] = (128, 64, 32)
BLOCK_CAPS: tuple[int, ...] = (1, 2, 4, 8, 16)
ORDERS: tuple[str, ...] = ("smk", "msk", "skm", "mks", "ksm", "kms")
ACCS: tuple[str, ...] = ("sbuf", "psum")
STATIONARY: tuple[str, ...] = ("weight", "other")
_FP8 = ("f8e4m3", "f8e5m2")


def problem_consts(problem: Problem, hw: TrainiumHardware, roles: Roles, supported: bool) -> ProblemConsts:
    """Problem-level inputs of the formulas for one stationary choice."""
    st, mv = problem.inputs[roles.stat_input], problem.inputs[roles.mov_input]
    names = [o.dtype for o in problem.inputs]
    return ProblemConsts(
        s_stat=dtypes.info(st.dtype).bytes,
        s_mov=dtypes.info(mv.dtype).bytes,
        s_out=dtypes.info(problem.output.dtype).bytes,
        fp32=any(dtypes.canonical_dtype(n) == "f32" for n in names),
        double_row=double_row(problem, hw),
        real_stat_bytes=problem.operand_bytes(st),
        real_mov_bytes=problem.operand_bytes(mv),
        macs=float(problem.macs),
        supported=supported,
    )


def _sizes(problem: Problem, roles: Roles, role: str) -> list[int]:
    return [problem.axes[a] for a in roles.axes[role]]


def _distinct_caps(problem: Problem, caps: tuple[int, ...], role_pairs: list[tuple[Roles, str]]) -> tuple[int, ...]:
    """Keep the caps whose tiles differ from those of every larger cap already kept."""
    seen: set[tuple[tuple[int, ...], ...]] = set()
    out: list[int] = []
    for cap in caps:
        key = tuple(split_role(_sizes(problem, r, role), cap, 1, 1).tile for r, role in role_pairs)
        if key not in seen:
            seen.add(key)
            out.append(cap)
    return tuple(out)


def _block_caps(problem: Problem, role_pairs: list[tuple[Roles, str]], tile_caps: tuple[int, ...]) -> tuple[int, ...]:
    most = max(
        math.prod(math.ceil(s / t) for s, t in zip(_sizes(problem, r, role), split_role(_sizes(problem, r, role),
                                                                                          cap, 1, 1).tile,
                                                   strict=True))
        for r, role in role_pairs
        for cap in tile_caps
    )  # fmt: skip
    return tuple(b for b in BLOCK_CAPS if b == 1 or b // 2 < most)


def core_choices(hw: TrainiumHardware) -> tuple[int, ...]:
    """Powers of two up to the chip's cores, and the core count itself."""
    out = [c for c in (1, 2, 4, 8, 16, 32, 64, 128, 256) if c <= hw.cores_per_chip]
    if hw.cores_per_chip not in out:
        out.append(hw.cores_per_chip)
    return tuple(out)


def _most_tiles(problem: Problem, role_pairs: list[tuple[Roles, str]], caps: tuple[int, ...]) -> int:
    """Most instruction tiles a role can have (smallest tile cap, one core): its most block-loop trips."""
    return max(math.prod(split_role(_sizes(problem, r, role), cap, 1, 1).hbm) for r, role in role_pairs for cap in caps)


def distinct_orders(busy: str) -> tuple[str, ...]:
    """One order per relative order of the roles that can have several blocks (`busy`).

    A role with a single block has no block loop, so where the order puts it changes neither the
    loop nest nor the cost.
    """
    seen: set[str] = set()
    out: list[str] = []
    for o in ORDERS:
        key = "".join(c for c in o if c in busy)
        if key not in seen:
            seen.add(key)
            out.append(o)
    return tuple(out)


def _distinct_cores(problem: Problem, hw: TrainiumHardware, cases: list[tuple[list[int], int]]) -> tuple[int, ...]:
    """Core counts whose split of some sharded role (`cases`: sizes, tile cap) differs from every smaller kept one."""
    kept: list[int] = []
    seen: list[set[tuple[int, ...]]] = [set() for _ in cases]
    for c in core_choices(hw):
        chips = [split_role(sizes, cap, c, 1).chip for sizes, cap in cases]
        if not kept or any(ch not in s for ch, s in zip(chips, seen, strict=True)):
            kept.append(c)
            for ch, s in zip(chips, seen, strict=True):
                s.add(ch)
    return tuple(kept)


def double_row(problem: Problem, hw: TrainiumHardware) -> bool:
    """Whether nc_matmul runs fp8 double-row (K up to 256): the preset allows it and both inputs are fp8."""
    fp8 = all(dtypes.canonical_dtype(o.dtype) in _FP8 for o in problem.inputs)
    return hw.fp8_double_row and fp8


def build_space(problem: Problem, hw: TrainiumHardware) -> SearchSpace:
    """The mapping choices of a supported binary problem, without choices that repeat a mapping.

    Dropped: tile and block caps that give the same split as a kept one; loop orders that differ
    only in where a role with a single block goes; shard roles with a single tile (nothing to
    split: the same nest as one core); core counts that split every shardable role like a smaller one.
    """
    both = [roles_of(problem, s) for s in STATIONARY]
    k_caps = ((2 * hw.pe_rows,) if double_row(problem, hw) else ()) + TILE_K_CAPS
    ts = _distinct_caps(problem, TILE_STAT_CAPS, [(r, "s") for r in both])
    tm = _distinct_caps(problem, TILE_MOV_CAPS, [(r, "m") for r in both])
    tk = _distinct_caps(problem, k_caps, [(both[0], "k")])
    caps = {"s": ts, "m": tm, "k": tk, "b": (1,)}
    pairs = {role: [(r, role) for r in both] for role in "smkb"}
    busy = "".join(role for role in "smk" if _most_tiles(problem, pairs[role], caps[role]) > 1)
    shards = tuple(role for role in ("m", "s", "b") if _most_tiles(problem, pairs[role], caps[role]) > 1)
    cases = [(_sizes(problem, r, role), int(cap)) for role in shards for r, _ in pairs[role] for cap in caps[role]]
    cores = _distinct_cores(problem, hw, cases) if shards else (1,)
    params = (
        Param(name="stationary", choices=STATIONARY, doc="input held in the array: the weight or the other one"),
        Param(name="tile_stat", choices=ts, doc="stationary free elements per nc_matmul (<= 128)"),
        Param(name="tile_mov", choices=tm, doc="moving free elements per nc_matmul (<= 512)"),
        Param(name="tile_k", choices=tk, doc="contraction elements per nc_matmul (<= 128; 256 fp8 double_row)"),
        Param(name="block_stat", choices=_block_caps(problem, pairs["s"], ts), doc="tiles per block"),
        Param(name="block_mov", choices=_block_caps(problem, pairs["m"], tm), doc="tiles per block"),
        Param(name="block_k", choices=_block_caps(problem, [(both[0], "k")], tk), doc="tiles per block"),
        Param(name="order", choices=distinct_orders(busy), doc="block loops outermost first"),
        Param(name="acc", choices=ACCS, doc="accumulate across K blocks in SBUF or in PSUM banks"),
        Param(name="cores", choices=cores, doc="NeuronCores used"),
        Param(name="shard", choices=shards or ("m",), doc="role split over the cores"),
    )
    return SearchSpace(params=params)
