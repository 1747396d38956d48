"""A private, throwaway PostgreSQL cluster for tests that stop and start the server.

The machine's shared PostgreSQL must never be restarted by a test (other tests and people use it),
so a fault test that needs an outage gets a cluster of its own: `initdb` into a temporary
directory, a free port on 127.0.0.1, its unix socket in that directory, trust authentication.
PostgreSQL refuses to run as root, so under uid 0 the binaries run as the ``postgres`` user
through ``runuser``. The binaries are found at run time (``pg_config --bindir``, then
``/usr/lib/postgresql/*/bin``); where there are none, `find_bindir` says why, for a skip.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def find_bindir() -> tuple[Path | None, str]:
    """The directory holding initdb and pg_ctl, or None and the reason there is none."""
    candidates: list[str] = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0:
            candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for c in candidates:
        d = Path(c)
        if (d / "initdb").is_file() and (d / "pg_ctl").is_file() and (d / "postgres").is_file():
            return d, ""
    return None, "no PostgreSQL server binaries (initdb, pg_ctl, postgres) in pg_config --bindir or /usr/lib/postgresql"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateCluster:
    """One throwaway cluster: `start`, `stop` (fast shutdown, as an operator's restart does), `remove`."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="tm-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb and postgres refuse root: run them as the postgres user
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root and there is no 'postgres' user to run the server as") from None
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the cluster's `postgres` database (psycopg 3), short connect timeout."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres?connect_timeout=2"

    def _run(self, *args: str, timeout: float = 60) -> None:
        cmd = [*self._as, *args]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({out.returncode}): {out.stderr.strip()[-500:]}")

    def init(self) -> None:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.root / "server.log")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", log, "-w", "-t", "30", "start")
        self._wait(up=True)

    def stop(self) -> None:
        """Fast shutdown: open sessions are disconnected, as when an operator restarts the server."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")
        self._wait(up=False)

    def _wait(self, *, up: bool, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    if up:
                        return
            except OSError:
                if not up:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"the private PostgreSQL did not {'start' if up else 'stop'} within {timeout} s")

    def remove(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.root, ignore_errors=True)
