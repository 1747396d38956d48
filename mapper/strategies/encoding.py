"""How an Optuna study sees a search space: parameter encodings and the structural split.

Optuna chooses the *structural* parameters of a point (placements, stationary operand, the
choices with few options); the remaining *inner* parameters form a sub-space small enough to
score whole with the target's vectorised model on every trial. Numeric parameters whose
choices are sorted numbers are suggested as an ordinal index (``suggest_int``), so TPE and
CMA-ES can learn that neighbouring tile sizes behave alike; other parameters are categorical.
CMA-ES needs every parameter numeric, so under CMA-ES all parameters are index-encoded.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import optuna

from costmodels.protocol import Choice, Param, SearchSpace

#: Optuna 5 keeps constraints in the trial (``trial.set_constraint``); this prefix marks our keys.
CONSTRAINT_PREFIX = "violation:"


def is_ordinal(param: Param) -> bool:
    """True when the choices are distinct numbers in increasing or decreasing order (tile sizes, core counts)."""
    nums = [c for c in param.choices if isinstance(c, int | float) and not isinstance(c, bool)]
    if len(nums) != len(param.choices):
        return False
    pairs = list(itertools.pairwise(nums))
    return all(a < b for a, b in pairs) or all(a > b for a, b in pairs)


@dataclass(frozen=True)
class Encoding:
    """How each parameter is suggested: by index (ordinal) or by value (categorical)."""

    params: tuple[Param, ...]
    by_index: frozenset[str]

    @classmethod
    def of(cls, params: tuple[Param, ...], *, all_index: bool = False) -> Encoding:
        return cls(params, frozenset(p.name for p in params if all_index or is_ordinal(p)))

    def suggest(self, trial: optuna.Trial) -> dict[str, Choice]:
        """Ask the trial for every parameter; return the decoded point."""
        point: dict[str, Choice] = {}
        for p in self.params:
            if len(p.choices) == 1:
                point[p.name] = p.choices[0]
            elif p.name in self.by_index:
                point[p.name] = p.choices[trial.suggest_int(p.name, 0, len(p.choices) - 1)]
            else:
                value = trial.suggest_categorical(p.name, list(p.choices))
                point[p.name] = value if isinstance(value, int | str) else str(value)
        return point

    def encode(self, point: dict[str, Choice]) -> dict[str, Choice] | None:
        """The Optuna params of a point (for `enqueue_trial`); None if it is not in the space."""
        out: dict[str, Choice] = {}
        for p in self.params:
            if p.name not in point or point[p.name] not in p.choices:
                return None
            if len(p.choices) == 1:
                continue
            v = point[p.name]
            out[p.name] = p.choices.index(v) if p.name in self.by_index else v
        return out

    @property
    def size(self) -> int:
        return math.prod(len(p.choices) for p in self.params)


def split_params(space: SearchSpace, inner_points: int) -> tuple[tuple[Param, ...], tuple[Param, ...]]:
    """Split the parameters into (structural, inner) so the inner sub-space has at most `inner_points` points.

    Inner parameters are taken greedily from the ordinal ones with the most choices (tile sizes),
    then the other ordinal ones; categorical parameters (placements, stationary operand, layouts)
    stay structural so Optuna learns them, unless the sub-space still has room for them once every
    ordinal parameter is in (scoring all their choices beats learning them). At least one
    parameter stays structural.
    """
    if inner_points <= 1 or len(space.params) <= 1:
        return space.params, ()

    def by_size(params: list[Param]) -> list[Param]:
        return sorted(params, key=lambda p: (-len(p.choices), space.params.index(p)))

    ordinal = by_size([p for p in space.params if is_ordinal(p)])
    others = by_size([p for p in space.params if not is_ordinal(p)])
    inner: set[str] = set()
    size = 1
    for group in (ordinal, others):
        for p in group:
            if len(inner) == len(space.params) - 1:
                break
            if size * len(p.choices) <= inner_points:
                inner.add(p.name)
                size *= len(p.choices)
        if len(inner) < len(ordinal):
            break  # an ordinal parameter did not fit: categoricals stay structural
    structural = tuple(p for p in space.params if p.name not in inner)
    return structural, tuple(p for p in space.params if p.name in inner)
