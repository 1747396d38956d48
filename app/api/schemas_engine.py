"""Request and response models of the engine routes: /v1/targets, /v1/workloads, /v1/problems, /v1/mappings.

Responses are built from the engine's own objects (`Problem`, `CostReport`, `LowerBound`, `Violation`,
`ValidationReport`) so that the OpenAPI schema states exactly what a client reads. Floats that the
engine may report as infinite are `null` here (JSON has no infinity).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictInt, model_validator

from app.documented_names import TargetName, one_of_given
from costmodels.ir import Mapping
from costmodels.protocol import CostReport, LowerBound, Violation
from executor.judgement import Status
from executor.validate import Method
from workload.spec import EinsumSpec, ProblemSpec


def finite(x: float | None) -> float | None:
    """`x`, or None when it is infinite or NaN (JSON has neither)."""
    return None if x is None or not math.isfinite(x) else float(x)


# ---- targets -----------------------------------------------------------------------------------


class Limits(BaseModel):
    """Limits every request respects: the service's settings (at or below the engine's) and the engine's own."""

    max_axis_size: int = Field(description="largest size of one axis (TM_MAX_AXIS_SIZE; the engine's limit is 2^24)")
    max_axes: int = Field(description="most axes a problem may have (TM_MAX_AXES; the engine's limit is 16)")
    max_coefficient: int = Field(description="largest stride or dilation coefficient of an index term")
    max_macs: float = Field(description="MACs a tuning, evaluate or validate request may ask for (TM_MAX_MACS)")
    validation_memory_cap_bytes: int = Field(
        description="estimated peak memory above which POST /v1/mappings/validate checks a smaller proxy"
    )


class Support(BaseModel):
    """What `supports()` accepts, probed with tiny problems (a 128^3 matmul, a 64 x 256 row reduction)."""

    dtypes: list[str] = Field(description="input dtypes accepted")
    reduce_ops: list[str] = Field(description="reduce ops accepted")


class Supported(BaseModel):
    """Supported inputs of contractions (two inputs) and of reductions (one input)."""

    contraction: Support = Field(description="probed with mk,kn->mn (bf16 for the reduce ops)")
    reduction: Support = Field(description="probed with ij->i (f32 for the reduce ops); empty: no unary problems")


class OverrideField(BaseModel):
    """A preset field a request may override (``overrides: {name: value}``)."""

    name: str
    type: str = Field(description="JSON type, e.g. integer, number, boolean, array of string, object of integer")
    default: JsonValue = Field(description="the preset's value")
    description: str = Field(description="what the field means (empty when the model does not say)")
    json_schema: dict[str, JsonValue] = Field(description="the field's JSON schema, with its bounds")


class TargetSummary(BaseModel):
    """A target preset at a glance."""

    name: str = Field(description="preset name to send as `target`")
    family: str = Field(description="rngd | trainium | ascend | tenstorrent")
    objectives: list[str] = Field(description="objectives the cost model prices")
    key_figures: dict[str, int | float] = Field(description="numeric preset fields (clock, cores, capacities, rates)")
    supported: Supported
    links: dict[str, str] = Field(default_factory=dict)


class TargetDetail(TargetSummary):
    """A target preset in full: every field, what may be overridden, citations and limits."""

    hardware: dict[str, JsonValue] = Field(description="every preset field with its value")
    overrides: list[OverrideField] = Field(description="fields a request may override, with type and default")
    sources: dict[str, str] = Field(description="field -> citation recorded in the preset file")
    limits: Limits


# ---- workloads ---------------------------------------------------------------------------------


class WorkloadParam(BaseModel):
    """A parameter of a named workload (a query parameter of GET /v1/workloads/{name})."""

    name: str
    type: Literal["integer", "dtype"]
    default: int | str | None = Field(description="None for weights_dtype/out_dtype: follows dtype")
    min: int | None = None
    max: int | None = None
    description: str = ""


class WorkloadSummary(BaseModel):
    """A named workload at its default parameters."""

    name: str
    description: str
    source: str = Field(description="where the layer dimensions come from")
    parameters: list[WorkloadParam]
    layer_count: int
    total_macs: int = Field(description="sum of the layers' MACs at the default parameters")
    links: dict[str, str] = Field(default_factory=dict)


class WorkloadLayer(BaseModel):
    """One layer, as a problem spec a client can POST back (e.g. to /v1/problems/analyze)."""

    index: int
    label: str
    macs: int
    content_hash: str = Field(description="canonical content hash (identical layers share it)")
    problem: EinsumSpec = Field(description="the layer in the structured einsum form")


