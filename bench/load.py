"""Load on the service (`python -m bench.load`): 200 concurrent tuning requests, then cached reads.

Starts `mapper serve` (API + 2 workers) on a fresh embedded database and a free loopback port,
then:

1. submits 200 tuning requests at once from 32 concurrent connections: half of them repeat the
   other half (duplicates), the rest are distinct held-out problems (awkward sizes); checks every
   request is accepted (202, or 200 for a duplicate), that each distinct problem got exactly one
   job and was searched exactly once (one claim), and that every job completes;
2. reads the finished results (`GET /v1/tunings/{id}/result`) for a fixed time from 32 concurrent
   connections and prints requests per second and p50/p99 latency. Goal: p99 < 20 ms and
   >= 500 requests/s on this 2-core machine. A Python client on the same 2 cores is itself the
   bottleneck, so where `wrk` is installed (Debian's package) the reads are also timed with it at
   4, 8, 16 and 32 connections, side by side.

Loopback only, bounded in count and time; every process it starts is stopped before it returns.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx
import numpy as np

from bench.service_process import free_port, ready_workers, stop_group, wait_until

REQUESTS = 200
CONCURRENCY = 32
READ_SECONDS = 10.0
COMPLETE_SECONDS = 300.0
TARGETS = ("trn2", "rngd", "ascend-910b", "wormhole-n150")


def held_out(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """`n` distinct small problems with awkward sizes (primes, odd, 1), on the four families."""
    rng = random.Random(seed)
    sizes = [1, 3, 7, 31, 61, 97, 127, 131, 251, 257, 509, 1000, 1021]
    out, seen = [], set()
    while len(out) < n:
        m, k, nn = rng.choice(sizes), rng.choice(sizes), rng.choice(sizes)
        target = TARGETS[len(out) % len(TARGETS)]
        if (m, k, nn, target) in seen:
            continue
        seen.add((m, k, nn, target))
        problem = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": m, "k": k, "n": nn}}
        out.append({"problem": problem, "target": target, "validate": True})
    return out


def _start(tmp: str, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TM_")} | {
        "TM_PORT": str(port),
        "TM_DATA_DIR": os.path.join(tmp, "data"),
        "TM_WORKERS": "2",
        "TM_MAX_ACTIVE_PER_CLIENT": "1000",
    }
    cmd = [sys.executable, "-c", "from app.cli import main; main(['serve', '--no-browser'])"]
    log = open(os.path.join(tmp, "serve.log"), "wb")  # noqa: SIM115
    return subprocess.Popen(cmd, env=env, cwd=tmp, stdout=log, stderr=log,
                            start_new_session=True)  # fmt: skip


async def _submit_all(base: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    sem = asyncio.Semaphore(CONCURRENCY)
    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as c:

        async def one(body: dict[str, Any]) -> httpx.Response:
            async with sem:
                return await c.post("/v1/tunings", json=body)

        return list(await asyncio.gather(*(one(b) for b in bodies)))


async def _read_load(base: str, paths: list[str]) -> tuple[list[float], int]:
    limits = httpx.Limits(max_connections=CONCURRENCY)
    lat: list[float] = []
    errors = 0
    end = time.perf_counter() + READ_SECONDS
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as c:

        async def loop(i: int) -> None:
            nonlocal errors
            n = i
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                r = await c.get(paths[n % len(paths)])
                lat.append(time.perf_counter() - t0)
                errors += r.status_code != 200
                n += CONCURRENCY

        await asyncio.gather(*(loop(i) for i in range(CONCURRENCY)))
    return lat, errors


def _wrk(url: str, connections: int) -> str:
    """Requests/s and p50/p99 of `wrk` reading one URL for a few seconds."""
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", "-d5s", "--latency", url], capture_output=True, text=True, timeout=60
    ).stdout
    rate = next((ln.split()[-1] for ln in out.splitlines() if ln.startswith("Requests/sec")), "?")
    pct = {ln.split()[0]: ln.split()[1] for ln in out.splitlines() if ln.strip().startswith(("50%", "99%"))}
    return f"{rate} req/s, p50 {pct.get('50%', '?')}, p99 {pct.get('99%', '?')}"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tm-load-") as tmp:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        proc = _start(tmp, port)
        try:
            wait_until("the service ready", lambda: ready_workers(base) >= 1, 60)
            distinct = held_out(REQUESTS // 2)
            bodies = distinct + [dict(b) for b in distinct]  # the second half repeats the first
            random.Random(1).shuffle(bodies)
            t0 = time.perf_counter()
            responses = asyncio.run(_submit_all(base, bodies))
            submit_s = time.perf_counter() - t0
            codes = sorted({r.status_code for r in responses})
            ids = {r.json()["id"] for r in responses if r.status_code in (200, 202)}
            accepted = sum(r.status_code in (200, 202) for r in responses)
            print(
                f"submitted {len(bodies)} requests ({len(distinct)} distinct) in {submit_s:.2f} s from "
                f"{CONCURRENCY} connections: {accepted} accepted, status codes {codes}, {len(ids)} jobs"
            )
            t0 = time.perf_counter()
            jobs: list[dict[str, Any]] = []
            while time.perf_counter() - t0 < COMPLETE_SECONDS:
                jobs = [httpx.get(f"{base}/v1/tunings/{i}", timeout=30).json() for i in ids]
                if all(j["state"] in ("succeeded", "failed", "cancelled") for j in jobs):
                    break
                time.sleep(1)
            states: dict[str, int] = {}
            for j in jobs:
                states[j["state"]] = states.get(j["state"], 0) + 1
            claims = sum(j["attempts"] for j in jobs)
            once = "exactly once" if claims == len(jobs) == len(distinct) else "NOT exactly once"
            print(
                f"all finished in {time.perf_counter() - t0:.1f} s: {states}; {claims} claims for {len(jobs)} "
                f"jobs: each distinct problem searched {once}"
            )
            paths = [f"/v1/tunings/{i}/result" for i in ids]
            lat, errors = asyncio.run(_read_load(base, paths))
            ms = np.array(lat) * 1e3
            rate = len(lat) / READ_SECONDS
            p50, p99 = np.percentile(ms, 50), np.percentile(ms, 99)
            goals = (
                f"p99 < 20 ms {'met' if p99 < 20 else 'NOT met'}, >= 500 req/s {'met' if rate >= 500 else 'NOT met'}"
            )
            print(
                f"cached result reads for {READ_SECONDS:.0f} s from {CONCURRENCY} connections: {len(lat)} requests, "
                f"{rate:.0f} req/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms, non-200: {errors} (goals: {goals})"
            )
            if shutil.which("wrk"):
                for conns in (4, 8, 16, 32):
                    print(f"wrk, {conns} connections: {_wrk(base + paths[0], conns)}")
        finally:
            stop_group(proc)
            if os.environ.get("TM_BENCH_LOG"):
                with open(os.path.join(tmp, "serve.log")) as f:
                    print(f.read()[-6000:])


if __name__ == "__main__":
    main()
