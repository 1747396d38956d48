"""A whole space's latencies in one scored batch, for tests that compare bounds with every point."""

from __future__ import annotations

import math
import random

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


def sample_product(rng: random.Random, sizes: list[int], k: int) -> list[tuple[int, ...]]:
    """``rng.sample(list(itertools.product(*map(range, sizes))), min(n, k))``, the same draws and combos, without
    listing the product (millions of tuples where many parameters are fixed): `sample` picks positions
    from the length alone, and a position of the product (last index fastest) is decoded in place."""
    n = math.prod(sizes)
    return [tuple(int(i) for i in np.unravel_index(j, sizes)) for j in rng.sample(range(n), min(n, k))]
