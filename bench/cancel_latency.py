"""How long a cancelled layer search takes to return (`python -m bench.cancel_latency`).

A service job is cancelled by a flag its search reads through `mapper.watch.Watch.cancelled`. This
times `mapper.tune` on each distinct ResNet-50 layer (batch 16, the service test's workload) on a
target made fresh for the layer (``get_target`` builds a new one, so the per-problem preparation,
the space's tables, the bounds and the warm starts, is part of the search, as in a worker's first
job of that layer), with a watch that says "cancelled" from `delay` seconds after the call on.
The latency is the call's return time minus the cancel's time: the time a cancel waits for the
step it lands in. Delays 0 (cancelled before the search starts: the whole preparation is waited
for unless the mapper checks it) and ``--delays`` (default 0.05, 0.2, 0.5 s: during the
preparation). Prints each layer's latencies, then the median and worst over all layers and delays.
Run: ``python -m bench.cancel_latency [--target rngd] [--layers 23] [--delays 0.05,0.2,0.5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from costmodels.registry import get_target
from mapper.keys import problem_hash
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.watch import Watch
from workload.named import load


def cancel_latency(preset: str, problem: object, delay: float) -> tuple[float, str]:
    """Seconds from the cancel to the return of a search cancelled `delay` s after it starts, and its stop reason."""
    target = get_target(preset)  # fresh: no per-problem preparation kept from an earlier run
    start = time.perf_counter()
    watch = Watch(cancel=lambda: time.perf_counter() - start >= delay)
    r = tune(problem, target, SearchSettings(max_seconds=600), validate=False, progress=watch)  # type: ignore[arg-type]
    return time.perf_counter() - start - delay, r.stop_reason


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="rngd")
    ap.add_argument("--layers", type=int, default=23, help="distinct ResNet-50 layers (batch 16) timed")
    ap.add_argument("--delays", default="0.05,0.2,0.5", help="seconds after the start the cancel comes, besides 0")
    a = ap.parse_args(argv)
    delays = (0.0, *(float(d) for d in a.delays.split(",") if d))
    seen: dict[str, object] = {}
    for p in load("resnet50", batch=16):
        seen.setdefault(problem_hash(p), p)
    problems = list(seen.values())[: a.layers]
    t_start = time.perf_counter()
    every: list[float] = []
    at = ", ".join(f"{d:g}" for d in delays)
    print(f"cancel latency (s) on {a.target}, fresh target per search; cancel at {at} s after the start")
    for p in problems:
        cells = []
        for d in delays:
            lat, reason = cancel_latency(a.target, p, d)
            every.append(lat)
            cells.append(f"{lat:6.3f}{'' if reason == 'cancelled' else '*'}")
        print(f"{(getattr(p, 'label', '') or '')[:32]:32s} " + " ".join(cells), flush=True)
    print("(* the search ended before the cancel came: not a cancel)")
    print(f"median {statistics.median(every):.3f} s, worst {max(every):.3f} s over {len(every)} cancels; "
          f"total {time.perf_counter() - t_start:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
