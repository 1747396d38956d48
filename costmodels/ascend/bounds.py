"""Admissible latency bounds of structures of the Ascend cube space (issue #12, branch and bound).

The mapper searches a large space by *structures* (some parameters fixed, `mapper.bounds`) and skips
a structure whose bound is not below the best latency found. `cube_structure_bound` bounds one by
the smallest latency of its feasible points: `cost.cube_scores` (the formulas of hardware-facts.md
§3.2, steps 1-6, and the checks of `cost.cube_checks`) over the box of codes the fixed choices leave
(`param_tables.grid_fields` on `Prepared.tables`, cube_tables.py), ``inf`` where no point of the box
is feasible. It is the structure's exact optimum, so it is admissible with any grid, tile or L1
choice the space offers (the core grids of ascend/grids.py included), and as tight as a bound can
be: no structure whose optimum is above the best found stays unexplored, so a search whose best
is the optimum ends with every structure scored or bounded out. It costs what scoring the
structure does (the box's cells, priced from the same small tables), so the priced box is kept
(`scoring.PricedBoxes`: the boxes of the lowest bounds and the last one, with every bound) and
scoring the same structure reads it instead of pricing it again, and a structure is bounded once
(its bound kept): each structure a search visits is priced once. `bench.ascend_bounds` prints the
bound's time per structure and the scoring's with the box priced again (before) and read (after).
Best-first asks this bound only of the structures whose cheap floor (ascend/floors.py, every
structure in one numpy pass) comes first in its order; the rest are ruled out by their floors.

Why not a roofline of the pipes: with every legal core grid (ascend/grids.py) a space has about
10x more structures (156 against 16 for a 4096^3 bf16 GEMM on ascend-910b), and the pipes' maximum
(cube, MTE1, FIX; MTE2 and the pipeline fill left out) left 10 of those 156 unexplored with a gap
bound of 13.7%, so that GEMM was not proven optimal. The same floating-point operations as scoring
give the same value (`tests/costmodels/test_structure_bounds.py` checks the bound against the best
point of many structures of random problems; tests/costmodels/ascend/test_ascend_grids.py that it
equals each grid's optimum).

Unary problems (row reductions on the vector cores) get the roofline `lower_bound`: their spaces
have at most a few hundred points, always enumerated.
"""

from __future__ import annotations

from costmodels.ascend.scoring import Prepared
from costmodels.protocol import Choice


def box(prep: Prepared, fixed: dict[str, Choice]) -> tuple[list[int], list[int]]:
    """The codes (lowest, highest per parameter) of the structure with these fixed choices.

    Raises:
        ValueError: a fixed choice names no parameter of the space, or a value it does not offer.
    """
    names = {p.name for p in prep.space.params}
    unknown = sorted(set(fixed) - names)
    if unknown:
        raise ValueError(f"no parameter {unknown[0]!r} in this space: its parameters are {sorted(names)}")
    lo, hi = [], []
    for p in prep.space.params:
        if p.name not in fixed:
            lo.append(0)
            hi.append(len(p.choices) - 1)
            continue
        if fixed[p.name] not in p.choices:
            raise ValueError(f"{p.name}={fixed[p.name]!r} is not a choice of this space: {p.choices}")
        code = p.choices.index(fixed[p.name])
        lo.append(code)
        hi.append(code)
    return lo, hi


def cube_structure_bound(prep: Prepared, fixed: dict[str, Choice]) -> float:
    """Seconds no feasible point of the binary problem's space with these fixed choices can beat."""
    lo, hi = box(prep, fixed)
    key = (tuple(lo), tuple(hi))
    if key not in prep.boxes.bounds:
        prep.price_box(lo, hi)  # kept (`PricedBoxes`): scoring the structure reads it instead of pricing it again
    return prep.boxes.bounds[key]
