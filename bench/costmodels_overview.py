"""Cycles per target next to the roofline bound, for a few representative problems.

For each problem and preset, the whole mapping space is scored with the target's vectorised
`score_batch` (exhaustive: the printed mapping is the model's optimum), and the best cycles are
printed beside the roofline lower bound and the gap between them. The rate printed is points per
second of that by-value scoring on a fresh target (value encoding and table builds included); the
mapper's own path, by choice codes, is timed by `bench.scorer_speed`.

Run: `python -m bench.costmodels_overview`
"""

from __future__ import annotations

import time

import numpy as np

from costmodels.choice_codes import row_point
from costmodels.protocol import Target
from costmodels.registry import get_target, target_names
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


def best_point(target: Target, problem: Problem) -> tuple[dict[str, object] | None, int, int, float]:
    """(best point, feasible count, points, seconds spent) over the whole space, scored in chunks."""
    space = target.space(problem)
    cols = space.columns()
    n = space.size
    best, best_i, feasible = np.inf, -1, 0
    t0 = time.perf_counter()
    for lo in range(0, n, CHUNK):
        part = {k: v[lo : lo + CHUNK] for k, v in cols.items()}
        s = target.score_batch(problem, part)
        ok = np.asarray(s.feasible, bool)
        feasible += int(ok.sum())
        lat = np.where(ok, np.asarray(s.objectives["latency"], float), np.inf)
        i = int(np.argmin(lat))
        if lat[i] < best:
            best, best_i = float(lat[i]), lo + i
    spent = time.perf_counter() - t0
    point = None if best_i < 0 else row_point(cols, best_i)
    return point, feasible, n, spent


def main() -> None:
    rows = []
    for pname, problem in problems().items():
        for preset in target_names():
            target = get_target(preset)
            if target.supports(problem):
                rows.append((pname, preset, "unsupported: " + target.supports(problem)[0].message[:70]))
                continue
            point, feasible, n, spent = best_point(target, problem)
            if point is None:
                rows.append((pname, preset, f"no feasible mapping among {n} points"))
                continue
            r = target.cost(problem, target.mapping(problem, point))
            rows.append(
                (
                    pname,
                    preset,
                    f"{r.cycles:14,.0f} cyc  bound {r.lower_bound_cycles:14,.0f}  gap {r.gap:7.1%}  {r.bound:<9} "
                    f"util {r.utilization:5.1%}  ({feasible}/{n} feasible, "
                    f"{n / spent / 1e6:5.2f} M points/s by value, cold)",
                )
            )
    width = max(len(r[0]) for r in rows)
    for pname, preset, text in rows:
        print(f"{pname:<{width}}  {preset:<15} {text}")


if __name__ == "__main__":
    main()
