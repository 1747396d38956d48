"""Ascend structure bounds: what bounding and then scoring a structure costs, priced twice against once.

A best-first search bounds a structure (the core grid and double buffering fixed) with its exact
optimum (costmodels/ascend/bounds.py), then scores the same structure's sub-space when it visits
it. Before, both priced the box of codes from scratch; now the bound keeps the priced box
(`scoring.PricedBoxes`) and the scoring reads it. Per problem and preset this prints, for the first
`--structures` structures of the space (most cores first): the bound's time per structure, and the
scoring's time per structure with the box priced again (before) and read from the kept box (after),
side by side in one run, each structure on a fresh target (no tables or boxes kept between runs).

Then, per preset and per benchmark layer whose space is above the enumeration limit (so `auto` runs
best-first), the best-first search twice on fresh targets, side by side in one run: every structure
bounded exactly first (before), and the floors of every structure in one numpy pass with an exact
bound only for the structures whose floor comes first (after, ascend/floors.py and
`mapper.strategies.bestfirst.Floored`): seconds, exact bounds computed, and whether the answer, the
trace and the certificate are the same (they must be).

Run: ``python -m bench.ascend_bounds [--structures 6] [--searches-only | --boxes-only]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from costmodels.ascend.target import AscendTarget
from costmodels.registry import get_target
from mapper.settings import SearchSettings
from mapper.strategies.bestfirst import BestFirst
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

PROBLEMS: dict[str, Problem] = {
    "GEMM 4096^3 bf16": einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, dtype="bf16", weight=1),
    "ResNet-50 3x3 conv 64@56": conv2d(
        batch=1, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1, dtype="bf16"
    ),
    "ResNet-50 1x1 conv 2048->512@7": conv2d(
        batch=1, in_channels=2048, out_channels=512, input_height=7, input_width=7, kernel=1
    ),
}


def structure_codes(target: AscendTarget, problem: Problem, grid: str, db: bool) -> dict[str, np.ndarray]:
    """Codes of every point of one structure (grid and double buffering fixed), in the space's C order."""
    space = target.space(problem)
    inner = [p for p in space.params if p.name not in ("core_grid", "double_buffer")]
    shape = tuple(len(p.choices) for p in inner)
    flat = np.unravel_index(np.arange(int(np.prod(shape))), shape)
    n = flat[0].size
    codes = {p.name: c.astype(np.intp) for p, c in zip(inner, flat, strict=True)}
    codes["double_buffer"] = np.full(n, space.params[6].choices.index(db), dtype=np.intp)
    codes["core_grid"] = np.full(n, space.params[7].choices.index(grid), dtype=np.intp)
    return codes


def one(preset: str, problem: Problem, grid: str, db: bool) -> tuple[float, float, float, bool]:
    """(bound s, score s with the box priced again, score s reading the kept box, same scores)."""
    fresh: AscendTarget = get_target(preset)  # type: ignore[assignment]
    codes = structure_codes(fresh, problem, grid, db)
    fresh.prepared(problem).tables  # noqa: B018  (built outside the timings, once per problem in a search)
    fresh.structure_bound(problem, {"core_grid": grid, "double_buffer": db})
    prep = fresh.prepared(problem)
    kept_last, kept_lowest = prep.boxes.last, dict(prep.boxes.lowest)
    prep.boxes.last, prep.boxes.lowest = None, {}  # before: nothing kept, the scoring prices the box again
    t0 = time.perf_counter()
    again = fresh.score_codes(problem, codes)
    before = time.perf_counter() - t0
    prep.boxes.last, prep.boxes.lowest = kept_last, kept_lowest
    t0 = time.perf_counter()
    read = fresh.score_codes(problem, codes)
    after = time.perf_counter() - t0
    same = all(np.array_equal(again.objectives[o], read.objectives[o]) for o in again.objectives)
    same = same and np.array_equal(again.feasible, read.feasible)
    timer: AscendTarget = get_target(preset)  # type: ignore[assignment]
    timer.prepared(problem).tables  # noqa: B018
    t0 = time.perf_counter()
    timer.structure_bound(problem, {"core_grid": grid, "double_buffer": db})
    bound = time.perf_counter() - t0
    return bound, before, after, same


