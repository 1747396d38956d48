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
