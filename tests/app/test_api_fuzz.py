"""Schemathesis against the app's own OpenAPI document: every route, seeded and bounded.

Stateless: for each operation, its documented examples and schema-generated requests (valid and
invalid); no undocumented 5xx, and every response conforms to the document (status code, content
type, body, headers). Stateful: sequences along the document's links (create -> get, result, report,
cancel) and those schemathesis infers (events, list). The app runs in-process on a fresh embedded
database with no worker, so jobs stay queued; `/events` is bounded by pinning `max_seconds` (its
stream would otherwise wait for the job to end: the e2e test follows it to the end).

Not checked: that every schema-valid request is accepted. The engine rejects (422, with a
hint) problems that JSON Schema cannot describe, e.g. a mapping whose loops name axes the
problem lacks.
"""

from __future__ import annotations

import os
import zlib
from collections import Counter
from typing import Any

import httpx
import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.core.result import Ok

from app.jobs.tables import jobs
from app.main import create_app
from app.settings import Settings

EXAMPLES_PER_OPERATION = int(os.environ.get("TM_FUZZ_EXAMPLES", "20"))  # `make fuzz` raises it
SEED = 20261125
TOKEN = "fuzz-token"  # the app requires it on every secured route, reads too: the auth checks see it enforced
CASES: Counter[str] = Counter()


class Forward:
    """An ASGI app that passes everything (lifespan included) to `target`, the `app` fixture's app: the
    schemas below are built at import, before the fixture exists, and schemathesis sends through them."""

    target: FastAPI | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert self.target is not None, "the app fixture sets the target"
        await self.target(scope, receive, send)


APP = Forward()


def load_schema() -> schemathesis.BaseSchema:
    """The app's own document as the `app` fixture serves it (tokens on every route: the document asks for one
    where the settings do, `app.api.openapi_security`; building it touches no storage), sending to APP."""
    loaded = schemathesis.openapi.from_dict(create_app(Settings(api_tokens=TOKEN, auth_reads=True)).openapi())
    loaded.app = APP
    return loaded


schema = load_schema()
schema.config.seed = SEED
schema.config.phases.update(phases=["examples", "fuzzing", "stateful"])  # no coverage phase: thousands of cases
schema.config.update(parameters={"query.max_seconds": 0.2})  # /events closes after 0.2 s with `timeout`
# a shared, loaded machine: a cold first request (e.g. rngd's lower bound of a new conv2d) can pass 10 s
REQUEST_TIMEOUT = 60
schema.config.update(request_timeout=REQUEST_TIMEOUT)
schema.config.checks.update(excluded_check_names=["positive_data_acceptance", "not_a_server_error"])
schema.config.update(headers={"Authorization": f"Bearer {TOKEN}"})

HYPOTHESIS = settings(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))


def no_undocumented_server_error(ctx: Any, response: schemathesis.Response, case: schemathesis.Case) -> None:
    """No 5xx unless the operation documents it (GET /v1/ready answers 503 while no worker is alive)."""
    if response.status_code >= 500:
        documented = case.operation.definition.raw.get("responses", {})
        assert str(response.status_code) in documented, (
            f"{case.method} {case.formatted_path} answered {response.status_code}: {response.text[:300]}"
        )


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    """The service in-process on a fresh embedded database (schemathesis runs its lifespan)."""
    data = tmp_path_factory.mktemp("fuzz") / "data"
    app = create_app(Settings(data_dir=data, poll_seconds=0.05, api_tokens=TOKEN, auth_reads=True))
    APP.target = app
    return app


@schema.parametrize()
@settings(HYPOTHESIS, max_examples=EXAMPLES_PER_OPERATION)
def test_every_route_conforms(case: schemathesis.Case, app: FastAPI) -> None:
    CASES[f"{case.method} {case.path}"] += 1
    case.call_and_validate(additional_checks=[no_undocumented_server_error])


def test_fuzzing_covers_every_route(app: FastAPI) -> None:
    """Every operation of the served document can be generated for; when the fuzzing above ran in this
    process (not so under xdist), each operation got cases."""
    results = list(schema.get_all_operations())
    assert all(isinstance(r, Ok) for r in results), [r for r in results if not isinstance(r, Ok)]
    documented = {f"{r.ok().method.upper()} {r.ok().path}" for r in results if isinstance(r, Ok)}
    assert documented == {
        f"{method.upper()} {path}" for path, item in app.openapi()["paths"].items() for method in item
    }, "the fuzzed document is the served one"
    if CASES and not os.environ.get("PYTEST_XDIST_WORKER"):  # under xdist the fuzz tests spread over processes
        print(f"\nstateless fuzz cases: {sum(CASES.values())} over {len(CASES)} operations: {dict(CASES)}")
        assert documented <= set(CASES), f"operations never fuzzed: {sorted(documented - set(CASES))}"


