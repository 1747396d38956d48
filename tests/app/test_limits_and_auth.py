"""Limits name the setting that raises them; tokens guard the routes that create or cancel work."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

MATMUL = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 256, "k": 256, "n": 256}}


def _client(tmp_path: Path, **kw: object) -> TestClient:
    return TestClient(create_app(Settings(data_dir=tmp_path / "d", **kw)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("setting", "value", "body", "names"),
    [
        ("max_trials", 50, {"trials": 51}, "TM_MAX_TRIALS"),
        ("max_search_seconds", 5, {"seconds": 6}, "TM_MAX_SEARCH_SECONDS"),
        ("max_axis_size", 128, {}, "TM_MAX_AXIS_SIZE"),
        ("max_axes", 2, {}, "TM_MAX_AXES"),
        ("max_macs", 1e6, {}, "TM_MAX_MACS"),
    ],
)
def test_each_limit_is_a_422_naming_its_setting(
    tmp_path: Path, setting: str, value: float, body: dict, names: str
) -> None:
    with _client(tmp_path, **{setting: value}) as c:
        r = c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2", **body})
        assert r.status_code == 422 and names in r.json()["hint"] and r.json()["limit"] == names[3:].lower()
        assert c.get("/v1/tunings").json()["items"] == []
    with _client(tmp_path) as c:  # the defaults let the same request through
        assert c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2", **body}).status_code == 202


@pytest.mark.parametrize(
    ("body", "names"), [({"trials": 1_000_000}, "TM_MAX_TRIALS"), ({"seconds": 4000}, "TM_MAX_SEARCH_SECONDS")]
)
def test_a_budget_over_the_default_limit_names_the_setting_that_raises_it(
    tmp_path: Path, body: dict, names: str
) -> None:
    with _client(tmp_path) as c:
        r = c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2", **body})
        assert r.status_code == 422 and f"raise the limit with {names}" in r.json()["hint"], r.json()
    with _client(tmp_path, max_trials=1_000_000, max_search_seconds=4000) as c:  # and the setting does raise it
        assert c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2", **body}).status_code == 202


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"trials": 1_000_001}, "at most 1000000 trials, a fixed limit"),
        ({"seconds": 86_401}, "at most 86400 seconds, a fixed limit"),
        ({"problem": {**MATMUL, "sizes": {"m": 1 << 25, "k": 2, "n": 2}}}, "split the axis"),
    ],
)
def test_a_fixed_limit_says_what_to_ask_for_instead(tmp_path: Path, body: dict, says: str) -> None:
    with _client(tmp_path) as c:
        r = c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2", **body})
        assert r.status_code == 422 and says in r.json()["hint"], r.json()


def test_a_client_over_its_quota_gets_429_but_duplicates_still_answer(tmp_path: Path) -> None:
    with _client(tmp_path, max_active_per_client=2) as c:
        ids = [
            c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2", "seed": s}).json()["id"] for s in (0, 1)
        ]
        r = c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2", "seed": 2})
        assert r.status_code == 429 and "TM_MAX_ACTIVE_PER_CLIENT" in r.json()["hint"]
        assert c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2", "seed": 0}).json()["id"] == ids[0]
        c.post(f"/v1/tunings/{ids[0]}/cancel")
        assert c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2", "seed": 2}).status_code == 202


def test_tokens_guard_writes_and_leave_reads_open(tmp_path: Path) -> None:
    with _client(tmp_path, api_tokens="s3cret, other") as c:
        body = {"problem": MATMUL, "target": "trn2"}
        r = c.post("/v1/tunings", json=body)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert c.post("/v1/tunings", json=body, headers={"Authorization": "Bearer nope"}).status_code == 401
        ok = c.post("/v1/tunings", json=body, headers={"Authorization": "Bearer other"})
        assert ok.status_code == 202
        job = ok.json()["id"]
        assert c.get(f"/v1/tunings/{job}").status_code == 200  # reads stay open
        assert c.post(f"/v1/tunings/{job}/cancel").status_code == 401
        assert c.post(f"/v1/tunings/{job}/cancel", headers={"Authorization": "Bearer s3cret"}).status_code == 202
        assert c.get("/v1/health").status_code == 200


def test_auth_reads_guards_reads_but_not_health(tmp_path: Path) -> None:
    with _client(tmp_path, api_tokens="t", auth_reads=True) as c:
        assert c.get("/v1/tunings").status_code == 401
        assert c.get("/v1/tunings", headers={"Authorization": "Bearer t"}).status_code == 200
        assert c.get("/v1/health").status_code == 200 and c.get("/metrics").status_code == 200


def test_without_tokens_everything_is_open(tmp_path: Path) -> None:
    with _client(tmp_path) as c:
        assert c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2"}).status_code == 202


def _needs_token(op: dict) -> bool:
    return bool(op.get("security")) and {} not in op["security"]


@pytest.mark.parametrize(
    ("settings", "writes", "reads"),
    [({}, False, False), ({"api_tokens": "t"}, True, False), ({"api_tokens": "t", "auth_reads": True}, True, True)],
    ids=["no tokens", "tokens", "tokens and auth_reads"],
)
def test_the_document_asks_for_a_token_exactly_where_the_service_does(
    tmp_path: Path, settings: dict, writes: bool, reads: bool
) -> None:
    """A client (or a fuzzer's auth checks) reading the document meets what the service enforces: a route
    the document says needs a token answers 401 without one, and a route it leaves open answers without."""
    with _client(tmp_path, **settings) as c:
        doc = c.get("/openapi.json").json()
        ops = {(m.upper(), p): op for p, item in doc["paths"].items() for m, op in item.items()}
        assert ("securitySchemes" in doc.get("components", {})) is writes
        job = c.post("/v1/tunings", json={"problem": MATMUL, "target": "trn2"}, headers={"Authorization": "Bearer t"})
        calls = {
            ("POST", "/v1/tunings"): lambda: c.post("/v1/tunings", json={"problem": MATMUL, "target": "rngd"}),
            ("POST", "/v1/tunings/{job_id}/cancel"): lambda: c.post(f"/v1/tunings/{job.json()['id']}/cancel"),
            ("GET", "/v1/tunings"): lambda: c.get("/v1/tunings"),
            ("GET", "/v1/targets"): lambda: c.get("/v1/targets"),
            ("POST", "/v1/problems/analyze"): lambda: c.post("/v1/problems/analyze", json=MATMUL),
            ("GET", "/v1/health"): lambda: c.get("/v1/health"),
        }
        for (method, path), call in calls.items():
            needed = _needs_token(ops[(method, path)])
            assert needed is (writes if method == "POST" and path.startswith("/v1/tunings") else reads and
                              path != "/v1/health"), (method, path)  # fmt: skip
            assert (call().status_code == 401) is needed, (method, path)
            assert ("401" in ops[(method, path)]["responses"]) is needed, (method, path)
        # every operation: a token is required, optional or not asked for, as the settings say
        for (method, path), op in ops.items():
            if _needs_token(op):
                assert writes and (reads or method != "GET"), (method, path)