class WorkloadDetail(WorkloadSummary):
    """A named workload's layers at the given parameters."""

    params: dict[str, int | str] = Field(description="the parameter values used (defaults filled in)")
    distinct_layers: int = Field(description="layers with different content hashes")
    total_macs: int = Field(description="sum of the layers' MACs at these parameters")
    layers: list[WorkloadLayer]


# ---- problems ----------------------------------------------------------------------------------


class AxisInfo(BaseModel):
    name: str
    size: int
    role: Literal["free", "reduced"] = Field(description="free: in the output; reduced: summed/reduced over")


class OperandInfo(BaseModel):
    name: str
    role: Literal["input", "weight", "output"]
    index: str = Field(description="the operand with its index expressions, e.g. X[n, oh:2 + fh, ow:2 + fw, c]")
    dtype: str
    shape: list[int] = Field(description="the real (unpadded) tensor shape")
    padded_shape: list[int]
    pad: list[tuple[int, int]] = Field(description="zero padding (lo, hi) per dimension")
    bytes: float = Field(description="bytes of the real tensor in its dtype")


class CanonicalOperand(BaseModel):
    dims: list[list[tuple[int, int]]] = Field(description="per dimension: [axis position, coefficient] terms")
    dtype: str
    pad: list[tuple[int, int]]


class CanonicalForm(BaseModel):
    """The problem independent of how it was written (`workload.canonical.canonical_form`)."""

    version: int
    sizes: list[int] = Field(description="axis sizes in canonical order (output axes first)")
    inputs: list[CanonicalOperand]
    output: CanonicalOperand
    reduce_op: str
    weight: int | None


class BoundOut(BaseModel):
    """Roofline lower bound of a problem on a target: no mapping is faster."""

    cycles: float
    seconds: float | None = Field(description="cycles at the target's clock (None if the clock is unknown)")
    compute_cycles: float
    memory_cycles: float
    reason: str

    @classmethod
    def of(cls, lb: LowerBound, clock_hz: float | None) -> BoundOut:
        seconds = lb.cycles / clock_hz if clock_hz else None
        return cls(
            cycles=lb.cycles,
            seconds=finite(seconds),
            compute_cycles=lb.compute_cycles,
            memory_cycles=lb.memory_cycles,
            reason=lb.reason,
        )


class TargetBound(BaseModel):
    """One target's view of a problem: its roofline bound, or why it cannot run the problem."""

    target: str
    family: str
    supported: bool
    violations: list[Violation] = Field(description="supports() violations (empty when supported)")
    lower_bound: BoundOut | None = Field(description="None when the target cannot run the problem")


class AnalyzeResponse(BaseModel):
    """Facts of a problem and its roofline bound on every target."""

    kind: Literal["einsum", "conv2d"]
    label: str
    summary: str = Field(description="one line: operands, dtypes, reduce op, sizes")
    content_hash: str = Field(description="SHA-256 of the canonical form: equal for problems computing the same thing")
    canonical: CanonicalForm
    macs: int = Field(description="multiply-accumulates (reduction steps of a unary problem)")
    axes: list[AxisInfo]
    reduce_op: str
    weight: str | None = Field(description="name of the stationary input, if any")
    acc_dtype: str = Field(description="accumulation type")
    operands: list[OperandInfo] = Field(description="inputs, then the output")
    min_bytes: float = Field(description="bytes any mapping must move: every input read once, the output written once")
    einsum: EinsumSpec = Field(description="the problem in the structured einsum form (conv2d lowered)")
    targets: list[TargetBound]


# ---- mappings ----------------------------------------------------------------------------------


class EvaluateRequest(BaseModel):
    """A problem, a target (with optional overrides) and either a point of its space or a mapping."""

    # (the document says "exactly one of point and mapping" as JSON Schema can: `one_of_given`)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=one_of_given({"point": "object", "mapping": "object"}, "one of point, mapping"),
    )
    problem: ProblemSpec
    target: TargetName = Field(description="a target preset (GET /v1/targets)")
    overrides: dict[str, JsonValue] = Field(default_factory=dict, description="hardware preset overrides")
    point: dict[str, JsonValue] | None = Field(
        default=None,
        description="a value for every parameter of the target's search space, by name; or the target's own knobs "
        "(as in a result's mapping.knobs), e.g. a configuration a vendor publishes",
    )
    mapping: Mapping | None = Field(default=None, description="a loop-nest mapping (the IR of costmodels.ir)")

    @model_validator(mode="after")
    def _point_or_mapping(self) -> EvaluateRequest:
        if (self.point is None) == (self.mapping is None):
            raise ValueError("give exactly one of point or mapping")
        return self


