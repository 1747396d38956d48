"""What a tuning request means for the engine: checked when it arrives, executed by a worker.

`prepare` does everything that can fail because of the request (unknown target or workload, a
bad override, an objective a target does not price, a problem a target cannot run) so the API
answers 422 at once, and computes the request's content key. `execute` runs the search through
`mapper`'s cached entry points, with a `Watch` that carries progress out and cancellation in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from app.jobs.models import ResultKind, TuningRequest
from costmodels.registry import get_target
from mapper.cache import ResultCache, answers, tune_cached
from mapper.keys import cache_key, cost_model_version, problem_hash
from mapper.result import TuneResult
from mapper.search import check_request
from mapper.settings import SearchSettings
from mapper.watch import Watch
from mapper.workloads import WorkloadResult, check_layer, tune_layers
from workload.errors import ProblemError
from workload.problem import Problem


class ComparisonRow(BaseModel):
    """One target of a comparison: its result, or why it has none."""

    target: str
    result: TuneResult | WorkloadResult | None = None
    error: str | None = None


class ComparisonResult(BaseModel):
    """The same problem (or workload) tuned on several targets."""

    rows: list[ComparisonRow] = Field(description="one row per target, in the order requested")


@dataclass(frozen=True)
class Prepared:
    """A checked request: its problems, settings, key and what each target cannot do."""

    request: TuningRequest
    kind: ResultKind
    problems: list[Problem]
    settings: SearchSettings
    key: str
    summary: str
    unsupported: dict[str, str]  # target -> why it cannot answer (comparisons only)

    @property
    def overrides(self) -> dict[str, Any]:
        return dict(self.request.overrides)


def _problems(request: TuningRequest) -> list[Problem]:
    if request.problem is not None:
        return [request.problem.to_problem()]
    from workload.named import load

    if request.layers is not None:
        layers = [spec.to_problem() for spec in request.layers]
    else:
        assert request.workload is not None
        layers = load(request.workload, **request.params)
    if request.layer is None:
        return layers
    if request.layer >= len(layers):
        raise ProblemError(
            f"workload {request.network} has {len(layers)} layers", token="layer", hint=f"use 0..{len(layers) - 1}"
        )
    return [layers[request.layer]]


def prepare(request: TuningRequest) -> Prepared:
    """Check a request and compute its key.

    Raises:
        ProblemError: what the client must fix (unknown target, bad override, unsupported problem...).
        pydantic.ValidationError: an objective no model knows.
    """
    settings = request.search_settings()
    problems = _problems(request)
    distinct = list({problem_hash(p): p for p in problems}.values())
    versions: dict[str, str] = {}
    unsupported: dict[str, str] = {}
    for name in request.target_list:
        target = get_target(name, dict(request.overrides))
        versions[name] = cost_model_version(target)
        try:
            for i, p in enumerate(distinct):
                if request.network is None:
                    check_request(p, target, settings)
                else:
                    check_layer(p, i, target, settings)
        except ProblemError as e:
            if not request.comparison:
                raise
            unsupported[name] = str(e)
    if unsupported and len(unsupported) == len(request.target_list):
        first = next(iter(unsupported.values()))
        raise ProblemError(f"no requested target can answer: {first}", token="targets", hint="choose other targets")
    whole = request.network is not None and request.layer is None
    kind: ResultKind = "comparison" if request.comparison else ("workload" if whole else "tune")
    if whole:
        given = ",".join(f"{k}={v}" for k, v in (request.params or {}).items())  # (as `--param` gives them)
        what = f"{request.network} {given}".strip()
    else:
        what = f"{problems[0].label}: {problems[0].summary()}" if problems[0].label else problems[0].summary()
    summary = f"{what} on {', '.join(request.target_list)}"
    key = request.key([problem_hash(p) for p in problems], versions)
    return Prepared(request, kind, problems, settings, key, summary, unsupported)


def cached_result(prep: Prepared, storage: str) -> str | None:
    """The whole answer from the result cache, when every part of it is there (single problems only)."""
    if prep.request.network is not None and prep.request.layer is None:
        return None
    cache = ResultCache(storage)
    rows: list[ComparisonRow] = []
    for name in prep.request.target_list:
        if name in prep.unsupported:
            rows.append(ComparisonRow(target=name, error=prep.unsupported[name]))
            continue
        target = get_target(name, prep.overrides)
        hit = cache.get(cache_key(prep.problems[0], name, prep.overrides, cost_model_version(target), prep.settings))
        if not answers(hit, prep.request.validate_result) or hit is None:
            return None
        rows.append(ComparisonRow(target=name, result=hit.model_copy(update={"cached": True})))
    if prep.kind == "tune":
        assert rows[0].result is not None
        return rows[0].result.model_dump_json()
    return ComparisonResult(rows=rows).model_dump_json()


def _one(prep: Prepared, name: str, storage: str, watch: Watch | None) -> TuneResult | WorkloadResult:
    req = prep.request
    if prep.kind == "workload" or (prep.kind == "comparison" and req.network is not None and req.layer is None):
        return tune_layers(
            prep.problems, name, prep.settings, name=str(req.network), overrides=prep.overrides, storage=storage,
            workers=1, validate=req.validate_result, watch=watch,
        )  # fmt: skip
    return tune_cached(
        prep.problems[0], name, prep.settings, overrides=prep.overrides, storage=storage,
        validate=req.validate_result, progress=watch,
    )  # fmt: skip


def _cancelled(r: TuneResult | WorkloadResult) -> bool:
    return r.stop_reason == "cancelled" if isinstance(r, TuneResult) else not r.complete


def execute(prep: Prepared, storage: str, watch: Watch) -> tuple[str, str, str | None]:
    """Run a prepared request; returns (final state, result JSON, stop reason).

    The state is ``cancelled`` when the watch stopped the search (the result keeps what was found).
    """
    if prep.kind != "comparison":
        r = _one(prep, prep.request.target_list[0], storage, watch)
        reason = r.stop_reason if isinstance(r, TuneResult) else ("cancelled" if not r.complete else None)
        return ("cancelled" if _cancelled(r) else "succeeded"), r.model_dump_json(), reason
    rows: list[ComparisonRow] = []
    targets = prep.request.target_list
    inner = Watch(cancel=watch.cancel)
    stopped = False
    for n, name in enumerate(targets):
        if name in prep.unsupported:
            rows.append(ComparisonRow(target=name, error=prep.unsupported[name]))
        elif stopped or watch.cancelled():
            stopped = True
            rows.append(ComparisonRow(target=name, error="cancelled before this target was tuned"))
        else:
            try:
                r = _one(prep, name, storage, inner)
                rows.append(ComparisonRow(target=name, result=r))
                stopped = _cancelled(r)
            except ProblemError as e:
                rows.append(ComparisonRow(target=name, error=str(e)))
        watch.report(n + 1, len(targets), None, unit="targets")
    state = "cancelled" if stopped else "succeeded"
    return state, ComparisonResult(rows=rows).model_dump_json(), "cancelled" if stopped else None


def request_json(request: TuningRequest) -> dict[str, Any]:
    """The request as stored with its job (aliases, as a client writes it)."""
    data: dict[str, Any] = json.loads(request.model_dump_json(by_alias=True, exclude_none=True))
    return data
