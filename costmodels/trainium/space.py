"""The Trainium mapping space: its parameters and the choices worth offering for a problem.

Parameters (hardware-facts.md §2.2 step 1 and nki-nc_matmul.txt limits):

- ``stationary``: which input sits in the array: the weight, or the other input;
- ``tile_stat`` / ``tile_mov`` / ``tile_k``: caps of the instruction tile (stationary free <= 128,
  moving free <= 512, contraction <= 128, or 256 with fp8 double_row on NeuronCore-v3);
- ``block_stat`` / ``block_mov`` / ``block_k``: instruction tiles per SBUF block and role;
- ``order``: block loops outermost first (s = stationary free, m = moving free, k = contraction);
- ``acc``: accumulate across K blocks in an SBUF fp32 tile (``sbuf``) or keep PSUM banks (``psum``);
- ``cores`` and ``shard``: NeuronCores used and the role split over them: one role takes them
  all, or a pair of roles shares them (``m2s``: 2 on m, the rest on s; `pair_shards`).

Choices that give the same loop nest as a kept choice for this problem are dropped (see
`build_space`), so small problems have small spaces.

Tile caps come from `costmodels.trainium.tiles` (legal tiles, rule T1, the ladders); the space
sizes before and after the rules are in `build_space`. The space is a product of choices, so a
choice is dropped only when it repeats a mapping at every point: ``cores=1`` still comes with
every shard choice (the same nest).
"""

from __future__ import annotations

import itertools
import math

from costmodels.protocol import Param, SearchSpace
from costmodels.trainium.cost import ProblemConsts
from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.nest import Roles, roles_of, shard_cores, shard_roles, split_inner, split_outer, split_role
from costmodels.trainium.orders import distinct_orders
from costmodels.trainium.tiles import FLOORS, POINT_BUDGET, POW2, THREE_HALVES, every_tile, ladder, role_limit
from workload import dtypes
from workload.problem import Problem

BLOCK_CAPS: tuple[int, ...] = (1, 2, 4, 8, 16)
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


def distinct_caps(problem: Problem, caps: tuple[int, ...], role_pairs: list[tuple[Roles, str]]) -> tuple[int, ...]:
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


def pair_shards(shards: tuple[str, ...], hw: TrainiumHardware) -> tuple[str, ...]:
    """Splits of the cores over two of the shardable roles `shards`, in both orientations.

    For each pair (x, y) and each divisor d of the chip's cores with 1 < d < cores, ``x{d}y``
    gives x d cores and y the rest (`shard_cores`): on trn2 (8 cores) ``m2s`` is 2 x 4 and ``m4s``
    4 x 2, so both orientations of every factorisation are offered once. None on a chip whose
    core count is prime (trn1's 2 cores: one role takes them all).
    """
    n = hw.cores_per_chip
    divs = [d for d in range(2, n) if n % d == 0]
    return tuple(f"{x}{d}{y}" for x, y in itertools.combinations(shards, 2) for d in divs)


