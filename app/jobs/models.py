"""What a client sends to start a tuning and what it reads back about the job.

A `TuningRequest` names one problem (the README's problem format), a named workload or a network's
layers (an imported ONNX model or a layer list: problem specs), one target
or several (several make a comparison, one row per target), and the search settings. Its `key`
is a content hash of everything that decides the answer (canonical problem, workload parameters,
targets, overrides, each target's cost-model version, search settings, validate flag), so an
identical request finds the job that already answers it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from app.documented_names import ObjectiveName, TargetName, WorkloadName, given, one_of_given
from mapper.settings import MAX_SECONDS, MAX_TRIALS, SearchSettings, Strategy
from workload.layer_list import MAX_LAYERS
from workload.spec import ProblemSpec

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JOB_STATES: tuple[str, ...] = ("queued", "running", "succeeded", "failed", "cancelled")
FINISHED: tuple[str, ...] = ("succeeded", "failed", "cancelled")
ResultKind = Literal["tune", "workload", "comparison", "trials"]  # trials: a helper of a shared search


#: the document's words for `TuningRequest`'s rules across fields, as far as JSON Schema says them (a field is given
#: when present and not null); documentation only: `_one_source_and_target` checks them and says what is wrong
REQUEST_RULES: dict[str, JsonValue] = {
    "allOf": [
        one_of_given(
            {"problem": "object", "workload": "string", "layers": "array"}, "one of problem, workload, layers"
        ),
        one_of_given({"target": "string", "targets": "array"}, "one of target, targets"),
        {
            "title": "params only with a workload",
            "anyOf": [
                {"title": "no params", "properties": {"params": {"maxProperties": 0}}},
                given("workload", "string"),
            ],
        },
        {
            "title": "name only with layers",
            "anyOf": [{"title": "no name", "properties": {"name": {"type": "null"}}}, given("layers", "array")],
        },
        {
            "title": "layer only with a workload or layers",
            "anyOf": [
                {"title": "no layer", "properties": {"layer": {"type": "null"}}},
                given("workload", "string"),
                given("layers", "array"),
            ],
        },
        {
            "title": "study_workers > 1 only with one problem, one target, one objective, strategy tpe or random",
            "anyOf": [
                {"title": "one study worker", "properties": {"study_workers": {"maximum": 1}}},
                {
                    "title": "a shared study",
                    "allOf": [given("problem", "object"), given("target", "string")],
                    "properties": {"objectives": {"maxItems": 1}, "strategy": {"enum": ["tpe", "random"]}},
                    "required": ["strategy"],
                },
            ],
        },
    ]
}


class TuningRequest(BaseModel):
    """Start a tuning: a problem or a workload, on one target or several, with a search budget.

    Give exactly one of problem, workload and layers, and one of target and targets; params go with a workload,
    name with layers, layer with a workload or layers; study_workers above 1 needs one problem, one target, one
    objective and strategy tpe or random (the schema's allOf says the same)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=REQUEST_RULES)
    problem: ProblemSpec | None = Field(default=None, description="one problem (an einsum or a conv2d)")
    workload: WorkloadName | None = Field(
        default=None, description="a named workload instead of a problem, e.g. resnet50"
    )
    params: dict[str, JsonValue] = Field(default_factory=dict, description='workload parameters, e.g. {"batch": 16}')
    layer: int | None = Field(
        default=None, ge=0, description="one layer of the workload, by index (a workload job's sub-jobs use it)"
    )
    layers: list[ProblemSpec] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LAYERS,
        description="a network of your own instead: its layers as problem specs (POST /v1/models/layers gives them "
        "for an ONNX model or a layer list), tuned like a workload",
    )
    name: str | None = Field(default=None, min_length=1, max_length=200, description="the network's name, with layers")
    target: TargetName | None = Field(default=None, description="one target preset (see GET /v1/targets)")
    targets: list[TargetName] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        json_schema_extra={"uniqueItems": True},
        description="several presets: a comparison, one row per target",
    )
    overrides: dict[str, JsonValue] = Field(default_factory=dict, description="hardware preset overrides")
    objectives: list[ObjectiveName] = Field(
        default_factory=lambda: ["latency"], min_length=1, max_length=4, json_schema_extra={"uniqueItems": True}
    )
    strategy: Strategy = "auto"
    trials: int = Field(
        default=SearchSettings().max_trials, ge=1, le=MAX_TRIALS,
        description=f"Optuna trials at most ({MAX_TRIALS} fixed; the service's own limit is TM_MAX_TRIALS)",
    )  # fmt: skip
    seconds: float = Field(
        default=SearchSettings().max_seconds, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
        description=f"search time budget ({MAX_SECONDS:g} s fixed; the service's own limit is TM_MAX_SEARCH_SECONDS)",
    )  # fmt: skip
    patience: int = Field(default=SearchSettings().patience, ge=0, le=100_000)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    validate_result: bool = Field(default=True, alias="validate", description="run the executor on the best mapping")
    study_workers: int = Field(
        default=1, ge=1, le=64,
        description="run this search's trials on one shared Optuna study from up to this many workers "
        "(one problem, one target, one objective, strategy tpe or random); the budget is `trials` in all",
    )  # fmt: skip

    @model_validator(mode="after")
    def _one_source_and_target(self) -> TuningRequest:
        if sum(x is not None for x in (self.problem, self.workload, self.layers)) != 1:
            raise ValueError("give exactly one of problem or workload (or layers)")
        if self.params and self.workload is None:
            raise ValueError("params go with a workload")
        if self.layer is not None and self.workload is None and self.layers is None:
            raise ValueError("layer goes with a workload or layers")
        if self.name is not None and self.layers is None:
            raise ValueError("name goes with layers")
        if (self.target is None) == (self.targets is None):
            raise ValueError("give exactly one of target or targets")
        if self.targets is not None and len(set(self.targets)) != len(self.targets):
            raise ValueError("a target is listed twice in targets")
        if self.study_workers > 1 and (
            self.problem is None or self.targets is not None or len(self.objectives) != 1
            or self.strategy not in ("tpe", "random")
        ):  # fmt: skip
            raise ValueError(
                "study_workers > 1 needs one problem, one target, one objective and strategy tpe or random"
            )
        return self

    @property
    def target_list(self) -> list[str]:
        return list(self.targets) if self.targets is not None else [str(self.target)]

    @property
    def network(self) -> str | None:
        """The name of the whole network this request tunes (a workload or layers), None for one problem."""
        if self.layers is not None:
            return self.name or "layers"
        return self.workload

    @property
    def comparison(self) -> bool:
        return self.targets is not None

    def search_settings(self) -> SearchSettings:
        """The engine's settings (raises pydantic's ValidationError for an unknown objective)."""
        return SearchSettings(
            strategy=self.strategy,
            objectives=tuple(self.objectives),
            max_trials=self.trials,
            max_seconds=self.seconds,
            patience=self.patience,
            seed=self.seed,
        )

    def key(self, problem_hashes: list[str], versions: dict[str, str]) -> str:
        """Content key: identical requests (same canonical problems, targets, models, settings) share it."""
        one_layer = self.layer is not None  # a layer is its problem: it shares the job of the same problem
        payload: dict[str, Any] = {
            "problems": problem_hashes,
            "workload": None if one_layer else self.workload,
            **({"name": self.name} if self.layers is not None and not one_layer else {}),
            "params": {} if one_layer else self.params,
            "targets": self.target_list,
            "comparison": self.comparison,
            "overrides": self.overrides,
            "versions": versions,
            "settings": self.search_settings().model_dump(mode="json"),
            "validate": self.validate_result,
        }
        if self.study_workers > 1:  # a shared search is not the seeded single-worker one (keys of others unchanged)
            payload["study_workers"] = self.study_workers
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


