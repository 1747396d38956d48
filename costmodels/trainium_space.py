"""The Trainium mapping space, its columns as formula inputs (vectorised), and warm starts.

Parameters (hardware-facts.md §2.2 step 1 and nki-nc_matmul.txt limits):

- ``stationary``: which input sits in the array: the weight, or the other input;
- ``tile_stat`` / ``tile_mov`` / ``tile_k``: caps of the instruction tile (stationary free <= 128,
  moving free <= 512, contraction <= 128, or 256 with fp8 double_row on NeuronCore-v3);
- ``block_stat`` / ``block_mov`` / ``block_k``: instruction tiles per SBUF block and role;
- ``order``: block loops outermost first (s = stationary free, m = moving free, k = contraction);
- ``acc``: accumulate across K blocks in an SBUF fp32 tile (``sbuf``) or keep PSUM banks (``psum``);
- ``cores`` and ``shard``: NeuronCores used and the role split over them.

Choices that give the same tiles for this problem are dropped, so small problems have small spaces.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from costmodels.protocol import Param, SearchSpace
from costmodels.trainium_formulas import ProblemConsts, Quantities
from costmodels.trainium_hw import TrainiumHardware
from costmodels.trainium_nest import ROLE_CODE, Roles, roles_of, split_role
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


def problem_consts(hw: TrainiumHardware, problem: Problem, roles: Roles, supported: bool) -> ProblemConsts:
    """Problem-level inputs of the formulas for one stationary choice."""
    st, mv = problem.inputs[roles.stat_input], problem.inputs[roles.mov_input]
    names = [o.dtype for o in problem.inputs]
    return ProblemConsts(
        s_stat=dtypes.info(st.dtype).bytes,
        s_mov=dtypes.info(mv.dtype).bytes,
        s_out=dtypes.info(problem.output.dtype).bytes,
        fp32=any(dtypes.canonical_dtype(n) == "f32" for n in names),
        double_row=hw.fp8_double_row and all(dtypes.canonical_dtype(n) in _FP8 for n in names),
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


def build_space(hw: TrainiumHardware, problem: Problem, double_row: bool) -> SearchSpace:
    """The mapping choices of a supported binary problem."""
    both = [roles_of(problem, s) for s in STATIONARY]
    k_caps = ((2 * hw.pe_rows,) if double_row and hw.fp8_double_row else ()) + TILE_K_CAPS
    ts = _distinct_caps(problem, TILE_STAT_CAPS, [(r, "s") for r in both])
    tm = _distinct_caps(problem, TILE_MOV_CAPS, [(r, "m") for r in both])
    tk = _distinct_caps(problem, k_caps, [(both[0], "k")])
    shards = ("m", "s") + (("b",) if both[0].axes["b"] and math.prod(_sizes(problem, both[0], "b")) > 1 else ())
    params = (
        Param(name="stationary", choices=STATIONARY, doc="input held in the array: the weight or the other one"),
        Param(name="tile_stat", choices=ts, doc="stationary free elements per nc_matmul (<= 128)"),
        Param(name="tile_mov", choices=tm, doc="moving free elements per nc_matmul (<= 512)"),
        Param(name="tile_k", choices=tk, doc="contraction elements per nc_matmul (<= 128; 256 fp8 double_row)"),
        Param(name="block_stat", choices=_block_caps(problem, [(r, "s") for r in both], ts), doc="tiles per block"),
        Param(name="block_mov", choices=_block_caps(problem, [(r, "m") for r in both], tm), doc="tiles per block"),
        Param(name="block_k", choices=_block_caps(problem, [(both[0], "k")], tk), doc="tiles per block"),
        Param(name="order", choices=ORDERS, doc="block loops outermost first"),
        Param(name="acc", choices=ACCS, doc="accumulate across K blocks in SBUF or in PSUM banks"),
        Param(name="cores", choices=core_choices(hw), doc="NeuronCores used"),
        Param(name="shard", choices=shards, doc="role split over the cores"),
    )
    return SearchSpace(params=params)


def _index(col: np.ndarray, choices: tuple[object, ...], name: str) -> np.ndarray:
    """Positions of each column value among `choices` (vectorised through the unique values)."""
    uniq, inv = np.unique(np.asarray(col), return_inverse=True)
    pos = {c: i for i, c in enumerate(choices)}
    try:
        lut = np.asarray([pos[u.item() if isinstance(u, np.generic) else u] for u in uniq], dtype=np.int64)
    except KeyError as e:
        raise ValueError(f"{name}={e.args[0]!r} is not a choice of this space") from None
    return lut[inv.reshape(-1)]


def columns_quantities(
    problem: Problem, space: SearchSpace, roles: Roles, cols: dict[str, np.ndarray], sel: np.ndarray
) -> Quantities:
    """Formula inputs of the points `sel` of `cols` (all with the stationary choice of `roles`).

    Each role's split depends on (tile cap, cores on that role, block cap) only, so it is
    tabulated over the choices with `split_role` (the function `build_mapping` uses) and looked up.
    """
    ch = {p.name: p.choices for p in space.params}
    idx = {name: _index(cols[name], ch[name], name)[sel] for name in ch}
    n = int(sel.sum()) if sel.dtype == bool else len(sel)
    cores_ch = ch["cores"]
    keys = {"s": ("tile_stat", "block_stat"), "m": ("tile_mov", "block_mov"), "k": ("tile_k", "block_k")}
    tab: dict[str, dict[str, np.ndarray]] = {}
    for role in "bsmk":
        sizes = _sizes(problem, roles, role)
        t_ch = ch[keys[role][0]] if role != "b" else (1,)
        b_ch = ch[keys[role][1]] if role != "b" else (1,)
        shape = (len(t_ch), len(cores_ch), len(b_ch))
        t = {f: np.ones(shape) for f in ("tile", "sbuf", "hbm", "chip")}
        for (i, tc), (j, cc), (k, bc) in itertools.product(enumerate(t_ch), enumerate(cores_ch), enumerate(b_ch)):
            sp = split_role(sizes, int(tc), int(cc), int(bc))
            for f in t:
                t[f][i, j, k] = math.prod(getattr(sp, f))
        tab[role] = t
    shard = np.asarray(ch["shard"], dtype=object)[idx["shard"]]
    one = cores_ch.index(1)
    vals: dict[str, dict[str, np.ndarray]] = {}
    for role in "bsmk":
        ti = idx[keys[role][0]] if role != "b" else np.zeros(n, dtype=np.int64)
        bi = idx[keys[role][1]] if role != "b" else np.zeros(n, dtype=np.int64)
        ci = np.where(shard == role, idx["cores"], one)
        vals[role] = {f: tab[role][f][ti, ci, bi] for f in tab[role]}
    order_codes = np.asarray([[ROLE_CODE[c] for c in str(o)] for o in ch["order"]], dtype=np.int64)[idx["order"]]
    slot_roles = np.concatenate([np.zeros((n, 1), dtype=np.int64), order_codes], axis=1)
    hbm_by_code = np.stack([vals[r]["hbm"] for r in "bsmk"], axis=1)  # code order b, s, m, k
    trips = np.take_along_axis(hbm_by_code, slot_roles, axis=1)
    acc = np.asarray(ch["acc"], dtype=object)[idx["acc"]]
    return Quantities(
        ts=vals["s"]["tile"],
        tm=vals["m"]["tile"],
        tk=vals["k"]["tile"],
        tb=vals["b"]["tile"],
        bs=vals["s"]["sbuf"],
        bm=vals["m"]["sbuf"],
        bk=vals["k"]["sbuf"],
        bb=vals["b"]["sbuf"],
        trips=trips.astype(float),
        roles=slot_roles,
        cores=vals["b"]["chip"] * vals["s"]["chip"] * vals["m"]["chip"] * vals["k"]["chip"],
        chip_k=vals["k"]["chip"],
        acc_psum=acc == "psum",
    )
