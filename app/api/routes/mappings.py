"""/v1/mappings: price a point or a mapping on a target, and run a mapping in the executor."""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from app.api.deps import SettingsDep
from app.api.engine_support import (
    clock_hz,
    guarded,
    make_target,
    require_mapping_of,
    require_target,
    to_problem,
)
from app.api.errors import TooMany, ValidationTimedOut
from app.api.json_body import JsonBody
from app.api.points import knob_mapping, resolve_point
from app.api.schemas_engine import (
    BoundOut,
    CostOut,
    EvaluateRequest,
    EvaluateResponse,
    ValidateRequest,
    ValidateResponse,
    ValidationReportOut,
    finite,
    problem_responses,
)
from app.api.validation_run import check_validation_size, run_with_deadline
from costmodels.ir import Mapping
from executor.validate import ValidationTooLarge, validate
from workload.canonical import content_hash

log = logging.getLogger("tensormapper.api")

router = APIRouter(prefix="/v1/mappings", tags=["mappings"])

UNPROCESSABLE = problem_responses(
    {
        422: "a malformed problem, an unknown target or override, a point outside the target's space "
        "or a mapping of another problem: the detail names the field and how to fix it"
    }
)

VALIDATE_RESPONSES = problem_responses(
    {
        422: "a malformed problem or mapping, a mapping of another problem, or a run over the size a request "
        "may take (TM_MAX_VALIDATION_POINTS, too many sequential reduction steps): the detail says what to do instead",
        429: "every executor slot is busy with another validation (TM_MAX_VALIDATIONS): retry after Retry-After",
        503: "the run did not finish within TM_VALIDATION_SECONDS (or the storage is away): the detail says what to do",
    }
)

#: Seconds a client is told to wait when every validation slot is busy.
VALIDATION_RETRY_SECONDS = 2


@router.post(
    "/evaluate",
    response_model=EvaluateResponse,
    responses=UNPROCESSABLE,
    dependencies=[JsonBody],
    summary="Price a point or mapping",
)
def evaluate(
    req: Annotated[EvaluateRequest, Body()],  # examples: `examples_engine.document_examples`
    settings: SettingsDep,
) -> EvaluateResponse:
    """Check a point of the target's search space (parameters by name) or a loop-nest mapping against
    the target's constraints. Infeasible: 200 with `feasible: false` and the violations (codes and
    reasons). Feasible: the cost report, every objective, the gap to the roofline bound and the
    target's own dump of the mapping."""
    name = require_target(req.target, in_body=True)
    problem = to_problem(req.problem, settings, priced=True)
    target = make_target(name, dict(req.overrides))
    problem_hash = content_hash(problem)
    base: dict[str, Any] = {"target": name, "family": target.family, "problem_hash": problem_hash}
    unsupported = guarded(target, "judge the problem for", lambda: target.supports(problem), what="problem")
    if unsupported:
        return EvaluateResponse(
            **base, feasible=False, violations=unsupported, point=None, mapping=req.mapping,
            cost=None, objectives={}, lower_bound=None, gap=None, render=None,
        )  # fmt: skip
    bound = guarded(target, "bound", lambda: target.lower_bound(problem), what="problem")
    point = None
    knobbed = None if req.point is None else knob_mapping(target, problem, req.point)
    if knobbed is not None:  # the target's own knobs, not a point of its space (a published configuration)
        mapping: Mapping = knobbed
    elif req.point is not None:
        point = resolve_point(target, problem, req.point)
        chosen = point
        mapping = guarded(target, "map", lambda: target.mapping(problem, chosen), what="point")
    else:
        assert req.mapping is not None
        mapping = req.mapping
        require_mapping_of(problem, mapping)
    violations = guarded(target, "check", lambda: target.check(problem, mapping))
    if violations:
        return EvaluateResponse(
            **base, feasible=False, violations=violations, point=point, mapping=mapping, cost=None, objectives={},
            lower_bound=BoundOut.of(bound, clock_hz(name, dict(req.overrides))), gap=None, render=None,
        )  # fmt: skip
    cost = guarded(target, "price", lambda: target.cost(problem, mapping))
    render = guarded(target, "render", lambda: target.render(problem, mapping))
    objectives: dict[str, float] = {}
    for o in target.objectives:
        try:
            value = finite(cost.objective(o))
        except ValueError:  # an objective this preset cannot price (e.g. no energy figures)
            continue
        if value is not None:
            objectives[o] = value
    return EvaluateResponse(
        **base, feasible=True, violations=[], point=point, mapping=mapping, cost=CostOut.of(cost),
        objectives=objectives, lower_bound=BoundOut.of(bound, cost.clock_hz), gap=finite(cost.gap), render=render,
    )  # fmt: skip


