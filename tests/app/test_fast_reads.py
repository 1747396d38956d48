"""Finished results read from memory before routing: the same bytes as the route, an ETag, 304, auth kept."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.api.fast_reads import etag_matches
from app.jobs.worker import Worker
from app.main import create_app
from app.settings import Settings

BODY = {
    "problem": {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 128, "k": 128, "n": 64}},
    "target": "trn2",
    "validate": False,
}


def _finished_job(client: TestClient, settings: Settings, headers: dict[str, str] | None = None) -> str:
    job = client.post("/v1/tunings", json=BODY, headers=headers or {}).json()
    Worker(settings, store=client.app.state.store).run_once()  # type: ignore[attr-defined]
    return str(job["id"])


def test_a_held_result_is_answered_from_memory_with_the_routes_bytes_and_etag(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        job_id = _finished_job(client, settings)
        store = client.app.state.store  # type: ignore[attr-defined]
        store._bodies.clear()  # not held yet: the first read goes through the route and the database
        store._finished.clear()
        first = client.get(f"/v1/tunings/{job_id}/result")
        assert first.status_code == 200 and first.headers["etag"]
        assert store.finished_body(job_id) is not None  # now held
        again = client.get(f"/v1/tunings/{job_id}/result")  # from memory
        assert again.status_code == 200 and again.content == first.content
        assert again.headers["etag"] == first.headers["etag"]
        assert again.headers["content-type"] == "application/json"
        assert again.json()["target"] == "trn2"
        # conditional reads: 304 without a body on both paths
        not_modified = client.get(f"/v1/tunings/{job_id}/result", headers={"If-None-Match": first.headers["etag"]})
        assert not_modified.status_code == 304 and not_modified.content == b""
        other = client.get(f"/v1/tunings/{job_id}/result", headers={"If-None-Match": '"something-else"'})
        assert other.status_code == 200 and other.content == first.content
        store._bodies.clear()
        routed = client.get(f"/v1/tunings/{job_id}/result", headers={"If-None-Match": first.headers["etag"]})
        assert routed.status_code == 304
        # the fast path is still counted under the route
        metrics = client.get("/metrics").text
        assert 'route="/v1/tunings/{job_id}/result",status="304"' in metrics
        assert 'route="/v1/tunings/{job_id}/result",status="200"' in metrics
        get_lines = [x for x in metrics.splitlines() if x.startswith("tm_http_requests_total{") and 'method="GET"' in x]
        counted = {x[x.index("{") + 1 : x.rindex("}")]: float(x.split()[-1]) for x in get_lines}
        assert not any('route="unmatched"' in labels for labels in counted), counted
        # the first read was routed, then three answered from memory (two 200, one 304), one more routed 304
        assert counted['method="GET",route="/v1/tunings/{job_id}/result",status="200"'] == 3
        assert counted['method="GET",route="/v1/tunings/{job_id}/result",status="304"'] == 2


def test_reads_that_need_a_token_never_take_the_fast_path(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", api_tokens="sesame", auth_reads=True, poll_seconds=0.05)
    auth = {"Authorization": "Bearer sesame"}
    with TestClient(create_app(settings)) as client:
        job_id = _finished_job(client, settings, auth)
        assert client.get(f"/v1/tunings/{job_id}/result", headers=auth).status_code == 200  # now held in memory
        assert client.app.state.store.finished_body(job_id) is not None  # type: ignore[attr-defined]
        r = client.get(f"/v1/tunings/{job_id}/result")
        assert r.status_code == 401, r.text


def test_a_job_not_held_or_unknown_goes_to_the_routes(client: TestClient) -> None:
    r = client.get("/v1/tunings/" + "0" * 32 + "/result")
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")


def test_if_none_match_lists_and_weak_tags() -> None:
    assert etag_matches('"a", W/"b"', '"b"') and etag_matches("*", '"x"')
    assert not etag_matches('"a"', '"b"')
