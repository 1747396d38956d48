"""Benchmark of the mapper (issue 6, "Measure it"): quality, speed and sample efficiency per target.

For every target and every layer of ResNet-50 (convs), BERT-base (GEMMs) and a Llama-7B layer:
the default search's latency, the exhaustive optimum (cached in ``bench/optima.json``, computed
once by vectorised enumeration), the gap, the time and trials per second; and, on the same layer
and budget, plain random search (one point per trial) and TPE without warm start, so the number
of trials each needs to come within 1% of the optimum is compared side by side. It also measures
the vectorised scorer's throughput (candidate mappings per second on one core).

Run: ``python -m bench.mapper_quality [--targets trn2,rngd] [--workloads resnet50] [--refresh-optima]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from costmodels.protocol import Target
from mapper.enumerate import chunk_columns, enumerate_space
from mapper.keys import cost_model_version, problem_hash
from mapper.result import TuneResult
from mapper.search import tune
from mapper.settings import SearchSettings
from workload.problem import Problem

OPTIMA = Path(__file__).with_name("optima.json")
WORKLOADS = ("resnet50", "bert-base", "llama7b-prefill")
MAX_ENUMERATE = 200_000_000  # points; larger spaces get no exhaustive optimum


def load_optima() -> dict[str, Any]:
    return json.loads(OPTIMA.read_text()) if OPTIMA.exists() else {}


def optimum(target: Target, problem: Problem, cache: dict[str, Any], refresh: bool) -> float | None:
    """The exhaustive latency optimum of a layer (cached by target, problem hash and model version)."""
    key = f"{target.name}|{problem_hash(problem)}"
    version = cost_model_version(target)
    hit = cache.get(key)
    if hit and hit["version"] == version and not refresh:
        return hit["latency"]
    space = target.space(problem)
    if space.size > MAX_ENUMERATE:
        return None
    e = enumerate_space(target, problem, space, ("latency",), chunk=1 << 18)
    value = e.best_values[0] if e.best_values else None
    cache[key] = {"version": version, "latency": value, "points": space.size, "label": problem.label}
    return value


def trials_to_within(result: TuneResult, opt: float | None, tol: float = 0.01) -> int | None:
    """1-based trial (or enumeration chunk) after which the best cost was within `tol` of the optimum."""
    if opt is None:
        return None
    for i, v in enumerate(result.trace):
        if v is not None and v <= opt * (1 + tol):
            return i + 1
    return None


def scorer_throughput(target: Target, problem: Problem, points: int = 1 << 18) -> float:
    """Candidate mappings scored per second by `score_batch` (best of 3)."""
    space = target.space(problem)
    cols = chunk_columns(space, 0, min(points, space.size))
    n = len(next(iter(cols.values())))
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        target.score_batch(problem, cols)
        best = max(best, n / (time.perf_counter() - t0))
    return best


def bench_layer(target: Target, problem: Problem, opt: float | None, budget: SearchSettings) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = tune(problem, target, budget, validate=False)
    elapsed = time.perf_counter() - t0
    searched = tune(problem, target, budget.model_copy(update={"strategy": "tpe"}), validate=False)
    rand = tune(
        problem,
        target,
        budget.model_copy(update={"strategy": "random", "inner_points": 0, "warm_start": False}),
        validate=False,
    )
    cold = tune(problem, target, budget.model_copy(update={"strategy": "tpe", "warm_start": False}), validate=False)
    found = r.values.get("latency")
    gap = None if (found is None or opt is None) else found / opt - 1
    return {
        "label": problem.label,
        "found": found,
        "optimum": opt,
        "gap": gap,
        "seconds": elapsed,
        "strategy": r.strategy,
        "proven": r.proven_optimal,
        "trials_per_s": r.trials_per_second,
        "to1pct": {
            "mapper": trials_to_within(searched, opt),
            "random": trials_to_within(rand, opt),
            "tpe_cold": trials_to_within(cold, opt),
        },
        "budget_trials": budget.max_trials,
    }


def _ratio(rows: list[dict[str, Any]], base: str) -> float | None:
    """Median over layers of trials(base) / trials(mapper) to reach 1% (unreached = budget + 1)."""
    ratios = []
    for row in rows:
        cap = row["budget_trials"] + 1
        m, b = row["to1pct"]["mapper"] or cap, row["to1pct"][base] or cap
        ratios.append(b / m)
    return statistics.median(ratios) if ratios else None


def fmt_gap(g: float | None) -> str:
    return "-" if g is None else f"{g:+.2%}"


def run(targets: list[str], workloads: tuple[str, ...], refresh: bool) -> dict[str, Any]:
    from costmodels.registry import get_target
    from workload.named import load

    optima = load_optima()
    report: dict[str, Any] = {}
    budget = SearchSettings()
    for name in targets:
        try:
            target = get_target(name)
        except Exception as e:  # a target still being written: report and go on
            print(f"## {name}: unavailable ({type(e).__name__}: {e})")
            continue
        rows: list[dict[str, Any]] = []
        print(f"## {name}")
        print(
            f"{'layer':34} {'found':>11} {'optimum':>11} {'gap':>8} {'time':>7} {'trials/s':>9}  to-1%: map/rand/cold"
        )
        for wl in workloads:
            t_wl = time.perf_counter()
            seen: set[str] = set()
            for p in load(wl):
                h = problem_hash(p)
                if h in seen:
                    continue
                seen.add(h)
                try:
                    opt = optimum(target, p, optima, refresh)
                    row = bench_layer(target, p, opt, budget)
                except Exception as e:  # an unsupported layer is reported, not fatal
                    print(f"{wl}/{p.label:28.28} error: {type(e).__name__}: {e}")
                    continue
                row["workload"] = wl
                rows.append(row)
                t1 = row["to1pct"]
                print(
                    f"{wl[:8] + '/' + p.label:34.34} {row['found'] or 0:11.4e} {row['optimum'] or 0:11.4e} "
                    f"{fmt_gap(row['gap']):>8} {row['seconds']:6.2f}s {row['trials_per_s']:9.0f}  "
                    f"{t1['mapper']}/{t1['random']}/{t1['tpe_cold']}"
                )
            print(f"   {wl}: all layers in {time.perf_counter() - t_wl:.1f} s")
        gaps = [r["gap"] for r in rows if r["gap"] is not None]
        summary = {
            "layers": len(rows),
            "within_1pct": sum(1 for g in gaps if g <= 0.01) / len(gaps) if gaps else None,
            "worst_gap": max(gaps) if gaps else None,
            "median_seconds": statistics.median(r["seconds"] for r in rows) if rows else None,
            "random_over_mapper_trials": _ratio(rows, "random"),
            "cold_tpe_over_mapper_trials": _ratio(rows, "tpe_cold"),
            "scorer_points_per_s": scorer_throughput(target, load("resnet50")[0]) if rows else None,
        }
        print(f"   summary: {json.dumps(summary)}")
        report[name] = {"rows": rows, "summary": summary}
    OPTIMA.write_text(json.dumps(optima, indent=1, sort_keys=True) + "\n")
    return report


def main() -> None:
    from costmodels.registry import target_names

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--targets", default=",".join(target_names()))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--refresh-optima", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the full report to this file")
    args = ap.parse_args()
    report = run(args.targets.split(","), tuple(args.workloads.split(",")), args.refresh_optima)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
