"""Cached result reads through four API set-ups, side by side in one run (`python -m bench.read_path`).

`mapper serve` (API + one worker) on a fresh embedded database runs one small tuning; then four
API-only processes on the same database serve its result, each on its own loopback port:

- ``before``: uvicorn's pure-Python HTTP parser and asyncio loop (``http="h11", loop="asyncio"``),
  every read routed through FastAPI (``fast_reads`` off), uvicorn's access log on: the read path
  as it was before this benchmark was written (its dependencies already ``async def``);
- ``+httptools/uvloop``: the same with uvicorn's C parser and libuv loop (what uvicorn picks once
  they are installed, as they now are);
- ``+fast reads``: finished results answered from memory before routing (`app.api.fast_reads`);
- ``+no access log``: the same without uvicorn's access log (``TM_ACCESS_LOG=false``).

Each is read with `wrk` (Debian's package; the script says so and stops where it is missing)
for 5 s per row, the set-ups alternating for `ROUNDS` rounds at each connection count. Prints each
row, the medians and the ratios to ``before``. Loopback only; stops every process it starts.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import httpx

from bench.service_process import free_port, ready_workers, stop_group, wait_until

ROUNDS = 3
CONNECTIONS = (4, 16)
SECONDS = 5
BODY = {
    "problem": {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 256, "k": 256, "n": 256}, "dtype": "bf16"},
    "target": "trn2",
}


#: name -> (uvicorn http, uvicorn loop, fast reads, access log)
SETUPS = {
    "before": ("h11", "asyncio", False, True),
    "+httptools/uvloop": ("httptools", "uvloop", False, True),
    "+fast reads": ("httptools", "uvloop", True, True),
    "+no access log": ("httptools", "uvloop", True, False),
}
API = """import sys, uvicorn
from app.main import create_app
from app.settings import Settings
http, loop, fast, log = sys.argv[1:5]
uvicorn.run(create_app(Settings(workers=0, fast_reads=fast == "1")), host="127.0.0.1", port=int(sys.argv[5]),
            http=http, loop=loop, log_level="info", access_log=log == "1")
"""


def _env(tmp: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TM_")} | {"TM_DATA_DIR": os.path.join(tmp, "data")}


def _serve(tmp: str, port: int) -> subprocess.Popen[bytes]:
    env = _env(tmp) | {"TM_PORT": str(port), "TM_WORKERS": "1"}
    cmd = [sys.executable, "-c", "from app.cli import main; main(['serve', '--no-browser'])"]
    log = open(os.path.join(tmp, "serve.log"), "wb")  # noqa: SIM115
    return subprocess.Popen(cmd, env=env, cwd=tmp, stdout=log, stderr=log, start_new_session=True)


def _api(tmp: str, port: int, http: str, loop: str, fast: bool, access_log: bool) -> subprocess.Popen[bytes]:
    args = [http, loop, "1" if fast else "0", "1" if access_log else "0", str(port)]
    log = open(os.path.join(tmp, f"api-{port}.log"), "wb")  # noqa: SIM115
    return subprocess.Popen([sys.executable, "-c", API, *args], env=_env(tmp), cwd=tmp, stdout=log, stderr=log,
                            start_new_session=True)  # fmt: skip


def _ms(text: str) -> float:
    m = re.match(r"([\d.]+)(us|ms|s)", text)
    if not m:
        return float("nan")
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]


def wrk(url: str, connections: int, header: str | None = None) -> tuple[float, float, float, int]:
    """(requests/s, p50 ms, p99 ms, non-2xx/3xx responses) of `wrk` reading `url`."""
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{SECONDS}s", "--latency", url]
    if header:
        cmd[1:1] = ["-H", header]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=SECONDS + 60).stdout
    rate = next((float(ln.split()[-1]) for ln in out.splitlines() if ln.startswith("Requests/sec")), float("nan"))
    pct = {ln.split()[0]: _ms(ln.split()[1]) for ln in out.splitlines() if ln.strip().startswith(("50%", "99%"))}
    bad = next((int(ln.split()[-1]) for ln in out.splitlines() if "Non-2xx or 3xx" in ln), 0)
    return rate, pct.get("50%", float("nan")), pct.get("99%", float("nan")), bad


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def main() -> None:
    if not shutil.which("wrk"):
        print("wrk is not installed (apt-get install wrk): nothing measured")
        return
    with tempfile.TemporaryDirectory(prefix="tm-reads-") as tmp:
        port = free_port()
        procs = [_serve(tmp, port)]
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until("the service ready", lambda: ready_workers(base) >= 1, 60)
            job = httpx.post(f"{base}/v1/tunings", json=BODY, timeout=30).json()
            wait_until(
                "the tuning finished",
                lambda: httpx.get(f"{base}/v1/tunings/{job['id']}", timeout=10).json()["state"] == "succeeded",
                120,
            )
            path = f"/v1/tunings/{job['id']}/result"
            urls: dict[str, str] = {}
            for name, (http, loop, fast, access_log) in SETUPS.items():
                p = free_port()
                procs.append(_api(tmp, p, http, loop, fast, access_log))
                urls[name] = f"http://127.0.0.1:{p}{path}"
            for name, url in urls.items():
                wait_until(f"the {name} API up", lambda url=url: _answers(url), 60)  # type: ignore[misc]
            size = len(httpx.get(urls["before"], timeout=10).content)
            print(f"result of {size:,} bytes, read with wrk -t2, {SECONDS} s per row, {ROUNDS} rounds alternating")
            print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores; other work shares them)")
            rows: dict[tuple[str, int], list[tuple[float, float, float, int]]] = {}
            for _ in range(ROUNDS):
                for conns in CONNECTIONS:
                    for name, url in urls.items():
                        got = wrk(url, conns)
                        rows.setdefault((name, conns), []).append(got)
                        print(f"  {name:18s} {conns:3d} conns: {got[0]:8.0f} req/s  p50 {got[1]:6.2f} ms  "
                              f"p99 {got[2]:7.2f} ms  errors {got[3]}", flush=True)  # fmt: skip
            print("medians over the rounds (ratios to before):")
            for conns in CONNECTIONS:
                med = {n: tuple(statistics.median(r[i] for r in rows[(n, conns)]) for i in range(3)) for n in urls}
                b = med["before"]
                for name, (rate, p50, p99) in med.items():
                    print(f"  {conns:3d} conns {name:18s} {rate:8.0f} req/s ({rate / b[0]:.2f}x)  p50 {p50:6.2f} ms  "
                          f"p99 {p99:7.2f} ms ({p99 / b[2]:.2f}x)")  # fmt: skip
            print(f"load average after: {os.getloadavg()[0]:.1f}")
        finally:
            for proc in reversed(procs):
                stop_group(proc)


if __name__ == "__main__":
    main()
