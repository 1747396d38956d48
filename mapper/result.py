"""What a search returns: `TuneResult`, a JSON-serialisable record of the answer and how it was found."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from costmodels.ir import Mapping
from costmodels.protocol import Choice, CostReport, LowerBound
from mapper.settings import SearchSettings, StopReason


class ViolationCount(BaseModel):
    """How often one constraint ruled something out, with a message explaining it.

    `unit` says what `count` counts: ``points`` that violate the constraint among the `examined`
    points checked one by one (all of them when `examined` equals the space's size, else an
    evenly spread sample, and the message says so), or ``trials`` whose whole sub-space was
    infeasible and whose checked points (`examined` per trial) violate it.
    """

    model_config = ConfigDict(frozen=True)
    code: str
    count: int
    message: str
    unit: Literal["points", "trials"] = "trials"
    examined: int | None = Field(default=None, description="points checked for this count (per trial for trials)")


class TrialCounts(BaseModel):
    """How the budget was spent."""

    model_config = ConfigDict(frozen=True)
    trials: int = Field(description="Optuna trials run (0 for exact enumeration)")
    complete: int = Field(description="trials that scored a structure and found a feasible mapping")
    infeasible: int = Field(description="trials whose every point violated a constraint")
    duplicates: int = Field(default=0, description="trials repeating an earlier structural choice (not rescored)")
    pruned_by_bound: int = Field(default=0, description="trials whose structure was bounded out instead of scored")
    points_scored: int = Field(description="mappings priced, counting every point of each scored sub-space")
    feasible_points: int | None = Field(default=None, description="feasible points (exact enumeration only)")
    top_violations: tuple[ViolationCount, ...] = ()


class ParetoPoint(BaseModel):
    """One mapping of the Pareto front of several objectives."""

    model_config = ConfigDict(frozen=True)
    point: dict[str, Choice]
    values: dict[str, float]


class Certificate(BaseModel):
    """What a search proved about its answer, over the target's search space for the problem.

    The space is split into `structures_total` structures (the structural choices Optuna makes,
    each with a sub-space of `inner_points` points scored whole; an enumeration is one structure,
    the whole space). Every structure is scored, pruned by its admissible bound (`bound_source`,
    see `mapper.bounds`: no point of it can beat the best found), or unexplored. With no structure
    unexplored the answer is optimal over the whole space (`complete`); otherwise the optimum is
    at least ``min(best, best_remaining_bound)``, so the answer is within `gap_bound` of it.

    "Optimal" is always over `space`: the target's search space for this problem, the choices its
    model lists. A mapping outside those choices is not covered by the proof.
    """

    model_config = ConfigDict(frozen=True)
    space: str = Field(description="the space the proof covers: the target's search space for this problem")
    space_points: int = Field(ge=0, description="points of that space")
    objective: str = Field(description="the objective the bounds and best refer to (the first one requested)")
    structures_total: int = Field(ge=0)
    inner_points: int = Field(ge=0, description="points of each structure's sub-space")
    scored: int = Field(ge=0, description="structures whose whole sub-space was scored")
    pruned_by_bound: int = Field(
        ge=0,
        description="structures whose bound showed none of their points is better (several objectives: the front "
        "dominates each of their cells, or each cell it leaves open was scored and holds no feasible point, or "
        "each of their points has the values of a point of another structure counted here or scored)",
    )
    unexplored: int = Field(ge=0, description="structures neither scored nor bounded out")
    best: float | None = Field(default=None, description="best value of the objective found")
    best_remaining_bound: float | None = Field(
        default=None, description="lowest bound of an unexplored structure (None: none is left, or no bound known)"
    )
    gap_bound: float | None = Field(
        default=None,
        description="best / optimum - 1 is at most this (0: proven optimal; None: unknown, nothing feasible found "
        "or no bound)",
    )
    bound_source: str = Field(description="where the structures' bounds come from")
    front_gap: float | None = Field(
        default=None,
        ge=0,
        description="several objectives: every feasible point of the space has a point of the front found within "
        "this relative margin of it on every objective (f <= (1 + front_gap) x, each objective; the lesser of the gap "
        "to the cells' floors of the structures left unexplored and the points priced of them (best-first, two "
        "objectives) and the gap to the whole space's bound vector, `mapper.pareto.row_gaps`): 0 when the front is "
        "exact; None when not known",
    )

    @property
    def complete(self) -> bool:
        """True when every structure was scored or bounded out: the best is optimal over `space`."""
        return self.unexplored == 0


class StrategyTie(BaseModel):
    """The best mapping of one strategy (layout on its core grid, memory placement) among those tied with the best.

    Tenstorrent only (`mapper.ties`): strategies within `mapper.ties.TIE_TOLERANCE` of the fastest.
    """

    model_config = ConfigDict(frozen=True)
    layout: str
    memory: str
    cores: int
    latency: float = Field(description="seconds")
    data_moved: float = Field(description="bytes over DRAM, the NoC and the halo (the first tie-break key)")
    chosen: bool = Field(description="the tie's winner: the reported mapping")
    point: dict[str, Choice]


class TransformChoice(BaseModel):
    """A rewrite of the problem the search priced beside it (`mapper.transforms`), and whether it won.

    Tenstorrent, latency alone: a strided conv2d is also tuned folded (`workload.conv_fold`: the
    stride-1 conv on space-to-depth folded input that tt-metal runs ResNet-50's stem as), the fold op
    priced on top; the cheaper answers. When `chosen`, the result's point, mapping and cost are the
    folded conv's, its latency value includes the fold op, and validation ran against the original.
    """

    model_config = ConfigDict(frozen=True)
    name: str = Field(description="the transformation, e.g. fold")
    description: str
    chosen: bool = Field(description="the answer is the transformed problem's mapping")
    original_latency: float | None = Field(
        description="seconds, best mapping of the problem as given (None: not searched, bounded out)"
    )
    transformed_latency: float | None = Field(
        description="seconds, best mapping of the transformed problem alone (None: not searched, bounded out)"
    )
    original_bound: float | None = Field(default=None, description="seconds no mapping of the problem as given beats")
    transformed_bound: float | None = Field(
        default=None, description="seconds no mapping of the transformed problem beats (its op excluded)"
    )
    transform_latency: float = Field(description="seconds, the transformation op itself (the fold's data movement)")
    transformed_problem: str = Field(description="one-line summary of the transformed problem")
    pricing: str = Field(description="how the transformation op was priced, with its sources")

    @property
    def total_latency(self) -> float | None:
        """Transformed problem plus the op: what the transformed answer costs."""
        return None if self.transformed_latency is None else self.transformed_latency + self.transform_latency

    def summary(self) -> str:
        """One line: which form answered and both prices."""

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v * 1e6:.2f} us"

        which = "folded" if self.chosen else "original"
        line = (
            f"{self.name}: {which} chosen; original {ms(self.original_latency)}, folded "
            f"{ms(self.transformed_latency)} + {self.name} op {ms(self.transform_latency)} = {ms(self.total_latency)}"
        )
        if self.original_latency is None and self.original_bound is not None:
            line += f"; original not searched: its bound {ms(self.original_bound)} is above the folded answer"
        if self.transformed_latency is None and self.transformed_bound is not None:
            line += (
                f"; folded not searched: its bound {ms(self.transformed_bound)} + {self.name} op is not below the "
                "original's optimum"
            )
        return line


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
    proven_optimal: bool = Field(
        description="optimal over the target's search space for the problem (see certificate), not over every "
        "possible mapping"
    )
    certificate: Certificate | None = Field(
        default=None, description="structures scored, pruned by bound and unexplored: what the optimality claim covers"
    )
    stop_reason: StopReason
    trace: list[float | None] = Field(description="best first objective after each trial (or enumeration chunk)")
    trace_points: list[int] = Field(default_factory=list, description="points scored after each trial (or chunk)")
    counts: TrialCounts
    inner_points: int = Field(
        default=0,
        description="points of the sub-space each trial or structure scored (the certificate's); an enumeration: "
        "its plan's figure (0)",
    )
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
    ties: list[StrategyTie] = Field(
        default_factory=list,
        description="Tenstorrent: the best of each strategy within 0.5% of the fastest, in tie-break order "
        "(less data moved, then fewer cores); the first is the reported mapping (mapper.ties)",
    )
    transform: TransformChoice | None = Field(
        default=None, description="a rewrite priced beside the problem (the folded stem) and whether it answered"
    )
    trial_workers: dict[str, int] = Field(
        default_factory=dict, description="trials each worker ran, when several workers shared the search's study"
    )

    @property
    def feasible(self) -> bool:
        return self.mapping is not None

    def best_value(self, objective: str | None = None) -> float | None:
        """Value of an objective (the first by default) for the best mapping."""
        return self.values.get(objective or self.objectives[0])
