"""Workers side by side on PostgreSQL (`python -m bench.scale_out`): ResNet-50 at batch 16 on two targets.

For 1 and then 3 worker processes (`mapper serve --workers N` on the loopback PostgreSQL, each run in
a fresh schema so nothing is cached), submits the two workload jobs at once, waits for both, and
prints the wall time of each run, their ratio, and how many layers each worker searched (from the
results' `layer_workers`). On this 2-core machine three workers can at best use both cores, so the
ratio says what fan-out gains here, not on a machine with a core per worker. Loopback only; every
process it starts is stopped before it returns.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import tempfile
import time
import uuid

import httpx

from bench.service_process import free_port, ready_workers, stop_group, wait_until

PG = "postgresql://postgres@127.0.0.1:5432/test"
TARGETS = ("wormhole-n150", "trn2")
BODY = {"workload": "resnet50", "params": {"batch": 16}, "validate": False}


def _run(workers: int) -> tuple[float, collections.Counter[str]]:
    import psycopg

    schema = f"tm_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TM_")} | {"TM_PORT": str(port)}
        cmd = [sys.executable, "-c", f"from app.cli import main; main(['serve', '--no-browser', '--storage', "
               f"{url!r}, '--workers', '{workers}'])"]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)  # fmt: skip
        try:
            wait_until(f"{workers} workers ready", lambda: ready_workers(base) == workers, 60)
            t0 = time.perf_counter()
            ids = [
                httpx.post(f"{base}/v1/tunings", json={**BODY, "target": t}, timeout=30).json()["id"] for t in TARGETS
            ]
            while any(httpx.get(f"{base}/v1/tunings/{i}", timeout=10).json()["state"] in ("queued", "running")
                      for i in ids):  # fmt: skip
                time.sleep(0.2)
            wall = time.perf_counter() - t0
            per_worker: collections.Counter[str] = collections.Counter()
            for i in ids:
                result = httpx.get(f"{base}/v1/tunings/{i}/result", timeout=30).json()
                per_worker.update(result.get("layer_workers", {}).values())
            return wall, per_worker
        finally:
            stop_group(proc, timeout=20)
            with psycopg.connect(PG, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def main() -> None:
    results = {n: _run(n) for n in (1, 3)}
    for n, (wall, per_worker) in results.items():
        print(f"{n} worker(s): {wall:.1f} s for ResNet-50 batch 16 on {', '.join(TARGETS)}; layers per worker: "
              f"{sorted(per_worker.values(), reverse=True)}")  # fmt: skip
    print(f"wall time, 1 worker / 3 workers: {results[1][0] / results[3][0]:.2f}x")


if __name__ == "__main__":
    main()