# Stateful: the job routes only, along the links schemathesis infers from the document (POST's `id`
# feeds `{job_id}`). A generated tuning keeps its search settings but gets a small real problem (random
# problems and targets are nearly all rejected with 422, and then no job exists to follow).
jobs_schema = load_schema().include(path_regex="^/v1/tunings")
jobs_schema.config.seed = SEED
jobs_schema.config.update(parameters={"query.max_seconds": 0.2}, request_timeout=REQUEST_TIMEOUT)
jobs_schema.config.checks.update(excluded_check_names=["positive_data_acceptance", "not_a_server_error"])
jobs_schema.config.update(headers={"Authorization": f"Bearer {TOKEN}"})
jobs_schema.config.generation.update(modes=[schemathesis.GenerationMode.POSITIVE])  # negatives: stateless above
schema.config.update(headers={"Authorization": f"Bearer {TOKEN}"})
TARGETS = ("trn2", "rngd", "ascend-910b", "wormhole-n150")
SEARCH_FIELDS = ("strategy", "trials", "seconds", "patience", "seed", "validate")


@jobs_schema.hook
def map_body(context: Any, body: Any) -> Any:
    op = context.operation
    if op is None or op.method.upper() != "POST" or op.path != "/v1/tunings" or not isinstance(body, dict):
        return body
    n = zlib.crc32(repr(sorted(body.items(), key=str)).encode()) % 64 + 1
    problem = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 16 * n, "k": 64, "n": 32}, "dtype": "bf16"}
    return {"problem": problem, "target": TARGETS[n % len(TARGETS)]} | {
        k: v for k, v in body.items() if k in SEARCH_FIELDS
    }


@jobs_schema.hook
def map_query(context: Any, query: Any) -> Any:
    """Bound every event stream (the `parameters` setting does not reach stateful steps)."""
    op = context.operation
    if op is not None and op.path.endswith("/events") and isinstance(query, dict):
        return query | {"max_seconds": 0.2}
    return query


def test_stateful_create_get_result_cancel(app: FastAPI) -> None:
    steps: Counter[str] = Counter()

    class Machine(jobs_schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            """Each scenario starts on an empty job table: what it sees depends on its own steps only."""
            store = getattr(app.state, "store", None)  # there once the first request has run the lifespan
            if store is not None:
                with store.engine.begin() as c:
                    c.execute(jobs.delete())

        def after_call(self, response: schemathesis.Response, case: schemathesis.Case) -> None:
            super().after_call(response, case)
            steps[f"{case.method} {case.path} -> {response.status_code}"] += 1

        def validate_response(
            self,
            response: schemathesis.Response,
            case: schemathesis.Case,
            additional_checks: list[Any] | None = None,
            **kwargs: Any,
        ) -> None:
            super().validate_response(response, case, [no_undocumented_server_error], **kwargs)

    links = [name for name in dir(Machine) if name.startswith("POST_v1_tunings___202")]
    assert len(links) >= 3, f"POST /v1/tunings should link to the job's routes; links: {links}"
    Machine.run(settings=settings(HYPOTHESIS, max_examples=max(25, EXAMPLES_PER_OPERATION // 4), stateful_step_count=8))
    print(f"\nstateful steps: {sum(steps.values())}: {dict(sorted(steps.items()))}")
    for reached in (
        "POST /v1/tunings -> 202",
        "GET /v1/tunings/{job_id} -> 200",
        "GET /v1/tunings/{job_id}/result -> 409",
        "POST /v1/tunings/{job_id}/cancel -> 202",
        "GET /v1/tunings/{job_id}/report -> 409",
    ):
        assert reached in steps, f"never reached {reached}"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/health",
        "/v1/tunings",  # two routes (GET and POST): Starlette's own Allow named only the first
        "/v1/tunings/some-job",
    ],
)
def test_unsupported_method_is_405_naming_the_allowed_ones(app: FastAPI, path: str) -> None:
    documented = schema.raw_schema["paths"]
    template = path if path in documented else "/v1/tunings/{job_id}"
    allowed = {m.upper() for m in documented[template]}
    with TestClient(app) as c:
        r: httpx.Response = c.request("PUT", path, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 405
    assert r.headers["content-type"].startswith("application/problem+json")
    assert {m.strip() for m in r.headers["allow"].split(",")} == allowed
