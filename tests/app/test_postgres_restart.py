"""PostgreSQL stopped and started while jobs run: the API reports the outage, everything reconnects, no job
is lost.

The server stopped here is a private throwaway cluster (`private_postgres`), never the machine's
shared PostgreSQL. `mapper serve` (API + one worker) and a second `mapper worker` run on it as
separate processes, as in production.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.app.private_postgres import PrivateCluster, find_bindir

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "app", "--no-browser"]
WORKER = [sys.executable, "-c", "from app.cli import main; main(['worker'])"]
OUTAGE_SECONDS = 4.0  # several heartbeats (0.2 s) and back-offs, well under the stale limit below
STALE_SECONDS = 60.0  # no claim goes stale during the outage: surviving it must not need a re-queue

BINDIR, WHY_NOT = find_bindir()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(BINDIR is None, reason=WHY_NOT),
    pytest.mark.skipif(os.geteuid() == 0 and shutil.which("runuser") is None, reason="root, and no runuser"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(what: str, check: Callable[[], bool], timeout: float, seen: Callable[[], object] = str) -> None:
    """Wait until `check()`; on a time-out, fail saying what `seen()` shows then (the jobs, say)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(httpx.HTTPError):
            if check():
                return
        time.sleep(0.1)
    try:
        state = seen()
    except httpx.HTTPError as e:
        state = f"(could not ask: {type(e).__name__}: {e})"
    pytest.fail(f"{what}: not within {timeout} s; {state}")


def _jobs(c: httpx.Client) -> list[tuple[object, ...]]:
    every = c.get("/v1/tunings", params={"limit": 100}).json()["items"]
    return [(j["id"][:8], j["kind"], j["state"], j["worker"], j["attempts"], j["progress"], j["error"]) for j in every]


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=5)
    return out or ""


@pytest.fixture
def cluster() -> Iterator[PrivateCluster]:
    assert BINDIR is not None
    pg = PrivateCluster(BINDIR)
    try:
        pg.init()
        pg.start()
        yield pg
    finally:
        pg.remove()


def _workload(name: str, seconds: float) -> dict[str, Any]:
    """Each layer searched by TPE for `seconds` (patience 0, no validation): a job of a predictable length."""
    return {"workload": name, "target": "rngd", "strategy": "tpe", "trials": 100_000, "seconds": seconds,
            "patience": 0, "validate": False}  # fmt: skip


SMALL = {
    "problem": {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 256, "k": 256, "n": 256}, "dtype": "bf16"},
    "target": "trn2",
}


def test_postgres_restart_mid_job_loses_nothing(cluster: PrivateCluster) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TM_")} | {
        "TM_HOST": "127.0.0.1", "TM_PORT": str(port), "TM_STORAGE": cluster.url, "TM_WORKERS": "1",
        "TM_HEARTBEAT_SECONDS": "0.2", "TM_POLL_SECONDS": "0.1", "TM_STALE_SECONDS": str(STALE_SECONDS),
    }  # fmt: skip
    spawn = {"cwd": ROOT, "env": env, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True,
             "start_new_session": True}  # fmt: skip
    serve = subprocess.Popen(SERVE, **spawn)  # type: ignore[call-overload]
    worker = subprocess.Popen(WORKER, **spawn)  # type: ignore[call-overload]
    logs = ""
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:  # 30 s: a loaded 2-core machine
            _wait_for("ready before the outage", lambda: c.get("/v1/ready").status_code == 200, 60)
            long_job = c.post("/v1/tunings", json=_workload("bert-base", 2.0)).json()  # 5 layers, 2 s each
            small_job = c.post("/v1/tunings", json=SMALL).json()
            _wait_for(
                "workload job running with progress",
                lambda: (
                    (j := c.get(f"/v1/tunings/{long_job['id']}").json())["state"] == "running"
                    and j["progress"]["done"] > 0
                ),
                30,
            )
            assert c.get(f"/v1/tunings/{long_job['id']}").json()["state"] == "running", "ended before the outage"

            cluster.stop()
            t_stop = time.monotonic()
            r = c.get("/v1/ready")
            assert r.status_code == 503, r.text
            assert r.headers["content-type"].startswith("application/problem+json")
            body = r.json()
            assert body["status"] == 503 and body["ready"] is False
            assert body["storage"].startswith("unreachable"), body
            assert f"127.0.0.1:{cluster.port}" in body["detail"] and "unreachable" in body["detail"], body
            # any other route answers a 503 problem detail too, never a 500
            r = c.get(f"/v1/tunings/{long_job['id']}")
            assert r.status_code == 503 and r.headers["content-type"].startswith("application/problem+json"), r.text
            assert "unreachable" in r.json()["detail"] and r.headers["retry-after"]
            while time.monotonic() - t_stop < OUTAGE_SECONDS:
                assert c.get("/v1/ready").status_code == 503  # for as long as it lasts
                time.sleep(0.5)

            cluster.start()
            _wait_for("ready after the restart", lambda: c.get("/v1/ready").status_code == 200, 30)
            ids = (long_job["id"], small_job["id"])
            _wait_for(
                "both jobs ended",
                lambda: all(
                    c.get(f"/v1/tunings/{i}").json()["state"] in ("succeeded", "failed", "cancelled") for i in ids
                ),
                120,
                lambda: _jobs(c),
            )
            final = {i: c.get(f"/v1/tunings/{i}").json() for i in ids}
            for job in final.values():
                assert job["state"] == "succeeded", job
                assert job["attempts"] == 1, job  # survived in place: neither re-queued nor failed
            result = c.get(f"/v1/tunings/{long_job['id']}/result").json()
            assert result["complete"] is True
            assert all(r["mapping"] is not None for r in result["results"].values())
            every = c.get("/v1/tunings", params={"limit": 100}).json()["items"]
            assert every and all(j["state"] == "succeeded" for j in every), [(j["state"], j["error"]) for j in every]
    finally:
        logs = _stop(worker) + _stop(serve)
        print(logs[-20000:])  # pytest shows it when the test fails: what the server and worker said
    # the outage was met and waited out (not missed because the jobs had already ended)
    assert "storage unreachable" in logs, logs[-3000:]
