"""`mapper serve`'s process management: storage checked before anything starts, workers die with their server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.server import StorageUnusable, check_storage
from app.settings import Settings


def test_an_unusable_data_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StorageUnusable, match="cannot create the data directory"):
        check_storage(Settings(data_dir=blocker / "data"))


def test_an_unreachable_database_is_a_clear_error(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path, storage="postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(StorageUnusable, match="cannot use the database"):
        check_storage(s)


def test_a_usable_directory_gets_its_database(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path / "new" / "data")
    check_storage(s)
    assert (tmp_path / "new" / "data" / "tensormapper.db").is_file()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout
    return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


@pytest.mark.skipif(not Path("/proc").is_dir() or subprocess.run(["which", "pgrep"], capture_output=True).returncode,
                    reason="needs /proc and pgrep")  # fmt: skip
def test_workers_exit_when_their_server_is_killed(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "TM_DATA_DIR": str(tmp_path / "data"), "TM_PORT": str(port), "TM_POLL_SECONDS": "0.1",
           "TM_HEARTBEAT_SECONDS": "0.2", "TM_WORKERS": "1"}  # fmt: skip
    code = "from app.server import serve; from app.settings import Settings; serve(Settings(), open_browser=False)"
    server = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        else:
            pytest.fail("the service never became ready")
        workers = [p for p in _children(server.pid) if _alive(p)]
        assert workers, "serve started no worker process"
        server.send_signal(signal.SIGKILL)
        server.wait(5)
        end = time.monotonic() + 10
        while any(_alive(p) for p in workers) and time.monotonic() < end:
            time.sleep(0.1)
        assert not any(_alive(p) for p in workers), "an orphaned worker kept running"
    finally:
        if server.poll() is None:
            server.kill()
        for p in _children(server.pid):
            os.kill(p, signal.SIGKILL)


def _serve(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TM_DATA_DIR": str(tmp_path / "data"), "TM_PORT": str(port), "TM_POLL_SECONDS": "0.1",
           "TM_HEARTBEAT_SECONDS": "0.2", "TM_STALE_SECONDS": "2", "TM_WORKERS": "1"}  # fmt: skip
    code = "from app.server import serve; from app.settings import Settings; serve(Settings(), open_browser=False)"
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _until(check: object, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if check():  # type: ignore[operator]
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout}s")


@pytest.mark.skipif(subprocess.run(["which", "pgrep"], capture_output=True).returncode != 0, reason="needs pgrep")
def test_a_job_survives_the_api_killed_and_restarted(tmp_path: Path) -> None:
    from mapper.settings import SearchSettings
    from mapper.workloads import tune_workload

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    body = {"workload": "resnet50", "params": {"batch": 1}, "target": "ascend-910b", "validate": False}
    server = _serve(tmp_path, port)
    try:
        _until(lambda: httpx.get(f"{base}/v1/ready", timeout=1).status_code == 200, 30)
        job = httpx.post(f"{base}/v1/tunings", json=body, timeout=10).json()
        _until(lambda: httpx.get(f"{base}/v1/tunings/{job['id']}", timeout=1).json()["progress"]["done"] >= 1, 30)
        workers = _children(server.pid)
        server.send_signal(signal.SIGKILL)
        server.wait(5)
        for p in workers:  # the orphaned worker would finish the job by itself: take it down too
            os.kill(p, signal.SIGKILL)
        server = _serve(tmp_path, port)  # same data directory
        _until(lambda: httpx.get(f"{base}/v1/tunings/{job['id']}", timeout=1).json()["state"] == "succeeded", 60)
        final = httpx.get(f"{base}/v1/tunings/{job['id']}", timeout=5).json()
        result = httpx.get(f"{base}/v1/tunings/{job['id']}/result", timeout=5).json()
    finally:
        server.kill()
        server.wait(5)
        for p in _children(server.pid):
            os.kill(p, signal.SIGKILL)
    assert final["attempts"] == 2  # claimed again after its first worker stopped heartbeating
    undisturbed = tune_workload("resnet50", "ascend-910b", SearchSettings(), params={"batch": 1}, validate=False)
    assert result["total_value"] == undisturbed.total_value
    assert [lay["value"] for lay in result["layers"]] == [lay.value for lay in undisturbed.layers]
