"""The optional protocol method that bounds one structure of a target's space (issue #12).

Kept in its own module rather than `costmodels.protocol` on purpose: the cost-model version of a
result (`mapper.keys.cost_model_version`) digests the shared modules a family imports, and an
optional method must not change the version of the families that do not implement it (and so
their cached results and benchmark optima). A family that implements the hook needs no import: the
protocol is structural (`isinstance(target, StructureBounded)` checks for the method). Every family
implements it: RNGD (`costmodels/rngd/bounds.py`), Trainium (`costmodels/trainium/bounds.py`), Ascend
(`costmodels/ascend/bounds.py`) and Tenstorrent (`costmodels/tenstorrent/bounds.py`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

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