def _chip_classes(
    problem: Problem, hw: TrainiumHardware, roles: Roles, role: str, caps: tuple[int, ...], shards: tuple[str, ...]
) -> tuple[int, ...]:
    """One tile cap per class of caps that split a role over every number of cores alike.

    `_distinct_cores` keys a case by the chip factors of its roles only, so two caps with the same
    chip factors for every core share give the same keys: keeping one of them keeps the same core
    counts (an exact shortcut: every tile count offered would make the pair shards' cases a product
    of thousands of caps).
    """
    sizes = _sizes(problem, roles, role)
    # the shares `_distinct_cores` asks for: what any shard gives this role of any core count
    shares = sorted({shard_cores(sh, c).get(role, 1) for c in core_choices(hw) for sh in shards})
    seen: dict[tuple[tuple[int, ...], ...], int] = {}
    for cap in caps:
        tile = split_inner(sizes, cap)
        counts = [-(-n // t) for n, t in zip(sizes, tile, strict=True)]
        seen.setdefault(tuple(split_outer(counts, n) for n in shares), cap)
    return tuple(seen.values())


def _distinct_cores(hw: TrainiumHardware, cases: list[tuple[str, list[tuple[str, list[int], int]]]]) -> tuple[int, ...]:
    """Core counts whose split of some case differs from every smaller kept one.

    A case is a shard choice with, per role it names, (role, sizes, tile cap); its split for a
    core count is the chip factors of each of those roles (`shard_cores`, `split_role`).
    """
    kept: list[int] = []
    seen: list[set[tuple[tuple[int, ...], ...]]] = [set() for _ in cases]
    for c in core_choices(hw):
        keys = []
        for shard, items in cases:
            share = shard_cores(shard, c)
            keys.append(tuple(split_role(sizes, cap, share.get(role, 1), 1).chip for role, sizes, cap in items))
        if not kept or any(k not in s for k, s in zip(keys, seen, strict=True)):
            kept.append(c)
            for k, s in zip(keys, seen, strict=True):
                s.add(k)
    return tuple(kept)


def double_row(problem: Problem, hw: TrainiumHardware) -> bool:
    """Whether nc_matmul runs fp8 double-row (K up to 256): the preset allows it and both inputs are fp8."""
    fp8 = all(dtypes.canonical_dtype(o.dtype) in _FP8 for o in problem.inputs)
    return hw.fp8_double_row and fp8


#: tile sets `build_space` takes per role: a ladder of `tiles.LADDERS`, or every legal tile (``EVERY``)
EVERY = "every"


def tile_caps(problem: Problem, hw: TrainiumHardware, role: str, kind: str) -> tuple[int, ...]:
    """The tile caps of a role before merging: a ladder (`tiles.ladder`) or every legal tile (``EVERY``)."""
    limit = role_limit(hw, role, double_row(problem, hw))
    return every_tile(limit) if kind == EVERY else ladder(limit, FLOORS[role], kind)


#: ``tiles`` of `build_space` for the ladder space offered before every tile count was (issue #12)
LADDER = "ladder"


def build_space(problem: Problem, hw: TrainiumHardware, *, tiles: str | dict[str, str] = EVERY) -> SearchSpace:
    """The mapping choices of a supported binary problem, without choices that repeat a mapping.

    Tiles (`costmodels.trainium.tiles`): rule T1 offers balanced tiles only, one per tile count, and
    by default (``tiles=EVERY``) every count of every role: the space is the legal space after
    the proved rules and the merges below, except the block caps (`BLOCK_CAPS`, see
    `costmodels.trainium.tiles`). ``tiles=LADDER`` gives the space offered before: per role
    (moving, stationary, contraction, in that order) the ``3 * 2^a`` ladder (`tiles.THREE_HALVES`)
    while the space stays within `tiles.POINT_BUDGET` points, else the powers of two
    (`tiles.POW2`); a dict names a ladder (or ``EVERY``) per role ``s``/``m``/``k``.

    Dropped: tile and block caps that give the same split as a kept one; loop orders that differ
    only in where a role with a single block goes; shard roles with a single tile (nothing to
    split: the same nest as one core); core counts that split every shardable role like a smaller one.

    Sizes (bf16, batch 1; `tests/costmodels/trainium/test_trainium_tiles.py` recomputes them): every
    tile size with no rule is the product of every choice (2 stationary x 128 x 512 x 128 tiles x
    5^3 block caps x 6 orders x 2 accumulators x cores x shards: 3 roles, plus the 6 pairs on trn2);
    offered (the default) is after rule T1 and the merges above; the ladder is ``tiles=LADDER``
    (the space offered before, proven over by enumeration) and pow2 the powers of two alone:

    ==============================  ===================  ================  =========  =========
    problem, preset                 every tile, no rule  offered (T1)      ladder     pow2
    ==============================  ===================  ================  =========  =========
    4096^3 GEMM, trn1               150,994,944,000      13,271,040,000    1,260,000  432,000
    4096^3 GEMM, trn2               905,969,664,000      53,084,160,000    1,728,000  1,728,000
    ResNet-50 layer1.0.conv2, trn1  150,994,944,000      108,864,000       648,000    432,000
    ResNet-50 layer1.0.conv2, trn2  905,969,664,000      435,456,000       1,728,000  1,728,000
    ==============================  ===================  ================  =========  =========

    The offered space is past the mapper's 2,000,000-point enumeration for most problems: ``auto``
    then runs best-first branch and bound with the tile choices as structures
    (`TrainiumTarget.structural_params`) and every structure's admissible bound computed at once
    (`costmodels.trainium.bounds.tile_bounds`), which proves the optimum over the offered space.
    """
    if tiles == LADDER:
        kinds = {"s": POW2, "m": POW2, "k": POW2}
        space = _space(problem, hw, kinds)
        for role in ("m", "s", "k"):
            wider = _space(problem, hw, {**kinds, role: THREE_HALVES})
            if wider.size <= POINT_BUDGET:
                kinds[role], space = THREE_HALVES, wider
        return space
    if isinstance(tiles, str):
        tiles = {"s": tiles, "m": tiles, "k": tiles}
    return _space(problem, hw, tiles)


def _pow2_first(caps: tuple[int, ...]) -> tuple[int, ...]:
    """Powers of two first (largest first), then the other caps: a merged split keeps its power-of-two cap."""
    return tuple(sorted(caps, key=lambda c: (c & (c - 1) != 0, -c)))


def _space(problem: Problem, hw: TrainiumHardware, kinds: dict[str, str]) -> SearchSpace:
    both = [roles_of(problem, s) for s in STATIONARY]
    caps_of = {role: _pow2_first(tile_caps(problem, hw, role, kinds[role])) for role in "smk"}
    ts = distinct_caps(problem, caps_of["s"], [(r, "s") for r in both])
    tm = distinct_caps(problem, caps_of["m"], [(r, "m") for r in both])
    tk = distinct_caps(problem, caps_of["k"], [(both[0], "k")])
    ts, tm, tk = (tuple(sorted(c, reverse=True)) for c in (ts, tm, tk))
    caps = {"s": ts, "m": tm, "k": tk, "b": (1,)}
    pairs = {role: [(r, role) for r in both] for role in "smkb"}
    busy = "".join(role for role in "smk" if _most_tiles(problem, pairs[role], caps[role]) > 1)
    singles = tuple(role for role in ("m", "s", "b") if _most_tiles(problem, pairs[role], caps[role]) > 1)
    shards = singles + pair_shards(singles, hw)
    cases = [
        (sh, [(role, _sizes(problem, r, role), int(cap)) for role, cap in zip(shard_roles(sh), combo, strict=True)])
        for sh in shards
        for r in both
        for combo in itertools.product(
            *(_chip_classes(problem, hw, r, role, caps[role], shards) for role in shard_roles(sh))
        )
    ]
    cores = _distinct_cores(hw, cases) if shards else (1,)
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
        Param(name="shard", choices=shards or ("m",), doc="role or pair of roles (m2s) over the cores"),
    )
    return SearchSpace(params=params)
