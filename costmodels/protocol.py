"""The protocol every accelerator family implements, and the types it returns.

A target is a hardware preset of one family. It states the mapping choices for a problem
(`space`), turns a point of that space into a `Mapping` loop nest (`mapping`), lists the
constraints a mapping violates with reasons a user understands (`check`), and prices a feasible
mapping (`cost`). `score_codes` prices many points at once with numpy, each point given as the
index of its choice for every parameter (code columns, `costmodels.choice_codes`): it is what the
mapper enumerates and searches with. `score_batch` is the same for points given by value. Both
must agree with `check` and `cost` (the conformance suite compares them).
"""

from __future__ import annotations

import math
from typing import Any, Literal, Protocol, get_args, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from costmodels.ir import Mapping
from workload.problem import Problem

Choice = int | str | bool
#: what a cost report can be asked to minimise (`CostReport.objective`)
Objective = Literal["latency", "offchip_bytes", "footprint", "energy"]
OBJECTIVES: tuple[str, ...] = get_args(Objective)
#: the stage a cost report says bounds the time (`CostReport.bound`): each family names its own stages
Bound = Literal["compute", "stream", "fill", "dma", "dram", "evict", "reduction", "vector", "noc", "halo"]


class Violation(BaseModel):
    """A constraint a mapping (or a problem) breaks."""

    model_config = ConfigDict(frozen=True)
    code: str = Field(description="stable identifier of the constraint, e.g. 'trf-capacity'")
    message: str = Field(description="what is wrong and how to fix it")


class Param(BaseModel):
    """One mapping decision: a name and its finite, ordered choices."""

    model_config = ConfigDict(frozen=True)
    name: str
    choices: tuple[Choice, ...]
    doc: str = ""


class SearchSpace(BaseModel):
    """The mapping choices of a problem on a target (a finite product of choices)."""

    model_config = ConfigDict(frozen=True)
    params: tuple[Param, ...]

    @property
    def size(self) -> int:
        return math.prod(len(p.choices) for p in self.params)

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def columns(self) -> dict[str, np.ndarray]:
        """Every point of the space as columns (enumeration order: last param fastest)."""
        out: dict[str, np.ndarray] = {}
        outer, inner = 1, self.size
        for p in self.params:
            inner //= len(p.choices)
            arr = np.asarray(p.choices, dtype=object if _mixed(p.choices) else None)
            out[p.name] = np.tile(np.repeat(arr, inner), outer)  # each choice `inner` times, the block `outer` times
            outer *= len(p.choices)
        return out


def _mixed(choices: tuple[Choice, ...]) -> bool:
    return len({type(c) for c in choices}) > 1


class CostReport(BaseModel):
    """What a feasible mapping costs on a target, and how far that is from the limit."""

    model_config = ConfigDict(frozen=True)
    cycles: float = Field(ge=0)
    clock_hz: float = Field(gt=0)
    bound: Bound = Field(description="the stage that bounds the time: compute, stream, fill, dma, reduction...")
    utilization: float = Field(ge=0, le=1, description="useful MACs / (peak MACs/cycle x cycles)")
    bytes: dict[str, float] = Field(description="bytes moved per memory level (e.g. hbm, dm, trf, sbuf)")
    breakdown: dict[str, float] = Field(description="cycles per stage, before overlap")
    lower_bound_cycles: float = Field(ge=0, description="roofline lower bound of the problem on this target")
    offchip_bytes: float = Field(ge=0)
    footprint_bytes: float = Field(ge=0, description="peak on-chip bytes per core/slice the mapping holds")
    energy_pj: float | None = Field(default=None, description="total energy of the mapping in picojoules")
    energy_breakdown: dict[str, float] = Field(
        default_factory=dict,
        description="pJ per component: 'mac' and one key per memory level of `bytes`; sums to energy_pj",
    )
    operand_bytes: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="memory level -> operand (inputs and output) -> bytes moved; each level sums to bytes[level]",
    )
    operand_energy: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="memory level -> operand -> pJ (the shape of operand_bytes)"
    )
    stall_stack: dict[str, float] = Field(
        default_factory=dict,
        description="cycles per component (compute, each level's exposed transfer, fill, drain, reduction, "
        "family stages); sums to cycles",
    )
    notes: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def gap(self) -> float:
        """How far above the roofline bound: cycles / bound - 1 (0 means at the limit)."""
        return self.cycles / self.lower_bound_cycles - 1 if self.lower_bound_cycles > 0 else 0.0

    def objective(self, name: str) -> float:
        if name == "latency":
            return self.seconds
        if name == "offchip_bytes":
            return self.offchip_bytes
        if name == "footprint":
            return self.footprint_bytes
        if name == "energy":
            if self.energy_pj is None:
                raise ValueError("this target has no energy model")
            return self.energy_pj
        raise ValueError(f"unknown objective {name!r}: use one of {', '.join(OBJECTIVES)}")


