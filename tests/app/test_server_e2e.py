"""End to end over real sockets: uvicorn on loopback, real worker processes, one embedded database.

One service (`mapper serve`, one worker) runs for the whole module (its start-up is the slow
part). The tests run in order on its single worker: a small tuning followed to its end over SSE,
its result and metrics; a long search cancelled mid-run; a worker killed with SIGKILL mid-job,
whose job a restarted worker takes over once it has gone stale.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
STALE_SECONDS = 2.0

SERVE = [sys.executable, "-m", "app", "--no-browser"]  # `mapper serve`; settings from the TM_* environment
WORKER = [sys.executable, "-c", "from app.cli import main; main(['worker'])"]  # `mapper worker`

SMALL = {
    "problem": {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 256, "k": 256, "n": 256}, "dtype": "bf16"},
    "target": "trn2",
}


def _workload(name: str, seconds: float) -> dict[str, Any]:
    """A named workload on rngd, each layer searched by TPE for up to `seconds` (patience 0: no convergence
    stop). A single problem is no good here: how soon TPE exhausts its structural choices depends on the
    measured scoring rate, so on how busy the machine is."""
    return {
        "workload": name,
        "target": "rngd",
        "strategy": "tpe",
        "trials": 100_000,
        "seconds": seconds,
        "patience": 0,
        "validate": False,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], bool], timeout: float, every: float = 0.05) -> float:
    """Poll `check` until it holds; the seconds it took (fails the test after `timeout`)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if check():
                return time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(every)
    pytest.fail(f"{what}: not within {timeout} s")


