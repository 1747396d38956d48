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

A space above ``--max-points`` (default `WHOLE_LIMIT`, Trainium's every-tile spaces: 1e10 points and
more) is scored on its first ``--max-points`` points in the enumeration's order, and the row says so
("of" the space's size): whole, such a space would take hours.

Run: `python -m bench.scorer_speed [preset ...] [--max-points N]`
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from costmodels.protocol import SearchSpace, Target
from costmodels.registry import get_target, target_names
from mapper.enumerate import ChunkPlan
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

CHUNK = 1 << 16
#: most points scored per space (its first ones in C order above it): enough for a steady rate, a few seconds
WHOLE_LIMIT = 20_000_000


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


def enumerate_once(target: Target, problem: Problem, most: int | None = None) -> tuple[int, float]:
    """(points, seconds) of scoring the whole space through ChunkPlan code columns, space building included;
    with `most`, only the chunks that start within its first `most` points."""
    t0 = time.perf_counter()
    space = target.space(problem)
    plan = ChunkPlan(space, CHUNK)
    points = 0
    for b0, b1 in plan.bounds():
        if most is not None and points >= most:
            break
        codes = plan.codes(b0, b1)
        target.score_codes(problem, codes)
        points += len(next(iter(codes.values())))
    return points, time.perf_counter() - t0


def _value_chunks(space: SearchSpace, points: int) -> list[dict[str, np.ndarray]]:
    """The space's first `points` points (at least), chunk by chunk as `enumerate_once` scores them, as value
    columns (`SearchSpace.columns`' form)."""
    plan = ChunkPlan(space, CHUNK)
    choices = {p.name: np.asarray(p.choices, dtype=object if len({type(c) for c in p.choices}) > 1 else None)
               for p in space.params}  # fmt: skip
    parts, done = [], 0
    for b0, b1 in plan.bounds():
        if done >= points:
            break
        codes = plan.codes(b0, b1)
        parts.append({k: choices[k][v] for k, v in codes.items()})
        done += len(next(iter(codes.values())))
    return parts


def measure(preset: str, problem: Problem, repeats: int = 3, most: int = WHOLE_LIMIT) -> tuple[Rates, int] | None:
    """The three rates of one problem on one preset and its space's size, or None if the preset does not support
    it. A space above `most` points is scored on its first chunks up to `most` (the rates' points)."""
    target = get_target(preset)
    if target.supports(problem):
        return None
    size = target.space(problem).size
    limit = None if size <= most else most
    n, cold = enumerate_once(target, problem, limit)
    steady = min(enumerate_once(target, problem, limit)[1] for _ in range(repeats))
    parts = _value_chunks(target.space(problem), n)
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for part in parts:
            target.score_batch(problem, part)
        best = min(best, time.perf_counter() - t0)
    return Rates(points=n, cold=n / cold, steady=n / steady, values=n / best), size


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("presets", nargs="*", help="target presets (default: all)")
    ap.add_argument(
        "--max-points",
        type=int,
        default=WHOLE_LIMIT,
        help=f"a larger space is scored on its first this many points only (default {WHOLE_LIMIT:,})",
    )
    args = ap.parse_args(argv)
    presets = args.presets or target_names()
    for preset in presets:
        get_target(preset)  # an unknown name stops here with the list of presets, before any timing
    rows: list[Rates] = []
    print(f"{'preset':15} {'problem':20} {'points':>9} {'cold M/s':>9} {'steady M/s':>11} {'values M/s':>11}")
    for preset in presets:
        for name, problem in problems().items():
            got = measure(preset, problem, most=args.max_points)
            if got is None:
                print(f"{preset:15} {name:20} unsupported")
                continue
            r, size = got
            rows.append(r)
            rates = f"{r.cold / 1e6:9.2f} {r.steady / 1e6:11.2f} {r.values / 1e6:11.2f}"
            part = "" if r.points == size else f"  (the first {r.points:,} of {size:,} points)"
            print(f"{preset:15} {name:20} {r.points:9d} {rates}{part}")
    if rows:
        med = {k: float(np.median([getattr(r, k) for r in rows])) / 1e6 for k in ("cold", "steady", "values")}
        low = min(r.cold for r in rows) / 1e6
        print(
            f"median: cold {med['cold']:.2f}, steady {med['steady']:.2f}, values {med['values']:.2f} M points/s; "
            f"slowest cold {low:.2f} (goal >= 10 per core)"
        )


if __name__ == "__main__":
    main()
