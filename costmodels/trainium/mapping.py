"""Points to loop nests and back: build a Trainium `Mapping`, and read its numbers for the formulas.

Levels, outermost first (costmodels.trainium.nest.LEVELS):

- ``chip``: spatial loops over NeuronCores (one role or a pair of roles sharded; never the contraction);
- ``hbm``: block loops, batch axes outermost, then the roles in the ``order`` knob; each
  iteration DMAs an SBUF block of both inputs;
- ``sbuf``: loops over the instruction tiles of one block. With ``acc="sbuf"`` the contraction
  tiles are innermost (one PSUM accumulator at a time, added into an SBUF fp32 accumulator after
  each block of K); with ``acc="psum"`` they are outermost and every output tile of the open
  blocks keeps its own PSUM bank until K is done;
- ``nc_matmul``: one instruction: contraction (partitions), stationary free, moving free.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from costmodels.family import zero_fill
from costmodels.ir import Level, Loop, Mapping
from costmodels.trainium.cost import Quantities, fetches, live_output_blocks, role_trips
from costmodels.trainium.nest import LEVELS, ROLE_CODE, B, K, M, Roles, RoleSplit, S, role_splits, roles_of
from workload.problem import Problem


def _loops(roles: Roles, splits: dict[str, RoleSplit], order: str, level: str, spatial: bool) -> list[Loop]:
    out: list[Loop] = []
    for role in order:
        for axis, f in zip(roles.axes[role], getattr(splits[role], level), strict=True):
            if f > 1:
                out.append(Loop(axis=axis, factor=f, spatial=spatial))
    return out


#: the point's whole-number parameters: each at least 1
POSITIVE = ("tile_stat", "tile_mov", "tile_k", "block_stat", "block_mov", "block_k", "cores")


def point_errors(point: dict[str, object]) -> list[str]:
    """Why `point` is not a point `build_mapping` can read (empty when it is): each parameter present, the sizes and
    core counts whole and positive, the loop order a permutation of s, m and k, the shard a role or a pair of roles."""
    errs = [f"{n} is missing" for n in (*POSITIVE, "stationary", "order", "acc", "shard") if n not in point]
    for name in POSITIVE:
        v = point.get(name)
        if name in point and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < 1):
            errs.append(f"{name}={v!r} must be a whole number of at least 1")
    if "order" in point and sorted(str(point["order"])) != ["k", "m", "s"]:
        errs.append(f"order={str(point['order'])[:20]!r} must be a permutation of s, m and k (e.g. 'smk')")
    if "stationary" in point and point["stationary"] not in ("weight", "other"):
        errs.append(f"stationary={point['stationary']!r} must be 'weight' or 'other'")
    if "acc" in point and point["acc"] not in ("psum", "sbuf"):
        errs.append(f"acc={point['acc']!r} must be 'psum' or 'sbuf'")
    shard = str(point.get("shard", "m"))
    if not (shard in ("b", "s", "m") or (len(shard) >= 3 and shard[0] in "bsm" and shard[-1] in "bsm"
                                         and shard[0] != shard[-1] and shard[1:-1].isdigit()
                                         and 1 <= int(shard[1:-1]) <= 1024)):  # fmt: skip
        errs.append(f"shard={shard[:20]!r} must be a role (b, s or m) or a pair such as 'm2s' (a split of 1 to 1024)")
    return errs


def build_mapping(problem: Problem, preset: str, point: dict[str, object]) -> Mapping:
    """The loop nest of one point of the space (see the module docstring for the levels).

    Raises:
        ValueError: the point is not one it can read (`point_errors`)."""
    errs = point_errors(point)
    if errs:
        raise ValueError(f"not a point of this target: {'; '.join(errs)}")
    roles = roles_of(problem, str(point["stationary"]))
    splits = role_splits(problem, roles, point)
    order = str(point["order"])
    inner = "ksm" if point["acc"] == "psum" else "smk"
    levels = (
        Level(name="chip", loops=tuple(_loops(roles, splits, "bsmk", "chip", True))),
        Level(name="hbm", loops=tuple(_loops(roles, splits, "b" + order, "hbm", False))),
        Level(name="sbuf", loops=tuple(_loops(roles, splits, "b" + inner, "sbuf", False))),
        Level(name="nc_matmul", loops=tuple(_loops(roles, splits, "ksm", "tile", False))),
    )
    fill = zero_fill(problem, levels, roles.axes["k"])
    tk = math.prod(splits["k"].tile)
    knobs: dict[str, int | float | str | bool] = {k: v for k, v in point.items() if isinstance(v, int | float | str)}
    knobs["double_row"] = bool(tk > 128)
    return Mapping(target=preset, levels=levels, acc_dtype="f32", fill=fill, knobs=knobs)


#: the knobs `check` and `cost` read back from a mapping (the rest of the point is in its loops)
KNOBS = ("stationary", "acc")


def structure_errors(problem: Problem, mapping: Mapping) -> list[str]:
    """Reasons the mapping is not a Trainium loop nest at all (wrong levels, unknown knobs)."""
    errs: list[str] = []
    names = tuple(lvl.name for lvl in mapping.levels)
    if names != LEVELS:
        errs.append(f"levels must be {', '.join(LEVELS)} (outermost first), got {', '.join(names) or 'none'}")
    if mapping.knobs.get("stationary", "weight") not in ("weight", "other"):
        errs.append("knob stationary must be 'weight' or 'other'")
    if mapping.knobs.get("acc", "sbuf") not in ("sbuf", "psum"):
        errs.append("knob acc must be 'sbuf' or 'psum'")
    known = set(problem.axes)
    errs += [f"loop over unknown axis {lp.axis}" for _, lp in mapping.loops() if lp.axis not in known]
    return errs


def mapping_quantities(problem: Problem, mapping: Mapping) -> tuple[Roles, Quantities]:
    """Read the formula inputs from a mapping's loops (arrays of length 1)."""
    roles = roles_of(problem, str(mapping.knobs.get("stationary", "weight")))
    by_name = {lvl.name: lvl for lvl in mapping.levels}

    def prod(level: str, role: str) -> int:
        lvl = by_name.get(level)
        if lvl is None:
            return 1
        return math.prod(lp.factor for lp in lvl.loops if lp.axis in roles.axes[role])

    hbm = by_name.get("hbm")
    loops = [lp for lp in hbm.loops if lp.axis in problem.axes] if hbm else []
    trips = np.asarray([[lp.factor for lp in loops] or [1]], dtype=float)
    codes = np.asarray([[ROLE_CODE[roles.role_of(lp.axis)] for lp in loops] or [0]], dtype=np.int64)
    chip = by_name.get("chip")
    cores = math.prod(lp.factor for lp in chip.loops) if chip else 1

    def arr(x: float) -> np.ndarray:
        return np.asarray([x], dtype=float)

    q = Quantities(
        ts=arr(prod("nc_matmul", "s")),
        tm=arr(prod("nc_matmul", "m")),
        tk=arr(prod("nc_matmul", "k")),
        tb=arr(prod("nc_matmul", "b")),
        bs=arr(prod("sbuf", "s")),
        bm=arr(prod("sbuf", "m")),
        bk=arr(prod("sbuf", "k")),
        bb=arr(prod("sbuf", "b")),
        hs=role_trips(trips, codes, S),
        hm=role_trips(trips, codes, M),
        hk=role_trips(trips, codes, K),
        hb=role_trips(trips, codes, B),
        fetch_stat=fetches(trips, codes, (B, S, K)),
        fetch_mov=fetches(trips, codes, (B, M, K)),
        live_out=live_output_blocks(trips, codes),
        cores=arr(cores),
        chip_k=arr(prod("chip", "k")),
        acc_psum=np.asarray([mapping.knobs.get("acc", "sbuf") == "psum"]),
    )
    return roles, q
