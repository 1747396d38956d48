"""/v1/problems: what a problem is (canonical form, hash, MACs, bytes) and its roofline bound on every target."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from app.api.deps import SettingsDep
from app.api.engine_support import (
    axes_of,
    canonical_of,
    einsum_spec,
    known_targets,
    operands_of,
    target_bound,
    to_problem,
)
from app.api.examples_engine import analyze_examples
from app.api.json_body import JsonBody
from app.api.schemas_engine import AnalyzeResponse, problem_responses
from workload.canonical import content_hash
from workload.spec import ProblemSpec

router = APIRouter(prefix="/v1/problems", tags=["problems"])

UNPROCESSABLE = problem_responses({422: "a malformed problem: the detail names the field or token and how to fix it"})


@router.post(
    "/analyze",
    response_model=AnalyzeResponse,
    responses=UNPROCESSABLE,
    dependencies=[JsonBody],
    summary="Analyze a problem",
)
def analyze(
    spec: Annotated[
        ProblemSpec,
        Body(openapi_examples=analyze_examples(), description="an einsum or a conv2d problem"),
    ],
    settings: SettingsDep,
) -> AnalyzeResponse:
    """The problem's canonical form and content hash, MACs, axes, operand bytes per dtype, and on every
    target either its roofline lower bound (cycles, seconds, compute and memory cycles, why) or the
    reasons the target cannot run it (its `supports()` violations)."""
    problem = to_problem(spec, settings)
    return AnalyzeResponse(
        kind=spec.kind,
        label=problem.label,
        summary=problem.summary(),
        content_hash=content_hash(problem),
        canonical=canonical_of(problem),
        macs=problem.macs,
        axes=axes_of(problem),
        reduce_op=problem.reduce_op,
        weight=None if problem.weight is None else problem.inputs[problem.weight].name,
        acc_dtype=problem.acc_dtype,
        operands=operands_of(problem),
        min_bytes=problem.min_bytes,
        einsum=einsum_spec(problem),
        targets=[target_bound(n, problem) for n in known_targets()],
    )
