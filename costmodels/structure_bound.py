"""The optional protocol method that bounds one structure of a target's space (issue #12).

Kept in its own module rather than `costmodels.protocol` on purpose: the cost-model version of a
result (`mapper.keys.cost_model_version`) digests the shared modules a family imports, and an
optional method must not change the version of the families that do not implement it (and so
their cached results and benchmark optima). A family that implements the hook needs no import: the
protocol is structural (`isinstance(target, StructureBounded)` checks for the method). Every family
implements it: RNGD (`costmodels/rngd/bounds.py`), Trainium (`costmodels/trainium/bounds.py`), Ascend
(`costmodels/ascend/bounds.py`) and Tenstorrent (`costmodels/tenstorrent/bounds.py`).

`StructureBulkBounded` is a second optional protocol: a target that names its structural
parameters and bounds every structure of their product in one array (Trainium: the tile choices),
which best-first search uses instead of one call per structure.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from costmodels.protocol import Choice
from workload.problem import Problem


@runtime_checkable
class StructureBounded(Protocol):
    """Optional: a target that bounds the latency of every point of one structure of its space.

    The mapper splits a large space into *structures* (the choices of some parameters held fixed,
    `fixed_choices`: parameter name -> value) and scores each structure's remaining sub-space with
    `score_codes`. Branch and bound skips a structure whose bound is not below the best latency
    already found, and proves the answer optimal over the target's space once every structure is
    scored or bounded out (`mapper.bounds`).

    Contract (admissibility): for every feasible point of `space(problem)` that agrees with
    `fixed_choices`, ``structure_bound(problem, fixed_choices) <= cost(problem, mapping(problem,
    point)).seconds``. `fixed_choices` may name any subset of the space's parameters (an empty
    dict bounds the whole space). A target without this method gets the mapper's generic bound,
    the whole problem's roofline `lower_bound` (admissible for every structure, if loose); a family
    tightens it by pricing its roofline terms with the fixed choices applied (for example the
    compute cycles of a fixed placement's utilisation).
    """

    def structure_bound(self, problem: Problem, fixed_choices: dict[str, Choice]) -> float:
        """Seconds no feasible point with these fixed choices can beat."""
        ...


@runtime_checkable
class StructureBulkBounded(Protocol):
    """Optional: a target that names its structural parameters and bounds all their structures at once.

    Best-first search (`mapper.strategies.bestfirst`) then splits the space on
    `structural_params` (instead of `mapper.strategies.encoding.split_params`, which picks the
    parameters by their sizes) and orders the structures by one array instead of one call per
    structure, so a space of millions of structures is ordered in one numpy pass.

    Contract: `structural_params` names parameters of `space(problem)`; `structure_bounds(problem,
    names)` has the shape of the named parameters' choices (C order, the choices in the space's
    order), and its entry for a combination is admissible as `StructureBounded.structure_bound`
    of those fixed choices is: no feasible point with them has a lower latency (seconds).
    """

    def structural_params(self, problem: Problem) -> tuple[str, ...]:
        """The parameters whose choices make a structure (the rest is each structure's sub-space)."""
        ...

    def structure_bounds(self, problem: Problem, names: tuple[str, ...]) -> np.ndarray:
        """Seconds no feasible point beats, for every combination of the `names` choices (C order)."""
        ...
