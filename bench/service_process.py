"""What the service benchmarks share: a free loopback port, readiness, and stopping a process group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable

import httpx


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ready_workers(base: str) -> int:
    """Workers the service at `base` reports alive (0 while it is not ready or not answering)."""
    try:
        r = httpx.get(f"{base}/v1/ready", timeout=2)
    except httpx.HTTPError:
        return 0
    return int(r.json().get("workers", 0)) if r.status_code == 200 else 0


def wait_until(what: str, check: Callable[[], bool], timeout: float) -> None:
    """Poll `check` until it holds; TimeoutError naming `what` after `timeout` seconds."""
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.2)


def stop_group(proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM a process started with `start_new_session=True` and its children; SIGKILL what lingers."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
