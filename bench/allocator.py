"""The allocator setting on and off, side by side: search time and peak memory (`mapper.allocator`).

For each case (a preset, one of its two largest layers from `bench.search_strategies`, the objectives) a fresh
process per setting (``TM_KEEP_FREED_MEMORY=1`` and ``=0``; glibc reads nothing else) runs best-first once
untimed (the per-problem tables), then times ``auto`` `--runs` times and reports the best, and its peak resident
memory (``ru_maxrss``). The two settings run alternately per case, which comes first alternating too, so load
drifts reach both alike. It prints both settings' times and peaks and their ratios (on / off).
Run: ``python -m bench.allocator [--runs 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: (preset, layer index among its two largest, objectives)
CASES: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("ascend-a5", 0, ("latency",)),
    ("ascend-a5", 0, ("latency", "energy")),
    ("ascend-910b", 1, ("latency", "footprint")),
    ("rngd", 1, ("latency",)),
    ("rngd", 1, ("latency", "footprint")),
    ("trn1", 0, ("latency",)),
    ("trn1", 0, ("latency", "offchip_bytes")),
    ("wormhole-n150", 0, ("latency",)),
)

MEASURE = """
import json, resource, sys, time
from costmodels.registry import get_target
from bench.search_strategies import largest_layers
from mapper.search import tune
from mapper.settings import SearchSettings
preset, index, objectives, runs = sys.argv[1], int(sys.argv[2]), tuple(sys.argv[3].split(",")), int(sys.argv[4])
target = get_target(preset)
problem = largest_layers(target, 2)[index]
tune(problem, target, SearchSettings(strategy="bestfirst", max_seconds=600), validate=False)  # tables, untimed
best = None
for _ in range(runs):
    t0 = time.perf_counter()
    r = tune(problem, target, SearchSettings(objectives=objectives, max_seconds=60), validate=False)
    dt = time.perf_counter() - t0
    best = dt if best is None else min(best, dt)
from mapper.allocator import keep_freed_memory
print(json.dumps({"label": problem.label, "seconds": best, "proven": bool(r.proven_optimal),
                  "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "allocator": keep_freed_memory()}))
"""


def measure(preset: str, index: int, objectives: tuple[str, ...], runs: int, on: bool) -> dict[str, object]:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root), "TM_KEEP_FREED_MEMORY": "1" if on else "0"}
    args = [sys.executable, "-c", MEASURE, preset, str(index), ",".join(objectives), str(runs)]
    res = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, check=True, timeout=900)
    return json.loads(res.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="timed searches per process (the best is reported)")
    a = ap.parse_args(argv)
    t_start = time.perf_counter()
    print(f"{'preset':14s} {'layer':30s} {'objectives':26s} {'on ms':>8s} {'off ms':>8s} {'time':>6s}"
          f" {'on MiB':>7s} {'off MiB':>7s} {'peak':>6s}", flush=True)  # fmt: skip
    times, peaks = [], []
    for k, (preset, index, objectives) in enumerate(CASES):
        order = (True, False) if k % 2 == 0 else (False, True)
        got = {on: measure(preset, index, objectives, a.runs, on) for on in order}
        on, off = got[True], got[False]
        assert on["allocator"] in ("kept", "unavailable") and off["allocator"] == "off"
        t_on, t_off = float(str(on["seconds"])), float(str(off["seconds"]))
        m_on, m_off = float(str(on["peak_kib"])) / 1024, float(str(off["peak_kib"])) / 1024
        times.append(t_on / t_off)
        peaks.append(m_on / m_off)
        proven = "" if on["proven"] and off["proven"] else " (not proven)"
        print(
            f"{preset:14s} {str(on['label'])[:30]:30s} {'+'.join(objectives):26s} {t_on * 1e3:8.1f} {t_off * 1e3:8.1f}"
            f" x{t_on / t_off:5.2f} {m_on:7.0f} {m_off:7.0f} x{m_on / m_off:5.2f}{proven}",
            flush=True,
        )
    print(f"time on / off: median x{statistics.median(times):.2f}, range x{min(times):.2f}-x{max(times):.2f}")
    print(f"peak memory on / off: median x{statistics.median(peaks):.2f}, range x{min(peaks):.2f}-x{max(peaks):.2f}")
    print(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
