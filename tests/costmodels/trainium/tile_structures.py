"""Trainium targets with every tile count, and every point of one tile structure by its number (bound tests)."""

from __future__ import annotations

import random

import numpy as np

from costmodels.protocol import Choice, SearchSpace
from costmodels.registry import get_target
from costmodels.trainium.bounds import TILE_PARAMS
from costmodels.trainium.target import TrainiumTarget
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem


def every_tile_target(name: str, **hardware: object) -> TrainiumTarget:
    """The preset's target with its space of every tile count (the default; said here, as the tests rely on it).

    `hardware`: fields of the part to change (a small SBUF, where the capacities bind on small problems).
    """
    t = get_target(name, {"tile_space": "every", **hardware})
    assert isinstance(t, TrainiumTarget)
    return t


def structure_choices(space: SearchSpace, flat: int) -> dict[str, Choice]:
    """The tile choices of structure `flat` (C order over `TILE_PARAMS`, which lead the space)."""
    params = space.params[:4]
    assert tuple(q.name for q in params) == TILE_PARAMS  # the structural parameters lead
    codes = np.unravel_index(flat, [len(q.choices) for q in params])
    return {q.name: q.choices[int(c)] for q, c in zip(params, codes, strict=True)}


def structure_codes(space: SearchSpace, flat: int) -> dict[str, np.ndarray]:
    """The codes of every point of structure `flat`: its tile choices fixed, every other parameter's product."""
    fixed = structure_choices(space, flat)
    inner = space.params[4:]
    every = np.indices([len(q.choices) for q in inner]).reshape(len(inner), -1)
    codes = {q.name: np.full(every.shape[1], q.choices.index(fixed[q.name])) for q in space.params[:4]}
    codes.update({q.name: every[i] for i, q in enumerate(inner)})
    return codes


def random_problem(
    rng: random.Random,
    m: tuple[int, int] = (1, 200),
    k: tuple[int, int] = (1, 300),
    n: tuple[int, int] = (1, 400),
    channels: tuple[int, int] = (8, 40),
) -> Problem:
    """A small random GEMM (bf16 or f32), batched GEMM or conv (sizes drawn from the given ranges)."""
    kind = rng.choice(["gemm", "bgemm", "fp32", "conv"])
    sizes = {"m": rng.randint(*m), "k": rng.randint(*k), "n": rng.randint(*n)}
    if kind == "bgemm":
        return einsum("bmk,bkn->bmn", {"b": rng.randint(2, 3), **sizes}, dtype="bf16")
    if kind == "conv":
        side = rng.randint(3, 10)
        return conv2d(batch=1, in_channels=rng.randint(*channels), out_channels=rng.randint(4, 70),
                      input_height=side + 2, input_width=side, kernel=rng.choice([1, 3]))  # fmt: skip
    return einsum("mk,kn->mn", sizes, dtype="f32" if kind == "fp32" else "bf16", weight=1)