def stop(proc: subprocess.Popen[str], timeout: float = 10.0) -> str:
    """SIGTERM the process group of `proc`, SIGKILL what is left after `timeout`; its output."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=5)
    return out or ""


@dataclass
class Service:
    base: str
    env: dict[str, str]
    proc: subprocess.Popen[str]
    extra: list[subprocess.Popen[str]] = field(default_factory=list)

    def client(self, timeout: float = 10.0) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=timeout)

    def start_worker(self) -> subprocess.Popen[str]:
        """Another worker process on the same storage (as `mapper worker` would run)."""
        p = subprocess.Popen(
            WORKER,
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.extra.append(p)
        return p


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    data = tmp_path_factory.mktemp("e2e") / "data"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TM_")} | {
        "TM_HOST": "127.0.0.1",
        "TM_PORT": str(port),
        "TM_DATA_DIR": str(data),
        "TM_WORKERS": "1",
        "TM_HEARTBEAT_SECONDS": "0.2",
        "TM_POLL_SECONDS": "0.1",
        "TM_STALE_SECONDS": str(STALE_SECONDS),
    }
    proc = subprocess.Popen(
        SERVE,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    svc = Service(f"http://127.0.0.1:{port}", env, proc)
    try:
        with svc.client(timeout=2) as c:
            wait_for("service ready (API up, worker heartbeating)", lambda: c.get("/v1/ready").status_code == 200, 60)
        yield svc
    finally:
        for p in svc.extra:
            stop(p)
        out = stop(proc)
        if proc.returncode not in (0, -signal.SIGTERM):
            print(out)


def events(c: httpx.Client, job_id: str, max_seconds: float = 60) -> list[tuple[str, Any]]:
    """Follow a job's server-sent events until `end` (or `timeout`); (event, data) pairs."""
    got: list[tuple[str, Any]] = []
    name = ""
    with c.stream("GET", f"/v1/tunings/{job_id}/events", params={"max_seconds": max_seconds}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("event:"):
                name = line.partition(":")[2].strip()
            elif line.startswith("data:"):
                got.append((name, json.loads(line.partition(":")[2])))
                if name in ("end", "timeout"):
                    break
    return got


def submit(c: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    r = c.post("/v1/tunings", json=body)
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/v1/tunings/{r.json()['id']}"
    job: dict[str, Any] = r.json()
    return job


def job_of(c: httpx.Client, job_id: str) -> dict[str, Any]:
    r = c.get(f"/v1/tunings/{job_id}")
    assert r.status_code == 200, r.text
    job: dict[str, Any] = r.json()
    return job


def running_with_progress(c: httpx.Client, job_id: str) -> Callable[[], bool]:
    def check() -> bool:
        job = job_of(c, job_id)
        assert job["state"] in ("queued", "running"), job
        return bool(job["state"] == "running" and job["progress"]["done"] > 0)

    return check


def test_small_tuning_followed_over_sse(service: Service) -> None:
    with service.client() as c:
        t0 = time.monotonic()
        job = submit(c, SMALL)
        assert job["state"] == "queued"
        got = events(c, job["id"])
        took = time.monotonic() - t0
        kinds = [name for name, _ in got]
        assert kinds[0] == "state" and kinds[-1] == "end", kinds
        assert "progress" in kinds
        end = got[-1][1]
        assert end["state"] == "succeeded", end
        assert end["attempts"] == 1
        print(f"small tuning: submitted to end event in {took:.2f} s")

        r = c.get(f"/v1/tunings/{job['id']}/result")
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        result = r.json()
        assert result["target"] == "trn2"
        assert result["mapping"] is not None
        assert result["validation_passed"] is True
        assert result["stop_reason"] == end["stop_reason"]
        proven = ("enumerated", "lower-bound", "space-exhausted")
        assert result["stop_reason"] in (*proven, "converged", "trials", "seconds")

        # the same request again: answered from the cache at once, no second search
        again = c.post("/v1/tunings", json=SMALL)
        assert again.status_code in (200, 202)
        assert again.json()["state"] == "succeeded"

        metrics = c.get("/metrics")
        assert metrics.status_code == 200
        lines = metrics.text.splitlines()
        assert any(line.startswith('tm_jobs{state="succeeded"}') and float(line.split()[-1]) >= 1 for line in lines)
        assert any(line.startswith("tm_jobs_finished") and float(line.split()[-1]) >= 1 for line in lines)
        assert any(line.startswith("tm_http_requests_total") and 'route="/v1/tunings"' in line for line in lines)


def test_cancel_a_long_search_keeps_its_best(service: Service) -> None:
    with service.client() as c:
        job = submit(c, _workload("resnet50", 600))  # 23 layers: many minutes
        wait_for("long job running with progress", running_with_progress(c, job["id"]), 30)
        r = c.post(f"/v1/tunings/{job['id']}/cancel")
        assert r.status_code == 202, r.text
        assert r.json()["cancel_requested"] is True
        took = wait_for("cancelled", lambda: job_of(c, job["id"])["state"] == "cancelled", 3.0)
        print(f"cancel: running job ended cancelled {took:.2f} s after the request")
        final = job_of(c, job["id"])
        assert final["stop_reason"] == "cancelled"
        result = c.get(f"/v1/tunings/{job['id']}/result").json()
        assert result["complete"] is False
        kept = [r for r in result["results"].values() if r["mapping"] is not None]
        assert kept, "the layers tuned before the cancel keep their best mappings"
        # a layer job in flight when the cancel arrives stops and keeps its best so far (stop reason cancelled);
        # one that ends within the heartbeat before it hears of the cancel is kept whole: either way the cancel
        # cuts the workload short
        assert len(kept) < result["distinct"], "the cancel left layers unsearched"
        cancelled = [r for r in kept if r["stop_reason"] == "cancelled"]
        assert all(r["mapping"] is not None and not r["proven_optimal"] for r in cancelled)
        print(f"cancel: {len(kept)} layer results kept, stop reasons {sorted(r['stop_reason'] for r in kept)}")
        # a finished job cannot be cancelled again
        again = c.post(f"/v1/tunings/{job['id']}/cancel")
        assert again.status_code == 409
        assert again.headers["content-type"].startswith("application/problem+json")


def test_killed_worker_job_is_requeued_and_completes(service: Service) -> None:
    with service.client() as c:
        job = submit(c, _workload("bert-base", 1.5))  # 5 distinct layers: a few seconds
        wait_for("job running with progress", running_with_progress(c, job["id"]), 30)
        holder = job_of(c, job["id"])["worker"]
        pid = int(holder.split(":")[1])  # worker ids are host:pid:random
        os.kill(pid, signal.SIGKILL)
        t_kill = time.monotonic()
        service.start_worker()
        wait_for("job re-queued", lambda: job_of(c, job["id"])["attempts"] == 2, STALE_SECONDS + 15)
        requeued = time.monotonic() - t_kill
        assert requeued >= STALE_SECONDS - 0.5, "re-queued before the stale limit"
        wait_for("re-run job finished", lambda: job_of(c, job["id"])["state"] != "running", 30)
        final = job_of(c, job["id"])
        print(f"SIGKILL: re-claimed {requeued:.2f} s after the kill, done {time.monotonic() - t_kill:.2f} s after")
        assert final["state"] == "succeeded", final
        assert final["attempts"] == 2
        assert final["worker"] != holder
        result = c.get(f"/v1/tunings/{job['id']}/result").json()
        assert result["complete"] is True
        assert all(r["mapping"] is not None for r in result["results"].values())
