"""Build the `Mapping` loop nest of an RNGD point, and recover the point from a mapping.

Levels, outermost first (hardware-facts.md §1.2 notation ``[Chip, Cluster, Slice, Lane, Time,
Packet]``; contraction-engine-rngd.txt dumps ``H | Row | T``):

- ``chip``: spatial loops over clusters; ``cluster``: spatial loops over slices;
- ``slice``: the outer H loops of one slice: batch, TRF chunks of N, then M (the TRF tile is
  reused across M: "broadcast across time and head dimensions", Performance);
- ``row``: spatial over the 8 rows (lanes), holding N (``Row: [N=8]``);
- ``time``: inner H loops: N/rows groups and K, in the order ``inner`` chooses (conv shift-reuse:
  ``[C/8, Fh, K, Fw]`` as in the conv case studies);
- ``packet``: the instruction tile, one packet per row per cycle (the dumps' ``T``).

Padding on a reduced axis is zero-filled in the weight (TRF ``z``, "Filter-Stride 2, Dilation 2":
``1+1#`` contracted with ``1+1z`` yields 1); every other padding point is dummy (``#``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from costmodels.family import zero_fill
from costmodels.ir import Level, Loop, Mapping
from costmodels.protocol import Choice
from costmodels.rngd.space import Roles, roles_of

POINT_KEYS: tuple[str, ...] = (
    "packet_k",
    "packet_free",
    "rows",
    "inner",
    "trf_split",
    "double_buffer",
    "clusters",
    "cluster_role",
    "slice_grid",
    "slice_role",
    "feed_flits",
    "shift",
)


def as_columns(point: dict[str, Choice]) -> dict[str, np.ndarray]:
    """One point as length-1 columns."""
    return {k: np.asarray([point[k]], dtype=object if isinstance(point[k], str) else None) for k in POINT_KEYS}


#: significance of each loop kind on its axis (smaller = more significant): the zero slot of
#: ``1+1z`` lies past every real point, rows are the inner part of N (``Row: [N=8] | H: [N/8=3]``)
_RANK = {"z": 0, "cl": 1, "sl": 2, "t": 3, "h": 4, "row": 5, "pkt": 6}


def _loop(f: dict[str, Any], key: str, axis: str, *, spatial: bool = False) -> list[tuple[str, Loop]]:
    v = int(f[f"{key}:{axis}"][0])
    return [(key, Loop(axis=axis, factor=v, spatial=spatial))] if v > 1 else []


def _with_strides(levels: list[list[tuple[str, Loop]]]) -> list[tuple[Loop, ...]]:
    """Give every loop the stride its significance implies (product of less significant factors)."""
    flat = [kl for lvl in levels for kl in lvl]
    out: list[tuple[Loop, ...]] = []
    for lvl in levels:
        loops = []
        for kind, lp in lvl:
            finer = [o.factor for k, o in flat if o.axis == lp.axis and _RANK[k] > _RANK[kind]]
            loops.append(lp.model_copy(update={"stride": int(np.prod(finer)) if finer else 1}))
        out.append(tuple(loops))
    return out


def placement_name(point: dict[str, Choice], p_el: int) -> str:
    """The reference's name of a point's placement (K contraction, V vectorized, N x M tiled, mixed)."""
    if point["shift"]:
        return "conv shift-reuse"
    if int(point["packet_k"]) >= p_el:
        return "K contraction"
    if int(point["packet_k"]) == 1:
        return "V vectorized" if point["packet_free"] == "b" else "N x M tiled"
    return f"mixed K/{'V' if point['packet_free'] == 'b' else 'M'}"


def build_levels(roles: Roles, f: dict[str, Any], point: dict[str, Choice]) -> tuple[Level, ...]:
    """The loop nest of one point (factor columns of length 1)."""
    ax = roles.axes
    order = [a for role in ("b", "m", "n", "k") for a in ax[role]]
    chip = [kl for a in order for kl in _loop(f, "cl", a, spatial=True)]
    cluster = [kl for a in order for kl in _loop(f, "sl", a, spatial=True)]
    slice_ = [kl for a in ax["b"] for kl in _loop(f, "h", a)]
    slice_ += [kl for a in ax["n"] for kl in _loop(f, "t", a)]
    slice_ += [kl for a in ax["m"] for kl in _loop(f, "h", a)]
    n_loops = [kl for a in ax["n"] for kl in _loop(f, "h", a)]
    shift = bool(point["shift"])
    if shift:
        k_order = [a for a in ax["k"] if a != "fw"] + ["fw"]
        time = n_loops + [kl for a in k_order for kl in _loop(f, "h", a)]
    else:
        k_loops = [kl for a in ax["k"] for kl in _loop(f, "h", a)]
        time = k_loops + n_loops if point["inner"] == "n" else n_loops + k_loops
    row = [kl for a in ax["n"] for kl in _loop(f, "row", a, spatial=True)]
    free = ("m",) if shift else (str(point["packet_free"]),)
    packet = [kl for role in free for a in ax[role] for kl in _loop(f, "pkt", a, spatial=True)]
    packet += [kl for a in ax["k"] for kl in _loop(f, "pkt", a, spatial=True)]
    if shift and "z:fw" in f:
        packet += _loop(f, "z", "fw", spatial=True)  # (W, 1+1z): the zero slot past the last Fw
    names = ("chip", "cluster", "slice", "row", "time", "packet")
    loops = _with_strides([chip, cluster, slice_, row, time, packet])
    return tuple(Level(name=nm, loops=lp) for nm, lp in zip(names, loops, strict=True))


def build_mapping(problem: Any, target: str, f: dict[str, Any], point: dict[str, Choice], p_el: int) -> Mapping:
    """The `Mapping` of one point (``f`` = factor columns of that point)."""
    roles = roles_of(problem)
    levels = build_levels(roles, f, point)
    w = problem.inputs[problem.weight if problem.weight is not None else 1].name
    knobs: dict[str, int | float | str | bool] = {k: point[k] for k in POINT_KEYS}
    knobs["placement"] = placement_name(point, p_el)
    knobs["input_type"] = problem.inputs[1 - (problem.weight if problem.weight is not None else 1)].dtype
    knobs["trf_type"] = problem.inputs[problem.weight if problem.weight is not None else 1].dtype
    if point["shift"] and "geo:shifts" in f:
        knobs["shift_count"] = int(f["geo:shifts"][0]) - 1
        knobs["shift_stride"] = int(f["geo:shift_stride"][0])
        knobs["packet_slots"] = int(f["geo:slots"][0])
        knobs["window"] = int(f["geo:w_v"][0] * f["geo:G"][0] + f["geo:extra"][0])
    return Mapping(
        target=target,
        levels=levels,
        acc_dtype=problem.acc_dtype,
        fill=zero_fill(problem, levels, roles.axes["k"], operands=lambda name: name == w),
        knobs=knobs,
    )
