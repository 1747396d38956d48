"""Cycles per target next to the roofline bound, for a few representative problems.

For each problem and preset, the whole mapping space is scored with the target's vectorised
`score_batch` (exhaustive: the printed mapping is the model's optimum; a space above the mapper's
enumeration limit, 2,000,000 points, takes best-first's proof over the whole space instead and
says so), and the best cycles are
printed beside the roofline lower bound and the gap between them. The rate printed is points per
second of that by-value scoring on a fresh target (value encoding and table builds included); the
mapper's own path, by choice codes, is timed by `bench.scorer_speed`.

Run: `python -m bench.costmodels_overview`
"""

from __future__ import annotations

import time

import numpy as np

from costmodels.choice_codes import SpaceCoder, row_point
from costmodels.protocol import Target
from costmodels.registry import get_target, target_names
from mapper.enumerate import ChunkPlan
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

CHUNK = 1 << 18


def problems() -> dict[str, Problem]:
    return {
        "gemm 4096^3 bf16": einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, weight=1),
        "gemm 1x4096x4096 bf16 (decode)": einsum("mk,kn->mn", {"m": 1, "k": 4096, "n": 4096}, weight=1),
        "bmm 32x(512x128x512) bf16": einsum("vmk,vnk->vmn", {"v": 32, "m": 512, "n": 512, "k": 128}, weight=1),
        "gemm 2048^3 i8": einsum("mk,kn->mn", {"m": 2048, "k": 2048, "n": 2048}, dtype="i8", weight=1),
        "conv 3x3 64->64 56x56 bf16": conv2d(
            batch=1, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1
        ),
        "conv 3x3/2 128->128 56x56 bf16": conv2d(
            batch=1, in_channels=128, out_channels=128, input_height=56, input_width=56, kernel=3, stride=2, padding=1
        ),
    }


def best_point(target: Target, problem: Problem) -> tuple[dict[str, object] | None, int | None, int, float, str]:
    """(best point, feasible count, points, seconds spent, how) over the whole space.

    Up to the mapper's enumeration limit (`SearchSettings.enumerate_limit`) every point is scored by
    value in chunks; above it the answer is best-first's proof over the space (feasible count unknown).
    """
    from mapper.search import tune_as_given
    from mapper.settings import SearchSettings

    space = target.space(problem)
    n = space.size
    t0 = time.perf_counter()
    if n > SearchSettings().enumerate_limit:
        r = tune_as_given(problem, target, SearchSettings(strategy="bestfirst", max_seconds=600.0), validate=False)
        how = "best-first proof" if r.proven_optimal else f"best-first, unproven ({r.stop_reason})"
        return r.point, None, n, time.perf_counter() - t0, how
    plan = ChunkPlan(space, CHUNK)
    decode = SpaceCoder(space).decode
    best, best_point_, feasible = np.inf, None, 0
    for b0, b1 in plan.bounds():
        part = decode(plan.codes(b0, b1))
        s = target.score_batch(problem, part)
        ok = np.asarray(s.feasible, bool)
        feasible += int(ok.sum())
        lat = np.where(ok, np.asarray(s.objectives["latency"], float), np.inf)
        i = int(np.argmin(lat))
        if lat[i] < best:
            best, best_point_ = float(lat[i]), row_point(part, i)
    spent = time.perf_counter() - t0
    return best_point_, feasible, n, spent, "every point"


def main() -> None:
    rows = []
    for pname, problem in problems().items():
        for preset in target_names():
            target = get_target(preset)
            if target.supports(problem):
                rows.append((pname, preset, "unsupported: " + target.supports(problem)[0].message[:70]))
                continue
            point, feasible, n, spent, how = best_point(target, problem)
            if point is None:
                rows.append((pname, preset, f"no feasible mapping among {n} points"))
                continue
            r = target.cost(problem, target.mapping(problem, point))
            rows.append(
                (
                    pname,
                    preset,
                    f"{r.cycles:14,.0f} cyc  bound {r.lower_bound_cycles:14,.0f}  gap {r.gap:7.1%}  {r.bound:<9} "
                    f"util {r.utilization:5.1%}  ("
                    + (
                        f"{feasible}/{n} feasible, {n / spent / 1e6:5.2f} M points/s by value, cold)"
                        if feasible is not None
                        else f"{how} over {n:,} points, {spent:.1f} s)"
                    ),
                )
            )
    width = max(len(r[0]) for r in rows)
    for pname, preset, text in rows:
        print(f"{pname:<{width}}  {preset:<15} {text}")


if __name__ == "__main__":
    main()
