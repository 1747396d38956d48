"""The settings of one search request: strategy, objectives, budget and seed.

Every field takes part in the cache key (see `mapper.cache`): change any of them and the
mapper searches again. The defaults are the "default budget" the benchmark measures.

A search stops for one of the `StopReason`s below; ``enumerated``, ``space-exhausted`` and
``lower-bound`` come with a proof of optimality over the target's search space (the result's
`Certificate` says what it covers; ``proven_optimal`` follows it). ``converged`` is the time-to-result lever: when the
best has not improved for `patience` trials (or `patience_seconds`), more trials rarely pay, so
the search returns what it has and says it is not a proof (set ``patience=0`` to spend the whole
budget). `inner_points` None gives each trial's numpy sub-space `mapper.planning.inner_size`'s
points (`DEFAULT_INNER`, or `CELLS_INNER` in a best-first search whose structures' cells decide what it
scores): a rule on the space and the target, so a seeded request searches the same way on any machine.

`OBJECTIVES` lists what a request may ask to minimise: the objectives some registered target
prices (`Target.objectives`); every family prices ``latency``, ``offchip_bytes``, ``footprint`` and
``energy`` (`costmodels.energy`). An objective the `CostReport` knows but no target prices would
not be offered until a target prices it; the CLI and the API read this list.
"""

from __future__ import annotations

from functools import cache
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from costmodels.protocol import OBJECTIVES as KNOWN_OBJECTIVES

Strategy = Literal["auto", "bestfirst", "tpe", "random", "cmaes", "nsga2", "exhaustive"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)


@cache
def priced_objectives() -> tuple[str, ...]:
    """The objectives at least one registered target prices, in the protocol's order."""
    from costmodels.registry import get_target, target_names

    priced = {o for name in target_names() for o in get_target(name).objectives}
    return tuple(o for o in KNOWN_OBJECTIVES if o in priced)


#: objectives a request may ask for: those some target prices
OBJECTIVES: tuple[str, ...] = priced_objectives()

StopReason = Literal[
    "enumerated",  # the whole space was scored: the answer is optimal
    "space-exhausted",  # every structural choice was tried (each with its sub-space enumerated)
    "lower-bound",  # a mapping reached the roofline bound: nothing can be faster
    "converged",  # no improvement over `patience` trials (or `patience_seconds`): not a proof
    "trials",  # the trial budget ran out
    "seconds",  # the time budget ran out
    "cancelled",  # the caller cancelled the search (the best found so far is kept): not a proof
]
#: the stops that leave part of the space unsearched for want of budget (or patience): no proof of anything there
BUDGET_STOPS: tuple[StopReason, ...] = ("converged", "trials", "seconds", "cancelled")


#: the largest budgets a search takes (`SearchSettings`); a service sets its own limits at or below them
MAX_TRIALS = 1_000_000
MAX_SECONDS = 86_400.0


class SearchSettings(BaseModel):
    """How to search: all fields are part of the result's cache key."""

    model_config = ConfigDict(frozen=True)
    strategy: Strategy = "auto"
    objectives: tuple[str, ...] = ("latency",)
    max_trials: int = Field(default=200, ge=1, le=MAX_TRIALS, description="Optuna trials at most")
    max_seconds: float = Field(default=20.0, gt=0, le=MAX_SECONDS, description="wall-clock budget of the search")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    warm_start: bool = Field(default=True, description="enqueue the target's rule-of-thumb points first")
    inner_points: int | None = Field(
        default=None,
        ge=0,
        le=1 << 22,
        description="points of a sub-space scored with numpy per trial (0: one point per trial; "
        "None: 65,536, or 262,144 in a best-first search where the target's cells decide which points "
        "are scored; a rule on the space and the target, never a measured speed)",
    )
    patience: int = Field(
        default=40,
        ge=0,
        description="stop (reason 'converged') after this many trials without improvement (0: never)",
    )
    patience_seconds: float = Field(
        default=0.0,
        ge=0,
        description="stop (reason 'converged') after this long without improvement (0: never; timing-dependent)",
    )
    enumerate_limit: int = Field(
        default=2_000_000,
        ge=0,
        description="under strategy auto, spaces up to this many points are enumerated exactly; the choice depends "
        "on the space, not on the machine's speed, so a seeded request takes the same path anywhere",
    )
    probe_points: int = Field(
        default=1 << 14,
        ge=1,
        description="under strategy auto, points scored to measure the scorer's rate, for information only "
        "(they are the first chunk of an enumeration)",
    )
    chunk: int = Field(default=1 << 16, ge=1, description="points scored per numpy batch when enumerating")

    @field_validator("objectives")
    @classmethod
    def _known_objectives(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("give at least one objective")
        for name in v:
            if name in KNOWN_OBJECTIVES and name not in OBJECTIVES:
                raise ValueError(
                    f"objective {name!r} is priced by no target yet: the priced objectives are {', '.join(OBJECTIVES)}"
                )
            if name not in OBJECTIVES:
                raise ValueError(f"unknown objective {name!r}: use one of {', '.join(OBJECTIVES)}")
        if len(set(v)) != len(v):
            raise ValueError("an objective is listed twice")
        return v

    @property
    def multi_objective(self) -> bool:
        return len(self.objectives) > 1
