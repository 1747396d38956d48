"""GET /v1/tunings/{id}/report: the HTML report of a finished job, problem details otherwise."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app.jobs.worker import Worker
from app.settings import Settings
from tests.report.html_parts import parse, svgs

MATMUL = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 256, "k": 256, "n": 256}}


def _run(client: TestClient, settings: Settings, body: dict) -> str:
    job = client.post("/v1/tunings", json=body).json()
    Worker(settings, store=client.app.state.store).run_once()  # type: ignore[attr-defined]
    return str(job["id"])


def test_a_finished_job_answers_its_report_as_html(client: TestClient, settings: Settings) -> None:
    job_id = _run(client, settings, {"problem": MATMUL, "target": "trn2"})
    r = client.get(f"/v1/tunings/{job_id}/report")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    result = client.get(f"/v1/tunings/{job_id}/result").json()
    doc = parse(r.text)
    assert doc.summary()["problem"] == result["problem"]
    assert {"summary", "roofline", "nest"} <= set(doc.sections)
    assert len(re.findall(r'id="nest-level-\d+"', r.text)) == len(result["mapping"]["levels"])
    assert not re.search(r"https?://", r.text)


def test_a_comparison_job_reports_each_target(client: TestClient, settings: Settings) -> None:
    job_id = _run(client, settings, {"problem": MATMUL, "targets": ["trn2", "wormhole-n150"]})
    r = client.get(f"/v1/tunings/{job_id}/report")
    assert r.status_code == 200
    doc = parse(r.text)
    assert {"target-trn2", "target-wormhole-n150"} <= set(doc.sections)
    assert "cores" in svgs(r.text)  # the Tenstorrent row draws its core grid


def test_an_unfinished_or_unknown_job_gets_a_problem_detail(client: TestClient) -> None:
    job = client.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2"}).json()
    r = client.get(f"/v1/tunings/{job['id']}/report")
    assert r.status_code == 409 and r.headers["content-type"].startswith("application/problem+json")
    assert "no result to report" in r.json()["detail"] and "queued" in r.json()["detail"]
    r = client.get("/v1/tunings/nope/report")
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")


def test_the_report_route_is_in_the_openapi_console_as_html(client: TestClient) -> None:
    op = client.get("/openapi.json").json()["paths"]["/v1/tunings/{job_id}/report"]["get"]
    assert op["operationId"] == "get_tuning_report"
    assert "text/html" in op["responses"]["200"]["content"]
    assert {"404", "409"} <= set(op["responses"])