class CostOut(BaseModel):
    """The target's cost report of a feasible mapping, with its time in seconds."""

    cycles: float
    seconds: float
    clock_hz: float
    bound: str = Field(description="the stage that bounds the time")
    utilization: float
    bytes: dict[str, float] = Field(description="bytes moved per memory level")
    breakdown: dict[str, float] = Field(description="cycles per stage, before overlap")
    lower_bound_cycles: float
    offchip_bytes: float
    footprint_bytes: float
    energy_pj: float | None
    energy_breakdown: dict[str, float] = Field(default_factory=dict, description="pJ per component; sums to energy_pj")
    operand_bytes: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="memory level -> operand -> bytes; each level sums to bytes[level]"
    )
    operand_energy: dict[str, dict[str, float]] = Field(default_factory=dict, description="level -> operand -> pJ")
    stall_stack: dict[str, float] = Field(default_factory=dict, description="cycles per component; sums to cycles")
    notes: list[str]

    @classmethod
    def of(cls, c: CostReport) -> CostOut:
        return cls(seconds=c.seconds, **c.model_dump(mode="json"))


class EvaluateResponse(BaseModel):
    """Whether a mapping is feasible on a target and, if so, what it costs."""

    target: str
    family: str
    problem_hash: str
    feasible: bool
    violations: list[Violation] = Field(description="what the target rejects (supports() first, then check())")
    point: dict[str, bool | int | str] | None = Field(description="the point evaluated, when one was given")
    mapping: Mapping | None = Field(description="the loop nest evaluated (built from the point, when one was given)")
    cost: CostOut | None = Field(description="None when infeasible")
    objectives: dict[str, float] = Field(description="every objective the target prices, for a feasible mapping")
    lower_bound: BoundOut | None = Field(description="roofline bound; None when the target cannot run the problem")
    gap: float | None = Field(description="cycles / bound - 1 (0: at the roofline)")
    render: str | None = Field(description="the target's own dump of the mapping")


class ValidateRequest(BaseModel):
    """A problem and a mapping of it to run tile by tile in the executor."""

    model_config = ConfigDict(extra="forbid")
    problem: ProblemSpec
    mapping: Mapping = Field(description="a loop-nest mapping (the IR of costmodels.ir)")
    seed: StrictInt = Field(default=0, ge=0, le=2**31 - 1, description="seed of the random inputs")


class ToleranceOut(BaseModel):
    atol: float
    rtol: float
    sum_rtol: float
    exact: bool
    floor: float = Field(0.0, description="absolute allowance added where |reference| <= floor_below (underflow)")
    floor_below: float = 0.0


class ValidationReportOut(BaseModel):
    """`executor.validate.ValidationReport`; error maxima are null when infinite (a NaN or unwritten element)."""

    passed: bool = Field(description="True only when `status` is `passed`")
    status: Status = Field(
        description="passed, failed, or not-checked (computed in a way the executor does not emulate)"
    )
    reason: str = Field(description="why: what failed, what was checked, or why it could not be")
    method: Method
    elements_compared: int
    checked_fraction: float
    max_abs_error: float | None
    max_rel_error: float | None
    failing_elements: int
    tolerance: ToleranceOut
    tolerance_reason: str
    first_failing_index: list[int] | None
    validated_axes: dict[str, int]
    notes: list[str]

    @classmethod
    def of(cls, data: dict[str, Any]) -> ValidationReportOut:
        out = dict(data)
        out["max_abs_error"] = finite(out.get("max_abs_error"))
        out["max_rel_error"] = finite(out.get("max_rel_error"))
        return cls.model_validate(out)


class ValidateResponse(BaseModel):
    """The executor's verdict (as the mapper packages it: report, passed, note)."""

    problem_hash: str
    passed: bool | None = Field(
        description="None when the mapping was not checked: too large to validate within the memory cap, or "
        "computed in a way the executor does not emulate (`report.status` not-checked)"
    )
    report: ValidationReportOut | None
    note: str = Field(description="why there is no report, or empty")
    seconds: float = Field(description="wall time of the validation")


def problem_responses(described: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for problem-detail errors (the app's ``Problem`` component, members beyond
    type/title/status/detail allowed: ``field``, ``hint``, ``token``, ``known``, ``choices``...)."""
    schema = {"$ref": "#/components/schemas/Problem"}
    return {
        status: {"description": text, "content": {"application/problem+json": {"schema": schema}}}
        for status, text in described.items()
    }