@router.post(
    "/validate",
    response_model=ValidateResponse,
    responses=VALIDATE_RESPONSES,
    dependencies=[JsonBody],
    summary="Run a mapping",
)
def validate_mapping(
    req: Annotated[ValidateRequest, Body()],  # examples: `examples_engine.document_examples`
    settings: SettingsDep,
    request: Request,
) -> ValidateResponse:
    """Run the mapping tile by tile in numpy, in the declared dtypes, on seeded random inputs and compare
    it with the exact reference. Problems over the executor's memory cap are validated on a proxy that
    keeps the mapping's structure (the report says how much was checked); a mapping no proxy can bring
    under the cap is reported with `passed: null` and a note. A mapping of another problem is a 422.
    At most `TM_MAX_VALIDATIONS` runs share the API process at once, so long runs cannot take every
    request thread; beyond that the answer is a 429 with `Retry-After`. A run that would compute more
    than `TM_MAX_VALIDATION_POINTS` iteration points is refused up front (422), and one still going
    after `TM_VALIDATION_SECONDS` is answered with a 503; both say how to run it offline instead
    (`mapper validate FILE`, the same body)."""
    problem = to_problem(req.problem, settings, priced=True)
    require_mapping_of(problem, req.mapping)
    check_validation_size(problem, req.mapping, settings)
    slots = request.app.state.validation_slots  # TM_MAX_VALIDATIONS executor runs at once (app.main)
    if not slots.acquire(blocking=False):
        raise TooMany(
            f"all {settings.max_validations} validation slots of this service are busy",
            limit="max_validations",
            hint=f"retry in {VALIDATION_RETRY_SECONDS} s, or raise the limit with TM_MAX_VALIDATIONS",
            headers={"Retry-After": str(VALIDATION_RETRY_SECONDS)},
        )
    t0 = time.perf_counter()
    try:  # the thread releases the slot when the run ends, in time or not (app.api.validation_run)
        report = run_with_deadline(lambda: validate(problem, req.mapping, seed=req.seed), slots, settings)
    except ValidationTooLarge as e:  # not a verdict on the mapping: it could not be checked within the cap
        return ValidateResponse(
            problem_hash=content_hash(problem), passed=None, report=None, note=f"not validated: {e}",
            seconds=time.perf_counter() - t0,
        )  # fmt: skip
    except ValidationTimedOut:
        raise
    except Exception as e:  # as the mapper does: the executor's failure is a failed validation, logged
        log.exception("the executor raised on a covering mapping")
        return ValidateResponse(
            problem_hash=content_hash(problem), passed=False, report=None,
            note=f"validation raised {type(e).__name__}: {e}", seconds=time.perf_counter() - t0,
        )  # fmt: skip
    checked = report.status != "not-checked"  # computed in a way the executor does not emulate: no verdict
    return ValidateResponse(
        problem_hash=content_hash(problem),
        passed=bool(report.passed) if checked else None,
        report=ValidationReportOut.of(report.model_dump(mode="python")),
        note="" if checked else report.reason,
        seconds=time.perf_counter() - t0,
    )
