"""/v1/tunings: start a tuning job, follow it, cancel it, read its result.

The handler only checks the request and writes a row: searches run in worker processes. An
identical request (same content key) gets the job that already answers it, or a finished job at
once when the result cache holds the answer, never a second search.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent

from app.api.deps import ClientDep, SettingsDep, StoreDep, Writer
from app.api.errors import Conflict, NotFound
from app.api.examples import TUNING_EXAMPLES
from app.api.fast_reads import etag_matches
from app.api.json_body import JsonBody
from app.api.limits import check_client_quota, check_request_limits
from app.jobs.models import FINISHED, Job, JobPage, JobState, TuningRequest
from app.jobs.report_html import job_report_html
from app.jobs.runner import ComparisonResult, cached_result, prepare, request_json
from app.jobs.store import JobStore, etag_of
from app.settings import Settings
from mapper.result import TuneResult
from mapper.workloads import WorkloadResult

router = APIRouter(prefix="/v1/tunings", tags=["tunings"])

JobId = Annotated[str, Path(description="job id from POST /v1/tunings", min_length=1, max_length=64)]


async def existing_job(job_id: JobId, store: StoreDep) -> Job:
    hit = store.finished(job_id)  # a finished job is read from memory, without a thread or a query
    job = hit[0] if hit is not None else await run_in_threadpool(store.get, job_id)
    if job is None:
        raise NotFound(f"no tuning job {job_id!r}", hint="list jobs with GET /v1/tunings")
    return job


JobDep = Annotated[Job, Depends(existing_job)]

_BY_ID = {"job_id": "$response.body#/id"}
#: OpenAPI links from a created job to what a client does next (clients and stateful fuzzers follow them)
JOB_LINKS = {
    "GetTuning": {"operationId": "get_tuning", "parameters": _BY_ID},
    "GetTuningResult": {"operationId": "get_tuning_result", "parameters": _BY_ID},
    "CancelTuning": {"operationId": "cancel_tuning", "parameters": _BY_ID},
    "GetTuningReport": {"operationId": "get_tuning_report", "parameters": _BY_ID},
}


@router.post(
    "",
    status_code=202,
    response_model=Job,
    operation_id="create_tuning",
    dependencies=[Writer, JsonBody],
    summary="Start a tuning (or find the job that already answers it)",
    responses={
        200: {"model": Job, "description": "an identical request already has a job: that job", "links": JOB_LINKS},
        202: {"description": "queued (or born finished from the result cache)", "links": JOB_LINKS},
    },
)
def create_tuning(
    request: Annotated[TuningRequest, Body(openapi_examples=TUNING_EXAMPLES)],
    store: StoreDep,
    settings: SettingsDep,
    response: Response,
    client: ClientDep,
) -> Job:
    """Queue a search of a problem (or a named workload) on one target, or a comparison on several.

    Answers 202 with `Location: /v1/tunings/{id}`; follow the job there, at `.../events`, and read
    `.../result` when it has finished. A request whose answer is cached comes back already
    `succeeded`; one identical to a live job returns that job (200).
    """
    prep = prepare(request)
    check_request_limits(prep, settings)
    live = store.find_active(prep.key)
    if live is not None:  # an identical request is already answered or being answered
        response.headers["Location"] = f"/v1/tunings/{live.id}"
        response.status_code = 200
        return live
    check_client_quota(store.active_of(client), settings)
    result = cached_result(prep, settings.storage_url) if prep.kind != "workload" else None
    job, created = store.submit(
        key=prep.key,
        kind=prep.kind,
        summary=prep.summary,
        targets=request.target_list,
        request=request_json(request),
        result=result,
        stop_reason="cached" if result is not None else None,
        client=client,
    )
    response.headers["Location"] = f"/v1/tunings/{job.id}"
    response.status_code = 202 if created else 200
    return job


@router.get("", response_model=JobPage, operation_id="list_tunings", summary="List tuning jobs, newest first")
def list_tunings(
    store: StoreDep,
    state: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$", description="next_cursor of the last page")] = None,
) -> JobPage:
    return store.page(state=state, limit=limit, cursor=int(cursor) if cursor else None)


@router.get(
    "/{job_id}",
    response_model=Job,
    operation_id="get_tuning",
    summary="A job: state, progress, best so far, timestamps",
    responses={404: {"description": "no such job"}},
)
async def get_tuning(job: JobDep) -> Job:
    return job


@router.post(
    "/{job_id}/cancel",
    status_code=202,
    response_model=Job,
    operation_id="cancel_tuning",
    dependencies=[Writer],
    summary="Cancel a job (the best mapping found so far is kept)",
    responses={409: {"description": "the job has already finished"}, 404: {"description": "no such job"}},
)
def cancel_tuning(job: JobDep, store: StoreDep) -> Job:
    """A queued job is cancelled at once; a running one stops within a second or two and keeps its best
    mapping in the result with stop reason `cancelled`."""
    if job.state in FINISHED:
        raise Conflict(f"job {job.id} has already finished ({job.state}); nothing to cancel")
    after = store.cancel(job.id)
    assert after is not None
    return after


@router.get(
    "/{job_id}/result",
    response_model=TuneResult | WorkloadResult | ComparisonResult,
    operation_id="get_tuning_result",
    summary="The full result of a finished job",
    responses={
        304: {"description": "not modified: the result still has the ETag sent in If-None-Match"},
        409: {"description": "the job has no result (yet): see its state"},
        404: {"description": "no such job"},
    },
)
async def get_result(
    job: JobDep, store: StoreDep, if_none_match: Annotated[str | None, Header(include_in_schema=False)] = None
) -> Response:
    """`TuneResult` for a problem, `WorkloadResult` for a workload, `{rows: [...]}` for a comparison.

    A finished result carries an ETag (it never changes): send it back in If-None-Match for a 304."""
    hit = store.finished(job.id)
    raw = hit[1] if hit is not None else await run_in_threadpool(store.result, job.id)
    if raw is None:
        why = job.error if job.state == "failed" else f"the job is {job.state}"
        raise Conflict(f"job {job.id} has no result: {why}")
    if job.state not in FINISHED:  # a running comparison's partial rows: no ETag, they change
        return Response(raw, media_type="application/json")
    body = raw.encode()
    etag = etag_of(body)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if if_none_match is not None and etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


@router.get(
    "/{job_id}/report",
    response_class=HTMLResponse,
    operation_id="get_tuning_report",
    summary="The result of a finished job as a self-contained HTML report (inline SVG, no script)",
    responses={
        200: {"content": {"text/html": {}}, "description": "the report page"},
        409: {"description": "the job has no result (yet): see its state"},
        404: {"description": "no such job"},
    },
)
async def get_report(job: JobDep, store: StoreDep) -> HTMLResponse:
    """Summary, roofline, latency / bytes / energy breakdowns, convergence, Pareto front, loop nest
    (and the core grid of a Tenstorrent mapping) of the job's result; one section per target for a
    comparison. The same page as `mapper tune ... --html FILE`."""
    hit = store.finished(job.id)
    raw = hit[1] if hit is not None else await run_in_threadpool(store.result, job.id)
    if raw is None:
        why = job.error if job.state == "failed" else f"the job is {job.state}"
        raise Conflict(f"job {job.id} has no result to report: {why}; GET /v1/tunings/{job.id} shows its state")
    html = await run_in_threadpool(job_report_html, job.kind, job.request, raw)
    return HTMLResponse(html)


async def _events(
    job_id: str, store: JobStore, settings: Settings, max_seconds: float
) -> AsyncIterator[ServerSentEvent]:
    loop = asyncio.get_running_loop()
    end = loop.time() + max_seconds
    last_state: str | None = None
    last_progress, last_best = None, None
    while True:
        job = await run_in_threadpool(store.get, job_id)
        if job is None:
            return
        finished = job.state in FINISHED
        if last_state is None and finished:  # finished before the stream began: the job (with its progress), end
            yield ServerSentEvent(event="state", data=job.model_dump(mode="json"))
            yield ServerSentEvent(event="end", data=job.model_dump(mode="json"))
            return
        if job.state != last_state and not finished:  # a final state comes last, after the progress that led to it
            last_state = job.state
            yield ServerSentEvent(event="state", data=job.model_dump(mode="json"))
        progress = job.progress.model_dump(mode="json")
        if progress != last_progress:
            last_progress = progress
            yield ServerSentEvent(event="progress", data=progress)
        if job.progress.best is not None and (last_best is None or job.progress.best < last_best):
            last_best = job.progress.best
            yield ServerSentEvent(event="improvement", data={"best": last_best, "done": job.progress.done})
        if finished:
            yield ServerSentEvent(event="state", data=job.model_dump(mode="json"))
            yield ServerSentEvent(event="end", data=job.model_dump(mode="json"))
            return
        if loop.time() >= end:
            yield ServerSentEvent(event="timeout", data={"state": job.state, "after_seconds": max_seconds})
            return
        await asyncio.sleep(settings.poll_seconds)


@router.get(
    "/{job_id}/events",
    response_class=EventSourceResponse,
    operation_id="tuning_events",
    responses={404: {"description": "no such job"}},
    summary="Server-sent events: state, progress and improvements, ending with the final state",
)
async def tuning_events(
    job: JobDep,
    store: StoreDep,
    settings: SettingsDep,
    max_seconds: Annotated[
        float, Query(gt=0, le=86_400, allow_inf_nan=False, description="close the stream after this long")
    ] = 3600,
) -> AsyncIterator[ServerSentEvent]:
    """Events `state` (the job), `progress`, `improvement` (a better best) and finally the final `state`
    (after the last progress) and `end` (the final job); `timeout` instead when `max_seconds` passes first."""
    async for event in _events(job.id, store, settings, max_seconds):
        yield event
