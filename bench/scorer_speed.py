"""Vectorised scoring throughput of every target (issue goal: >= 10 million candidates/s per core).

For each preset and problem, the whole mapping space is scored the way the mapper enumerates it:
`ChunkPlan` code columns (choice indices) in 64K-point chunks through `Target.score_codes`. Three
rates, points per second of wall time in this one process (numpy's elementwise kernels use one
core), side by side:

- cold: a fresh target scores the space once, per-problem preparation (space, tables, priced
  grids) and chunk building included: what one exhaustive enumeration costs;
- steady: the same again (what every later trial and chunk of a search costs);
- values: `score_batch` on value columns (`SearchSpace.columns()`), the public form a user sends:
  the price of encoding values to codes, for comparison.

Run: `python -m bench.scorer_speed [preset ...]`
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np

from costmodels.protocol import Target
from costmodels.registry import get_target, target_names
from mapper.enumerate import ChunkPlan
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

CHUNK = 1 << 16


def problems() -> dict[str, Problem]:
    return {
        "gemm 4096^3": einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, weight=1),
        "bmm 32x512x512x128": einsum("vmk,vnk->vmn", {"v": 32, "m": 512, "n": 512, "k": 128}, weight=1),
        "conv 3x3 64@56 b16": conv2d(
            batch=16, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1
        ),
    }


@dataclass
class Rates:
    points: int
    cold: float  # points/s
    steady: float
    values: float


def enumerate_once(target: Target, problem: Problem) -> tuple[int, float]:
    """(points, seconds) of scoring the whole space through ChunkPlan code columns, space building included."""
    t0 = time.perf_counter()
    space = target.space(problem)
    plan = ChunkPlan(space, CHUNK)
    for b0, b1 in plan.bounds():
        target.score_codes(problem, plan.codes(b0, b1))
    return space.size, time.perf_counter() - t0


def measure(preset: str, problem: Problem, repeats: int = 3) -> Rates | None:
    """The three rates of one problem on one preset, or None if the preset does not support it."""
    target = get_target(preset)
    if target.supports(problem):
        return None
    n, cold = enumerate_once(target, problem)
    steady = min(enumerate_once(target, problem)[1] for _ in range(repeats))
    space = target.space(problem)
    cols = space.columns()
    parts = [{k: v[lo : lo + CHUNK] for k, v in cols.items()} for lo in range(0, n, CHUNK)]
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for part in parts:
            target.score_batch(problem, part)
        best = min(best, time.perf_counter() - t0)
    return Rates(points=n, cold=n / cold, steady=n / steady, values=n / best)


def main(argv: list[str] | None = None) -> None:
    presets = argv or target_names()
    rows: list[Rates] = []
    print(f"{'preset':15} {'problem':20} {'points':>9} {'cold M/s':>9} {'steady M/s':>11} {'values M/s':>11}")
    for preset in presets:
        for name, problem in problems().items():
            r = measure(preset, problem)
            if r is None:
                print(f"{preset:15} {name:20} unsupported")
                continue
            rows.append(r)
            rates = f"{r.cold / 1e6:9.2f} {r.steady / 1e6:11.2f} {r.values / 1e6:11.2f}"
            print(f"{preset:15} {name:20} {r.points:9d} {rates}")
    if rows:
        med = {k: float(np.median([getattr(r, k) for r in rows])) / 1e6 for k in ("cold", "steady", "values")}
        low = min(r.cold for r in rows) / 1e6
        print(
            f"median: cold {med['cold']:.2f}, steady {med['steady']:.2f}, values {med['values']:.2f} M points/s; "
            f"slowest cold {low:.2f} (goal >= 10 per core)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