class JobProgress(BaseModel):
    """How far a job is: `done` of `total` `unit`s (points, trials, structures, cells, layers or targets)."""

    done: int = 0
    total: int = 0
    unit: str = ""
    best: float | None = Field(default=None, description="best first-objective value found so far")


class Job(BaseModel):
    """A tuning job as the API shows it."""

    id: str
    state: JobState
    kind: ResultKind
    summary: str = Field(description="what is being tuned, in one line")
    targets: list[str]
    progress: JobProgress
    stop_reason: str | None = None
    error: str | None = None
    cancel_requested: bool = False
    worker: str | None = Field(default=None, description="the worker process that ran (or runs) the job")
    attempts: int = Field(default=0, description="times the job was claimed (more than 1: a worker died)")
    created_at: float = Field(description="Unix time")
    started_at: float | None = None
    finished_at: float | None = None
    heartbeat_at: float | None = None
    key: str = Field(description="content key of the request")
    parent_id: str | None = Field(default=None, description="the workload job this layer's job belongs to")
    request: dict[str, Any]
    links: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def from_row(cls, r: Any) -> Job:
        """The job of a `tm_jobs` row (`app.jobs.tables.jobs`)."""
        return cls(
            id=r["id"],
            state=r["state"],
            kind=r["kind"],
            summary=r["summary"],
            targets=json.loads(r["targets"]),
            progress=JobProgress(
                done=r["progress_done"] or 0,
                total=r["progress_total"] or 0,
                unit=r["progress_unit"] or "",
                best=r["best"],
            ),
            stop_reason=r["stop_reason"],
            error=r["error"],
            cancel_requested=bool(r["cancel_requested"]),
            worker=r["worker"],
            attempts=r["attempts"] or 0,
            created_at=r["created_at"],
            started_at=r["started_at"],
            finished_at=r["finished_at"],
            heartbeat_at=r["heartbeat_at"],
            key=r["key"],
            parent_id=r["parent_id"],
            request=json.loads(r["request"]),
            links={
                "self": f"/v1/tunings/{r['id']}",
                "result": f"/v1/tunings/{r['id']}/result",
                "events": f"/v1/tunings/{r['id']}/events",
                "cancel": f"/v1/tunings/{r['id']}/cancel",
            },
        )


class JobPage(BaseModel):
    """A page of jobs, newest first; pass `next_cursor` as `cursor` for the next page."""

    items: list[Job]
    next_cursor: str | None = None
