"""Targets whose whole search space a test can enumerate.

Trainium's default space offers every tile count (1e8 points and more on small problems: a
64x128x96 GEMM has 511 M on trn2), which only best-first's bound proves optimal; a test that scores
a whole space, or every sub-space of one, takes that family's ladder (`tile_space="ladder"`), whose
bounds and optima are the same formulas on fewer tile choices. The every-tile space is checked
against enumeration on small problems in tests/costmodels/trainium/test_trainium_tile_bounds.py.
"""

from __future__ import annotations

from typing import Any

from costmodels.registry import get_target


def enumerable_target(preset: str) -> Any:
    """The preset's target; a Trainium one (its hardware has a ``tile_space``) with its ladder tile space."""
    target = get_target(preset)
    if "tile_space" in type(target.hardware).model_fields:
        return get_target(preset, {"tile_space": "ladder"})
    return target
