"""What a search returns: `TuneResult`, a JSON-serialisable record of the answer and how it was found."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from costmodels.ir import Mapping
from costmodels.protocol import Choice, CostReport, LowerBound
from mapper.settings import SearchSettings, StopReason


class ViolationCount(BaseModel):
    """How many trials one constraint ruled out, with a message explaining it."""

    model_config = ConfigDict(frozen=True)
    code: str
    count: int
    message: str


class TrialCounts(BaseModel):
    """How the budget was spent."""

    model_config = ConfigDict(frozen=True)
    trials: int = Field(description="Optuna trials run (0 for exact enumeration)")
    complete: int = Field(description="trials that found a feasible mapping")
    infeasible: int = Field(description="trials whose every point violated a constraint")
    duplicates: int = Field(default=0, description="trials repeating an earlier structural choice (not rescored)")
    points_scored: int = Field(description="mappings priced, counting every point of each scored sub-space")
    feasible_points: int | None = Field(default=None, description="feasible points (exact enumeration only)")
    top_violations: tuple[ViolationCount, ...] = ()


class ParetoPoint(BaseModel):
    """One mapping of the Pareto front of several objectives."""

    model_config = ConfigDict(frozen=True)
    point: dict[str, Choice]
    values: dict[str, float]


class TuneResult(BaseModel):
    """The best mapping of a problem on a target, with the evidence for it."""

    model_config = ConfigDict(frozen=True)
    key: str = Field(description="cache key of the request")
    problem_hash: str
    problem: str = Field(description="one-line summary of the problem")
    target: str
    family: str
    overrides: dict[str, Any] = Field(default_factory=dict)
    cost_model_version: str
    settings: SearchSettings
    strategy: str = Field(description="strategy actually used (auto resolved)")
    objectives: tuple[str, ...]
    point: dict[str, Choice] | None = Field(description="the best point of the target's space")
    mapping: Mapping | None = Field(description="the best mapping (loop-nest IR)")
    cost: CostReport | None
    values: dict[str, float] = Field(default_factory=dict, description="objective values of the best mapping")
    lower_bound: LowerBound
    gap: float | None = Field(description="cycles / roofline lower bound - 1 of the best mapping")
    proven_optimal: bool
    stop_reason: StopReason
    trace: list[float | None] = Field(description="best first objective after each trial (or enumeration chunk)")
    trace_points: list[int] = Field(default_factory=list, description="points scored after each trial (or chunk)")
    counts: TrialCounts
    inner_points: int = Field(default=0, description="points of the sub-space scored per trial (0: one point)")
    scorer_rate: float | None = Field(default=None, description="measured scoring rate, points/s, if probed")
    pareto: list[ParetoPoint] = Field(default_factory=list)
    validation: dict[str, Any] | None = Field(default=None, description="executor's validation report")
    validation_passed: bool | None = Field(
        default=None,
        description="True: validated and passed; False: validation failed (or raised); None: not validated or "
        "not checked (validation.status and notes say why)",
    )
    render: str = ""
    seconds: float = Field(description="time the search took (a cached result keeps the original figure)")
    cached: bool = False
    notes: list[str] = Field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return self.mapping is not None

    def best_value(self, objective: str | None = None) -> float | None:
        """Value of an objective (the first by default) for the best mapping."""
        return self.values.get(objective or self.objectives[0])
