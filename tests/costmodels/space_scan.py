"""A whole space's latencies in one scored batch, for tests that compare bounds with every point."""

from __future__ import annotations

import numpy as np

from costmodels.protocol import Choice, Target
from workload.problem import Problem


def space_latencies(t: Target, p: Problem) -> tuple[list[tuple[str, tuple[Choice, ...]]], np.ndarray]:
    """Every point's latency (inf where infeasible), shaped by the space's parameters in C order."""
    space = t.space(p)
    shape = tuple(len(q.choices) for q in space.params)
    codes = np.unravel_index(np.arange(space.size), shape)
    s = t.score_codes(p, {q.name: c for q, c in zip(space.params, codes, strict=True)})
    lat = np.where(s.feasible, s.objectives["latency"], np.inf).reshape(shape)
    return [(q.name, q.choices) for q in space.params], lat
