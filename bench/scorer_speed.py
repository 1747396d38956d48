"""Vectorised scoring throughput of every target (issue goal: >= 10 million candidates/s per core).

For each preset and problem, the whole mapping space is built as columns and scored with
`score_batch` in chunks; the printed rate is points scored per second of wall time in this one
process (numpy's elementwise kernels use one core). Column construction is timed separately.

Run: `python -m bench.scorer_speed [preset ...]`
"""

from __future__ import annotations

import sys
import time

import numpy as np

from costmodels.registry import get_target, target_names
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

CHUNK = 1 << 18


def problems() -> dict[str, Problem]:
    return {
        "gemm 4096^3": einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, weight=1),
        "bmm 32x512x512x128": einsum("vmk,vnk->vmn", {"v": 32, "m": 512, "n": 512, "k": 128}, weight=1),
        "conv 3x3 64@56 b16": conv2d(
            batch=16, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1
        ),
    }


def rate(preset: str, problem: Problem) -> tuple[int, float, float] | None:
    """(points, seconds to build the columns, seconds to score them all) or None if unsupported."""
    target = get_target(preset)
    if target.supports(problem):
        return None
    space = target.space(problem)
    t0 = time.perf_counter()
    cols = space.columns()
    t1 = time.perf_counter()
    n = space.size
    for lo in range(0, n, CHUNK):
        target.score_batch(problem, {k: v[lo : lo + CHUNK] for k, v in cols.items()})
    t2 = time.perf_counter()
    return n, t1 - t0, t2 - t1


def main(argv: list[str] | None = None) -> None:
    presets = argv or target_names()
    rates = []
    print(f"{'preset':15} {'problem':20} {'points':>9} {'columns s':>10} {'score s':>8} {'M points/s':>11}")
    for preset in presets:
        for name, problem in problems().items():
            r = rate(preset, problem)
            if r is None:
                print(f"{preset:15} {name:20} unsupported")
                continue
            n, tc, ts = r
            rates.append(n / ts / 1e6)
            print(f"{preset:15} {name:20} {n:9d} {tc:10.3f} {ts:8.3f} {n / ts / 1e6:11.2f}")
    if rates:
        print(f"median rate: {float(np.median(rates)):.2f} M points/s (goal >= 10 per core)")


if __name__ == "__main__":
    main(sys.argv[1:])
