"""Rule-of-thumb starting points for the RNGD mapping search.

contraction-engine-rngd.txt, Batched MatMul: "use K contraction when K is large (maximizes
Reducer efficiency), V vectorized when the batch axis V is large (maximizes temporal
parallelism), and N x M tiled when both output axes are large". Convolutions start from the
shift-reuse mapping of the conv case studies when it applies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from costmodels.protocol import Choice, SearchSpace
from costmodels.rngd.hardware import RngdHardware
from costmodels.rngd.space import roles_of
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


def warm_points(
    problem: Problem, hw: RngdHardware, space: SearchSpace, score: Callable[[Problem, dict[str, np.ndarray]], Any]
) -> list[dict[str, Choice]]:
    """Best point of each pure placement, the rule-of-thumb placement first."""
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
    return out


def _coarse(space: SearchSpace) -> dict[str, np.ndarray]:
    """A coarser grid to rank placements quickly: full packets, slice counts in powers of 4 (and the
    largest), all clusters; built from the choices, never from the whole space's columns."""
    ch = {p.name: p.choices for p in space.params}
    sl = [int(x) for x in ch["slices"]]
    keep_sl = (*(x for x in sl if (x & (x - 1)) == 0 and int(np.log2(x)) % 2 == 0), max(sl))
    feeds = tuple(x for x in ch["feed_flits"] if int(x) >= 2) or ch["feed_flits"]
    params = tuple(
        p.model_copy(update={"choices": tuple(dict.fromkeys(keep_sl))}) if p.name == "slices"
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