class LowerBound(BaseModel):
    """Roofline bound of a problem on a target: no mapping can be faster."""

    model_config = ConfigDict(frozen=True)
    cycles: float = Field(ge=0)
    compute_cycles: float = Field(ge=0)
    memory_cycles: float = Field(ge=0)
    reason: str


class BatchScore(BaseModel):
    """Vectorised scores of many points: one entry per point."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    feasible: Any  # np.ndarray[bool]
    objectives: dict[str, Any]  # objective name -> np.ndarray[float]; inf where infeasible

    @classmethod
    def infeasible(cls, n: int, objectives: tuple[str, ...]) -> BatchScore:
        """`n` points none of which is feasible (e.g. a problem the target does not support)."""
        return cls(feasible=np.zeros(n, dtype=bool), objectives={o: np.full(n, np.inf) for o in objectives})


@runtime_checkable
class Target(Protocol):
    """An accelerator preset. Implementations are pure: no I/O; the only state they keep is caches of
    per-problem preparation (spaces, tables, priced grids), which never change a result."""

    name: str  # preset name, e.g. "rngd", "trn2"
    family: str  # "rngd" | "trainium" | "ascend" | "tenstorrent"
    hardware: BaseModel  # the validated preset
    objectives: tuple[str, ...]  # objectives this model can price

    def supports(self, problem: Problem) -> list[Violation]:
        """Problem-level reasons this target cannot run the problem at all (e.g. f32 inputs on RNGD)."""
        ...

    def space(self, problem: Problem) -> SearchSpace:
        """The mapping choices for this problem."""
        ...

    def mapping(self, problem: Problem, point: dict[str, Choice]) -> Mapping:
        """The loop nest of one point of the space."""
        ...

    def check(self, problem: Problem, mapping: Mapping) -> list[Violation]:
        """Every constraint the mapping violates (empty when feasible)."""
        ...

    def cost(self, problem: Problem, mapping: Mapping) -> CostReport:
        """Price a feasible mapping."""
        ...

    def lower_bound(self, problem: Problem) -> LowerBound:
        """Roofline lower bound: peak compute and off-chip bandwidth."""
        ...

    def score_batch(self, problem: Problem, columns: dict[str, np.ndarray]) -> BatchScore:
        """Price many points of `space(problem)`, given by value, at once (agrees with check/cost)."""
        ...

    def score_codes(self, problem: Problem, codes: dict[str, np.ndarray]) -> BatchScore:
        """Price many points of `space(problem)` given as choice indices (``codes[name][i]`` is the
        position of point i's value in that parameter's choices); equal to `score_batch` on the values.

        Codes are trusted, not range-checked (this is the hot path): callers build them from the
        space (`mapper.enumerate`, `choice_codes.SpaceCoder.encode`). Code arrays may be read-only."""
        ...

    def warm_starts(self, problem: Problem) -> list[dict[str, Choice]]:
        """Points the reference documents' rules of thumb suggest, best guess first."""
        ...

    def render(self, problem: Problem, mapping: Mapping) -> str:
        """Human-readable dump of the mapping (the RNGD dump notation for RNGD)."""
        ...
