"""Structure size where a structure's cells decide what is scored: `DEFAULT_INNER` beside `CELLS_INNER` (issue #12).

Best-first with several objectives, or one objective other than latency, bounds a structure by its cells and
scores only the points of the cells the front leaves open (`mapper.bounds.FrontBounds`), so on a target that
places points in cells (`mapper.planning.cells_decide`) a structure is a unit of bookkeeping: a bound vector,
a cells test, a visit and a front merge each. This benchmark runs the same searches with structures of
`DEFAULT_INNER` points (the size before) and of `CELLS_INNER` (the default now), alternately in one process,
best of `--repeats` runs each, and prints both times, their ratio, and the one-objective latency search's time
(the issue's "two objectives no more than 3x the time of one" compares with it). Every search must end proven
with the same front (or best value) at both sizes: the benchmark stops with an error otherwise.
Run: ``python -m bench.cell_structures [--targets rngd] [--layers 6] [--repeats 3] [--sets latency+energy,energy]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.search_strategies import largest_layers
from costmodels.registry import get_target
from mapper.planning import CELLS_INNER, DEFAULT_INNER, cells_decide
from mapper.result import TuneResult
from mapper.search import tune
from mapper.settings import SearchSettings

#: the objective sets timed: latency with each other objective, each other objective alone, and two pairs without it
SETS = (
    "latency+offchip_bytes",
    "latency+energy",
    "latency+footprint",
    "offchip_bytes",
    "energy",
    "footprint",
    "energy+footprint",
    "offchip_bytes+footprint",
)


def answer(r: TuneResult, objectives: tuple[str, ...]) -> object:
    """What must not depend on the structure size: the front's values (several objectives) or the best value."""
    if len(objectives) > 1:
        return sorted(tuple(round(v, 12) for v in p.values.values()) for p in r.pareto)
    return round(r.values[objectives[0]], 12)


def timed(problem: object, target: object, objectives: tuple[str, ...], inner: int | None) -> tuple[float, TuneResult]:
    settings = SearchSettings(objectives=objectives, strategy="bestfirst", inner_points=inner, max_seconds=120)
    t0 = time.perf_counter()
    r = tune(problem, target, settings, validate=False)  # type: ignore[arg-type]
    return time.perf_counter() - t0, r


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="rngd", help="comma-separated presets (default: rngd)")
    ap.add_argument("--layers", type=int, default=6, help="each target's largest layers (default 6)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per size, alternating (default 3)")
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated objective sets, '+' within a set")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    ratios: list[float] = []
    print(f"structures of {DEFAULT_INNER:,} points (before) beside {CELLS_INNER:,} (now); best of {args.repeats}")
    for preset in args.targets.split(","):
        target = get_target(preset)
        for problem in largest_layers(target, args.layers):
            tune(problem, target, SearchSettings(strategy="bestfirst", max_seconds=600), validate=False)  # tables
            one = min(timed(problem, target, ("latency",), None)[0] for _ in range(args.repeats))
            print(f"{preset} {problem.label}: latency alone {one * 1e3:,.0f} ms")
            for name in args.sets.split(","):
                objs = tuple(name.split("+"))
                if not cells_decide(SearchSettings(objectives=objs), target):
                    print(f"  {name}: the structures' cells do not decide here (the size is not changed)")
                    continue
                times: dict[int, list[float]] = {DEFAULT_INNER: [], CELLS_INNER: []}
                answers = {}
                for _ in range(args.repeats):
                    for inner in times:
                        dt, r = timed(problem, target, objs, inner)
                        if not r.proven_optimal:
                            raise SystemExit(f"{preset} {problem.label} {name} at {inner}: not proven within 120 s")
                        times[inner].append(dt)
                        answers[inner] = answer(r, objs)
                if answers[DEFAULT_INNER] != answers[CELLS_INNER]:
                    raise SystemExit(f"{preset} {problem.label} {name}: the answers differ between the sizes")
                before, after = min(times[DEFAULT_INNER]), min(times[CELLS_INNER])
                ratios.append(after / before)
                vs_one = f", x{after / one:.2f} of latency alone" if "latency" in objs and len(objs) > 1 else ""
                print(
                    f"  {name}: {before * 1e3:,.0f} ms -> {after * 1e3:,.0f} ms (x{after / before:.2f}{vs_one}), "
                    f"proven, the same {'front' if len(objs) > 1 else 'best value'} at both sizes"
                )
    if ratios:
        print(
            f"after/before: median x{statistics.median(ratios):.2f}, best x{min(ratios):.2f}, worst x{max(ratios):.2f} "
            f"over {len(ratios)} searches ({time.perf_counter() - t_start:.0f} s in all)"
        )


if __name__ == "__main__":
    main()
