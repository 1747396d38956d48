"""Targets whose whole search space a test can enumerate.

Trainium's default space offers every tile count (1e8 points and more on small problems: a
64x128x96 GEMM has 511 M on trn2), which only best-first's bound proves optimal; a test that scores
a whole space, or every sub-space of one, takes that family's ladder (`tile_space="ladder"`), whose
bounds and optima are the same formulas on fewer tile choices. The every-tile space is checked
against enumeration on small problems in tests/costmodels/trainium/test_trainium_tile_bounds.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from costmodels.protocol import Choice, Param, SearchSpace
from costmodels.registry import get_target


def enumerable_target(preset: str) -> Any:
    """The preset's target; a Trainium one (its hardware has a ``tile_space``) with its ladder tile space."""
    target = get_target(preset)
    if "tile_space" in type(target.hardware).model_fields:
        return get_target(preset, {"tile_space": "ladder"})
    return target


def random_subgrid(space: SearchSpace, rng: np.random.Generator, points: int) -> dict[str, np.ndarray]:
    """The codes of a random sub-grid of at most `points` points: a few random choices of every
    parameter, all their combinations (a product, so a target that prices sub-grids, as Trainium's
    `SubgridScorer` does, prices it in one pass; scattered points would each be a sub-grid of their own)."""
    picks: list[np.ndarray] = []
    budget = float(points)
    for i, p in enumerate(space.params):
        take = max(1, min(len(p.choices), int(budget ** (1 / (len(space.params) - i)))))
        picks.append(np.sort(rng.choice(len(p.choices), size=take, replace=False)))
        budget /= take
    grid = np.meshgrid(*picks, indexing="ij")
    return {p.name: g.reshape(-1).astype(np.intp) for p, g in zip(space.params, grid, strict=True)}


def narrowed(space: SearchSpace, choices: Mapping[str, tuple[Choice, ...]]) -> SearchSpace:
    """`space` with the named parameters' choices replaced by `choices` (the others, and every parameter's order
    and doc, as they are): a sub-space to enumerate, e.g. one slab per choice of a wide parameter."""
    return SearchSpace(
        params=tuple(Param(name=p.name, choices=choices[p.name], doc=p.doc) if p.name in choices else p
                     for p in space.params)
    )  # fmt: skip


def columns_at(space: SearchSpace, rows: np.ndarray) -> dict[str, np.ndarray]:
    """`space.columns()` at the enumeration indices `rows` only (the same values and dtypes), without building
    the whole product (spaces of tens of millions of points)."""
    digits = np.unravel_index(rows, tuple(len(p.choices) for p in space.params))
    # each parameter's choices as `columns()` types them (a one-parameter space's column is its choices)
    return {p.name: SearchSpace(params=(p,)).columns()[p.name][d] for p, d in zip(space.params, digits, strict=True)}