def search(preset: str, problem: Problem, floors: bool) -> tuple[float, Any, int]:
    """(seconds, result, exact bounds computed) of best-first on a fresh target, the default settings."""
    target: AscendTarget = get_target(preset)  # type: ignore[assignment]
    calls = 0
    exact = target.structure_bound

    def counted(p: Problem, fixed: dict[str, Any]) -> float:
        nonlocal calls
        calls += 1
        return exact(p, fixed)

    target.structure_bound = counted  # type: ignore[method-assign]
    s = SearchSettings()
    t0 = time.perf_counter()
    r = BestFirst(floors=floors).run(problem, target, target.space(problem), s, deadline=t0 + s.max_seconds)
    return time.perf_counter() - t0, r, calls


def searches() -> None:
    """Best-first with exact bounds of every structure (before) and with floors first (after), per large layer."""
    from bench.mapper_quality import WORKLOADS, distinct_layers

    limit = SearchSettings().enumerate_limit
    print(f"\n{'preset':12s} {'layer':34s} {'points':>10s} {'structs':>7s} | {'best-first s before':>19s} "
          f"{'after':>6s} {'ratio':>6s} | {'exact bounds before':>19s} {'after':>5s} | same | stop")  # fmt: skip
    for preset in ("ascend-910b", "ascend-a5"):
        sizer = get_target(preset)
        layers = [p for _, p, _ in distinct_layers(WORKLOADS, False) if sizer.space(p).size > limit]
        before: list[float] = []
        after: list[float] = []
        for p in layers:
            t0, r0, n0 = search(preset, p, floors=False)
            t1, r1, n1 = search(preset, p, floors=True)
            before.append(t0)
            after.append(t1)
            c0, c1 = r0.certificate, r1.certificate
            same = r0.point == r1.point and r0.values == r1.values and r0.trace == r1.trace and c0 == c1
            print(f"{preset:12s} {p.label[:34]:34s} {sizer.space(p).size:10,d} {c1.structures_total:7d} | "
                  f"{t0:19.3f} {t1:6.3f} {t0 / t1:5.1f}x | {n0:19d} {n1:5d} | {same!s:4s} | {r1.stop_reason}",
                  flush=True)  # fmt: skip
        med0, med1 = statistics.median(before), statistics.median(after)
        print(f"{preset:12s} {len(layers)} layers above {limit:,} points: best-first median {med0:.3f} -> "
              f"{med1:.3f} s, max {max(before):.3f} -> {max(after):.3f} s")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--structures", type=int, default=6)
    ap.add_argument("--searches-only", action="store_true", help="only best-first before/after per large layer")
    ap.add_argument("--boxes-only", action="store_true", help="only the kept boxes' table")
    a = ap.parse_args(argv)
    if not a.boxes_only:
        searches()
    if a.searches_only:
        return
    print(f"\n{'preset':12s} {'problem':32s} {'structs':>7s} {'points/struct':>13s} | {'bound ms':>8s} | "
          f"{'score ms before':>15s} {'after':>7s} | {'bound+score before':>18s} {'after':>7s} | same")  # fmt: skip
    for preset in ("ascend-910b", "ascend-a5"):
        for name, problem in PROBLEMS.items():
            space = get_target(preset).space(problem)
            grids = space.params[7].choices[: a.structures]
            rows = [one(preset, problem, str(g), True) for g in grids]
            b, s0, s1 = (statistics.median(r[i] for r in rows) * 1e3 for i in range(3))
            inner = space.size // (len(space.params[7].choices) * len(space.params[6].choices))
            print(f"{preset:12s} {name:32s} {len(space.params[7].choices) * 2:7d} {inner:13,d} | {b:8.2f} | "
                  f"{s0:15.2f} {s1:7.2f} | {b + s0:18.2f} {b + s1:7.2f} | {all(r[3] for r in rows)}")  # fmt: skip
    print("(medians over the structures; before: the scoring prices the box again, after: it reads the bound's)")


if __name__ == "__main__":
    main()
