"""Admissible latency bounds of structures of the Ascend cube space (issue #12, branch and bound).

The mapper searches a large space by *structures* (some parameters fixed, `mapper.bounds`) and skips
a structure whose bound is not below the best latency found. `cube_structure_bound` bounds one:
the smallest, over the structure's points, of

    max(cube, mte1, fix, min_bytes / hbm_rate) / clock

where ``cube = tiles x (head + u*v)``, ``mte1 = tiles x (a1 + b1)`` and ``fix = bo_m x bo_n / fix_rate``
are the terms of `cost._pipes` (hardware-facts.md §3.2 steps 3-4), computed from the same tables
(`Prepared.tables`, cube_tables.py) with the same floating-point operations, over the box of codes
the fixed choices leave (`param_tables.grid_fields`). The last term is `lower_bound`'s memory
roofline (the minimum bytes at the aggregate HBM rate).

Admissibility: for every point, `cost._core` gives a core time of at least each of these terms
(without double buffering the pipes are summed: ``mte2 + mte1 + cube + fix``; with it the time is
``top + (three - top) / steps >= top`` with FIX after it or overlapped, ``>= max(pipe, fix)``), and
the point's cycles are ``max(core, offchip / hbm_rate)`` with ``offchip >= min_bytes``. Sums and
maxima of non-negative floats never round below an operand, so the bound holds in floating point
too, and the minimum over the structure's points (feasible or not) is below each feasible point's
latency. MTE2 (which depends on the block loop order) is left out: the bound stays admissible, only
looser where MTE2 is the slowest pipe. `tests/costmodels/test_structure_bounds.py` checks the
bound against the best point of many structures of random problems.

Unary problems (row reductions on the vector cores) get the roofline `lower_bound`: their spaces
have at most a few hundred points, always enumerated.
"""

from __future__ import annotations

import numpy as np

from costmodels.ascend.cube_tables import CUBE_ORDER
from costmodels.ascend.scoring import Prepared
from costmodels.param_tables import grid_fields
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
    c = prep.consts
    lo, hi = box(prep, fixed)
    f = grid_fields(prep.tables, lo, hi, CUBE_ORDER)
    tiles = f["tiles_m"] * f["lknk"] * f["tiles_n"]
    cube = tiles * (c.head + f["u"] * f["v"])
    mte1 = tiles * (f["a1"] + f["b1"])
    fix = (f["bo_m"] * f["bo_n"]) / c.fix_rate
    pipes = float(np.min(np.maximum(np.maximum(cube, mte1), fix)))
    return max(pipes, c.min_bytes / c.hbm_rate) / c.clock_hz
