"""Rule-of-thumb starting points for the RNGD mapping search.

contraction-engine-rngd.txt, Batched MatMul: "use K contraction when K is large (maximizes
Reducer efficiency), V vectorized when the batch axis V is large (maximizes temporal
parallelism), and N x M tiled when both output axes are large". Convolutions start from the
shift-reuse mapping of the conv case studies when it applies.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from costmodels.cancel import checkpoint, past_deadline
from costmodels.protocol import Choice, SearchSpace
from costmodels.rngd.hardware import RngdHardware
from costmodels.rngd.space import grid_parts, roles_of
from workload.problem import Problem

FAMILIES = ("k", "v", "nm", "shift")


def rule_family(problem: Problem) -> str:
    """The placement the reference's rule of thumb picks for the problem."""
    r = roles_of(problem)
    size = {role: int(np.prod([r.sizes[a] for a in r.axes[role]])) for role in ("b", "m", "n", "k")}
    if r.conv is not None and r.conv.kernel[1] > 1:
        return "shift"
    if size["k"] >= max(size["b"], min(size["m"], size["n"])):
        return "k"
    if size["b"] >= min(size["m"], size["n"]):
        return "v"
    return "nm"


def family_mask(columns: dict[str, np.ndarray], p_el: int, family: str) -> np.ndarray:
    """Points of the space with the given pure placement."""
    pk = np.asarray(columns["packet_k"], dtype=np.int64)
    free = np.asarray(columns["packet_free"])
    shift = np.asarray(columns["shift"], dtype=bool)
    if family == "shift":
        return shift
    if family == "k":
        return ~shift & (pk >= p_el)
    role = "b" if family == "v" else "m"
    return ~shift & (pk == 1) & (free == role)


#: the choices a structure of the space fixes here (`bounded_points`): the categorical ones and clusters
STRUCTURAL = ("clusters", "cluster_role", "slice_role", "shift", "double_buffer", "packet_free", "inner", "feed_flits")
#: structures `bounded_points` adds at most
BOUNDED_LIMIT = 128


def bounded_points(
    space: SearchSpace, base: dict[str, Choice], bound: Callable[[dict[str, Choice]], float], best: float
) -> list[dict[str, Choice]]:
    """`base` moved into each structure whose latency bound is below `best`, lowest bound first.

    A search that scores these structures first finds the best of the ones that can still beat
    `best` early, and can then bound the others out (`mapper.bounds`). Past the search's deadline
    (`costmodels.cancel.past_deadline`) it stops bounding and keeps the structures found so far: the
    search ends at its next step anyway, and these are only its first visits.
    """
    ch = {p.name: p.choices for p in space.params if p.name in STRUCTURAL}
    names = list(ch)
    found: list[tuple[float, dict[str, Choice]]] = []
    for combo in itertools.product(*ch.values()):
        checkpoint()  # a cancelled search stops between two bounds (`costmodels.cancel`)
        if past_deadline():
            break
        fixed = dict(zip(names, combo, strict=True))
        b = bound(fixed)
        if b < best:
            found.append((b, fixed))
    found.sort(key=lambda x: x[0])
    return [{**base, **fixed} for _, fixed in found[:BOUNDED_LIMIT]]


def warm_points(
    problem: Problem,
    hw: RngdHardware,
    space: SearchSpace,
    score: Callable[[Problem, dict[str, np.ndarray]], Any],
    bound: Callable[[dict[str, Choice]], float] | None = None,
) -> list[dict[str, Choice]]:
    """Best point of each pure placement, the rule-of-thumb placement first; then, given the space's
    structure `bound`, the structures that could beat the best of those (`bounded_points`)."""
    p_el = hw.packet_elements(roles_of(problem).in_dtype)
    cols = _coarse(space)
    lat = np.asarray(score(problem, cols).objectives["latency"], dtype=float)
    first = rule_family(problem)
    out: list[dict[str, Choice]] = []
    for fam in (first, *[f for f in FAMILIES if f != first]):
        m = family_mask(cols, p_el, fam) & np.isfinite(lat)
        if not m.any():
            continue
        i = int(np.flatnonzero(m)[np.argmin(lat[m])])
        out.append({name: _py(cols[name][i]) for name in space.names()})
    if bound is not None and out and not past_deadline():
        checkpoint()
        best = float(np.min(lat[np.isfinite(lat)]))
        out += bounded_points(space, out[0], bound, best)
    return out


POWERS_OF_4 = np.asarray([1 << (2 * i) for i in range(8)])


def _coarse(space: SearchSpace) -> dict[str, np.ndarray]:
    """A coarser grid to rank placements quickly: full packets, slice grids whose sides are powers of 4
    (and the grid of most slices), all clusters; built from the choices, never from the whole space's columns."""
    ch = {p.name: p.choices for p in space.params}
    grids = np.asarray(ch["slice_grid"], dtype=np.int64)
    a, b = grid_parts(grids)
    quad = np.isin(a, POWERS_OF_4) & np.isin(b, POWERS_OF_4)
    keep_sl = (*(int(g) for g in grids[quad]), int(grids[int(np.argmax(a * b))]))
    feeds = tuple(x for x in ch["feed_flits"] if int(x) >= 2) or ch["feed_flits"]
    params = tuple(
        p.model_copy(update={"choices": tuple(dict.fromkeys(keep_sl))}) if p.name == "slice_grid"
        else p.model_copy(update={"choices": feeds}) if p.name == "feed_flits" else p
        for p in space.params
    )  # fmt: skip
    return SearchSpace(params=params).columns()


def _py(v: Any) -> Choice:
    if isinstance(v, np.bool_ | bool):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    return str(v) if isinstance(v, np.str_) else v
