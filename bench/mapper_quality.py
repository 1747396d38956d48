"""Benchmark of the mapper (issue 6, "Measure it"): quality, time to result and sample efficiency per target.

For every target and every distinct layer (by content hash) of ResNet-50 (all 53 convs, batch 1),
BERT-base (GEMMs) and a Llama-7B decode and prefill layer, with the default budget:

- the found latency, the exhaustive optimum (computed once by vectorised enumeration, or for a
  space above `EXHAUSTIVE_LIMIT` points by a best-first proof (`proven_optimum`), and cached in
  ``bench/optima.json`` under ``preset|content hash|cost-model version``, so a model change is seen
  and recomputed), the gap, the search time, the time with the executor's validation, trials/s;
- on the same layer and trial budget, side by side: the mapper's TPE path (warm start, sub-spaces,
  convergence stop), Optuna TPE without warm start and plain random search (one point per trial,
  Optuna's RandomSampler), both baselines without the convergence stop; for each the trials (and
  points) it took to come within 1% of the optimum. Random search's expected count, 1 / (share of
  the space within 1%), is printed beside its measured one;
- the scorer's throughput: points per second of enumerating every layer's whole space through
  ``score_codes``, cold (fresh target) and steady, in one process;
- the issue's goal checks.

Timed searches run one at a time in this process; the baselines (untimed) run over ``--workers``
processes. Run: ``python -m bench.mapper_quality [--quick] [--targets trn2,rngd] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from bench.scorer_speed import enumerate_once
from costmodels.choice_codes import SpaceCoder
from costmodels.protocol import Target
from mapper.enumerate import ChunkPlan
from mapper.keys import cost_model_version, problem_hash
from mapper.result import TuneResult
from mapper.search import tune
from mapper.settings import SearchSettings
from workload.problem import Problem

OPTIMA = Path(__file__).with_name("optima.json")
WORKLOADS = ("resnet50", "bert-base", "llama7b-decode", "llama7b-prefill")
TOL = 0.01  # "within 1%"
BUDGET = SearchSettings()  # the default budget
WORKER_MEMORY = 8 << 30  # bytes of address space per worker process
BASELINES: dict[str, dict[str, Any]] = {
    "mapper": {"strategy": "tpe"},  # the path `auto` takes when it does not enumerate
    "tpe_cold": {"strategy": "tpe", "warm_start": False, "patience": 0},
    "random": {"strategy": "random", "inner_points": 0, "warm_start": False, "patience": 0},
}


def distinct_layers(workloads: tuple[str, ...], quick: bool) -> list[tuple[str, Problem, int]]:
    """(workload, problem, occurrences) of each distinct layer, first occurrence first."""
    from workload.named import load

    seen: dict[str, list[Any]] = {}
    for wl in workloads:
        for p in load(wl):
            h = problem_hash(p)
            if h in seen:
                seen[h][2] += 1
            else:
                seen[h] = [wl, p, 1]
    rows = [(wl, p, n) for wl, p, n in seen.values()]
    return rows[::4] if quick else rows


#: spaces above this many points are not enumerated: their optimum is best-first's proof (`proven_optimum`)
EXHAUSTIVE_LIMIT = 200_000_000


def proven_optimum(target: Target, problem: Problem) -> dict[str, Any]:
    """The optimum of a space too large to enumerate (Trainium's every tile count): best-first's proof.

    Best-first scores structures in ascending bound order and stops when the next bound cannot beat
    the best, so its answer is optimal over the space when it stops proven (stop ``lower-bound`` or
    ``space-exhausted``); the bound's admissibility and best-first's agreement with enumeration are
    tested on problems small enough to enumerate (tests/costmodels/trainium/test_trainium_tile_bounds.py).
    An unproven answer is recorded with ``proven: false``, not as an optimum.
    """
    from mapper.search import tune_as_given

    space = target.space(problem)
    r = tune_as_given(problem, target, SearchSettings(strategy="bestfirst", max_seconds=600.0), validate=False)
    best = r.best_value("latency")
    return {
        "label": problem.label,
        "latency": best if r.proven_optimal else None,
        "points": space.size,
        "feasible": None,
        "near": None,
        "method": "best-first proof" if r.proven_optimal else f"unproven ({r.stop_reason})",
    }


def exhaustive(target: Target, problem: Problem) -> dict[str, Any]:
    """Score the whole space: the optimum and how many points lie within 1% of it (above the limit: a proof)."""
    space = target.space(problem)
    if space.size > EXHAUSTIVE_LIMIT:
        return proven_optimum(target, problem)
    plan = ChunkPlan(space, 1 << 16)
    decode = SpaceCoder(space).decode
    parts = []
    for b0, b1 in plan.bounds():
        s = target.score_batch(problem, decode(plan.codes(b0, b1)))  # by value: independent of the mapper's codes
        lat = np.asarray(s.objectives["latency"], dtype=np.float64)
        parts.append(np.where(np.asarray(s.feasible, dtype=bool), lat, np.inf))
    lat = np.concatenate(parts)
    best = float(lat.min())
    ok = bool(np.isfinite(best))
    return {
        "label": problem.label,
        "latency": best if ok else None,
        "points": space.size,
        "feasible": int(np.isfinite(lat).sum()),
        "near": int((lat <= best * (1 + TOL)).sum()) if ok else 0,
    }


def _optimum_job(preset: str, problem: Problem) -> dict[str, Any]:
    from costmodels.registry import get_target

    return exhaustive(get_target(preset), problem)


def optima_for(preset: str, target: Target, layers: list[Problem], workers: int, refresh: bool) -> dict[str, Any]:
    """problem hash -> cached (or freshly computed) exhaustive optimum; updates ``bench/optima.json``."""
    cache = json.loads(OPTIMA.read_text()) if OPTIMA.exists() else {}
    version = cost_model_version(target)
    want = {problem_hash(p): p for p in layers}
    out = {h: cache[f"{preset}|{h}|{version}"] for h in want if f"{preset}|{h}|{version}" in cache and not refresh}
    todo = [(h, p) for h, p in want.items() if h not in out]
    if todo:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
            done = list(pool.map(_optimum_job, [preset] * len(todo), [p for _, p in todo]))
        print(f"   exhaustive optima of {len(todo)} layers computed in {time.perf_counter() - t0:.1f} s", flush=True)
        cache = json.loads(OPTIMA.read_text()) if OPTIMA.exists() else {}
        for (h, _), entry in zip(todo, done, strict=True):
            stale = [k for k in cache if k.startswith(f"{preset}|{h}|") or k.count("|") != 2]
            for k in stale:
                del cache[k]
            cache[f"{preset}|{h}|{version}"] = {**entry, "version": version}
            out[h] = entry
        OPTIMA.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    return out


def first_within(result: TuneResult, opt: float | None) -> tuple[int, int] | None:
    """(trials, points scored) after which the best latency was within 1% of `opt`; None if never."""
    if opt is None:
        return None
    for i, v in enumerate(result.trace):
        if v is not None and v <= opt * (1 + TOL):
            points = result.trace_points[i] if i < len(result.trace_points) else 0
            return i + 1, points
    return None


def _compare_job(
    preset: str, problem: Problem, opt: float | None, point: dict[str, Any] | None, baselines: bool = True
) -> dict[str, Any]:
    """Untimed work of one layer: validate the mapper's answer, run the side-by-side searches (unless not asked)."""
    from costmodels.registry import get_target
    from executor.validate import validate_as_run

    target = get_target(preset)
    out: dict[str, Any] = {"validation": None}
    if point is not None:
        t0 = time.perf_counter()
        try:
            report = validate_as_run(problem, target.mapping(problem, point), seed=BUDGET.seed)
            passed: bool | None = {"passed": True, "failed": False}.get(report.status)  # None: not checked
            error = None if passed is not None else report.reason
        except MemoryError:  # the worker's address-space cap (see `_cap_memory`) stopped a runaway validation
            passed, error = None, f"MemoryError above {WORKER_MEMORY >> 30} GiB"
        except Exception as e:  # report the executor's failure, keep benchmarking
            passed, error = None, f"{type(e).__name__}: {e}"
        out["validation"] = {"passed": passed, "seconds": time.perf_counter() - t0, "error": error}
    for name, update in BASELINES.items() if baselines else ():
        r = tune(problem, target, BUDGET.model_copy(update=update), validate=False)
        out[name] = {"first": first_within(r, opt), "trials": r.counts.trials}
    return out


def _cap_memory() -> None:
    """Worker initializer: cap the address space so one runaway job fails alone instead of being OOM-killed."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))


def timed_layer(target: Target, problem: Problem) -> dict[str, Any]:
    """The default search (strategy auto) alone in this process, timed; validation runs later, in a worker."""
    r = tune(problem, target, BUDGET, validate=False)
    return {
        "found": r.values.get("latency"),
        "point": r.point,
        "seconds": r.seconds,
        "strategy": r.strategy,
        "stop": r.stop_reason,
        "proven": r.proven_optimal,
        "trials": r.counts.trials,
        "points_scored": r.counts.points_scored,
        "scorer_rate": r.scorer_rate,
    }


def scorer_rates(preset: str, problems: list[Problem]) -> tuple[float, float]:
    """(cold, steady) points/s of enumerating every layer's whole space the mapper's way, over all layers.

    Spaces above `EXHAUSTIVE_LIMIT` are left out (not enumerated). Cold: a fresh target per layer,
    per-problem preparation included (`bench.scorer_speed.enumerate_once`);
    steady: the same target again. Each is total points / total seconds, so large spaces weigh by size.
    """
    from costmodels.registry import get_target

    points = cold = steady = 0.0
    sizer = get_target(preset)  # one target sizes every space (each is built once here, not per call)
    problems = [p for p in problems if sizer.space(p).size <= EXHAUSTIVE_LIMIT]
    for p in problems:
        target = get_target(preset)
        n, c = enumerate_once(target, p)
        points, cold = points + n, cold + c
        steady += min(enumerate_once(target, p)[1] for _ in range(2))
    if not points:  # every space above the limit: no enumeration to time
        return float("nan"), float("nan")
    return points / cold, points / steady


def _ratio(rows: list[dict[str, Any]], base: str, points: bool = False) -> tuple[float, bool] | None:
    """Median over layers of (base's trials or points to 1%) / (mapper's); (value, exact?).

    A search that never came within 1% counts as budget + 1 trials, so a ratio involving one is a
    bound, not a measurement (exact = False when the median layer relies on one).
    """
    k = 1 if points else 0
    vals = []
    for row in rows:
        cmp = row.get("compare")
        if not cmp or "mapper" not in cmp:  # run with --no-baselines
            continue
        m, b = cmp["mapper"]["first"], cmp[base]["first"]
        cap = BUDGET.max_trials + 1
        mv = m[k] if m else cap * (row["timed"]["points_scored"] if points else 1)
        bv = b[k] if b else cap
        vals.append((bv / max(mv, 1), m is not None and b is not None))
    if not vals:
        return None
    vals.sort()
    med = vals[len(vals) // 2]
    return med[0], med[1]


def run_target(
    preset: str, layers: list[tuple[str, Problem, int]], workers: int, refresh: bool, baselines: bool = True
) -> dict[str, Any]:
    from costmodels.registry import get_target

    target = get_target(preset)
    usable = [(wl, p, n) for wl, p, n in layers if not target.supports(p)]
    print(f"\n## {preset}  ({len(usable)} distinct layers, {len(layers) - len(usable)} unsupported)", flush=True)
    optima = optima_for(preset, target, [p for _, p, _ in usable], workers, refresh)
    tune(usable[0][1], target, BUDGET.model_copy(update={"max_trials": 3}), validate=False)  # warm-up
    rows: list[dict[str, Any]] = []
    for wl, p, n in usable:
        h = problem_hash(p)
        opt = optima[h]["latency"]
        timed = timed_layer(target, p)
        found = timed["found"]
        gap = None if found is None or opt is None else found / opt - 1
        rows.append({"workload": wl, "label": p.label, "count": n, "hash": h, "optimum": optima[h], "gap": gap,
                     "timed": timed})  # fmt: skip
    with ProcessPoolExecutor(max_workers=max(1, workers), initializer=_cap_memory) as pool:
        jobs = [
            pool.submit(_compare_job, preset, p, optima[problem_hash(p)]["latency"], row["timed"]["point"], baselines)
            for (_, p, _), row in zip(usable, rows, strict=True)
        ]
        for row, job in zip(rows, jobs, strict=True):
            try:
                row["compare"] = job.result()
            except Exception as e:  # a worker died: report the layer without its comparison
                row["compare"] = {"validation": {"passed": None, "seconds": 0.0, "error": f"{type(e).__name__}"}}
            row["validation"] = row["compare"].pop("validation")
    print_rows(rows)
    summary = summarize(rows)
    summary["scorer_rate"], summary["scorer_steady"] = scorer_rates(preset, [p for _, p, _ in usable])
    return {"rows": rows, "summary": summary}


def _vsec(row: dict[str, Any]) -> float:
    return float((row.get("validation") or {}).get("seconds", 0.0))


def _valid(row: dict[str, Any]) -> str:
    v = row.get("validation")
    return "-" if not v else f"{v['seconds']:.2f}s"


def _rate(t: dict[str, Any]) -> str:
    """Trials per second of a study, or points per second of an enumeration."""
    if t["trials"]:
        return f"{t['trials'] / max(t['seconds'], 1e-9):.0f} tr/s"
    return f"{t['points_scored'] / max(t['seconds'], 1e-9) / 1e6:.1f}M pt/s"


def _to(first: Any) -> str:
    return "-" if first is None else str(first[0])


def print_rows(rows: list[dict[str, Any]]) -> None:
    print(f"{'layer':38} {'x':>2} {'points':>8} {'found':>10} {'optimum':>10} {'gap':>7} {'stop':>16} "
          f"{'search':>7} {'valid.':>7} {'rate':>11}  to-1% map/cold/rand (rand exp.)")  # fmt: skip
    for r in rows:
        t, o, c = r["timed"], r["optimum"], r.get("compare", {})
        exp = o["points"] / o["near"] if o.get("near") else None
        gap = "-" if r["gap"] is None else f"{r['gap']:+.2%}"
        print(
            f"{r['label'][:38]:38} {r['count']:2d} {o['points']:8d} {t['found'] or 0:10.4g} {o['latency'] or 0:10.4g} "
            f"{gap:>7} {t['stop']:>16} {t['seconds']:6.2f}s {_valid(r):>7} {_rate(t):>11}  "
            f"{_to(c.get('mapper', {}).get('first'))}/{_to(c.get('tpe_cold', {}).get('first'))}/"
            f"{_to(c.get('random', {}).get('first'))} ({'-' if exp is None else f'{exp:.0f}'})"
            + ("  VALIDATION FAILED" if (r.get("validation") or {}).get("passed") is False else "")
            + (f"  validation error: {r['validation']['error']}" if (r.get("validation") or {}).get("error") else "")
        )


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    gaps = [r["gap"] for r in rows if r["gap"] is not None]
    secs = [r["timed"]["seconds"] for r in rows]
    vsecs = [r["timed"]["seconds"] + _vsec(r) for r in rows]
    resnet = [r for r in rows if r["workload"] == "resnet50"]
    exp = [r["optimum"]["points"] / r["optimum"]["near"] for r in rows if r["optimum"].get("near")]
    map_first = [r["compare"]["mapper"]["first"] for r in rows if "mapper" in r.get("compare", {})]
    return {
        "layers": len(rows),
        "within_1pct": sum(1 for g in gaps if g <= TOL) / len(gaps) if gaps else None,
        "worst_gap": max(gaps) if gaps else None,
        "proven": sum(1 for r in rows if r["timed"]["proven"]),
        "validation_failed": sum(1 for r in rows if (r.get("validation") or {}).get("passed") is not True),
        "median_seconds": statistics.median(secs) if secs else None,
        "median_seconds_with_validation": statistics.median(vsecs) if vsecs else None,
        "resnet50_seconds": sum(r["timed"]["seconds"] for r in resnet),
        "resnet50_seconds_with_validation": sum(r["timed"]["seconds"] + _vsec(r) for r in resnet),
        "resnet50_layers": (sum(r["count"] for r in resnet), len(resnet)),
        "random_over_mapper_trials": _ratio(rows, "random"),
        "random_over_mapper_points": _ratio(rows, "random", points=True),
        "cold_over_mapper_trials": _ratio(rows, "tpe_cold"),
        "random_expected_median": statistics.median(exp) if exp else None,
        "mapper_trials_to_1pct_median": statistics.median(f[0] if f else BUDGET.max_trials + 1 for f in map_first)
        if map_first
        else None,
    }


def goal_lines(preset: str, s: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """(goal, met?, measured) for one target."""
    r, rn = s["random_over_mapper_trials"], s["resnet50_seconds"]
    return [
        ("layers within 1% of the optimum >= 95%", None if s["within_1pct"] is None else s["within_1pct"] >= 0.95,
         "-" if s["within_1pct"] is None else f"{s['within_1pct']:.1%} of {s['layers']}"),
        ("no layer worse than 5%", None if s["worst_gap"] is None else s["worst_gap"] <= 0.05,
         "-" if s["worst_gap"] is None else f"worst {s['worst_gap']:+.2%}"),
        ("median search time per layer < 1 s", s["median_seconds"] < 1.0,
         f"{s['median_seconds']:.3f} s (with validation {s['median_seconds_with_validation']:.3f} s)"),
        ("ResNet-50, all layers < 30 s", rn < 30.0 if s["resnet50_layers"][1] else None,
         f"{s['resnet50_seconds']:.1f} s search, {s['resnet50_seconds_with_validation']:.1f} s with validation "
         f"({s['resnet50_layers'][0]} layers, {s['resnet50_layers'][1]} distinct, one process)"),
        ("trials to 1%: random / mapper >= 2 (median layer)", None if r is None else r[0] >= 2,
         "-" if r is None else f"{r[0]:.1f}x" + ("" if r[1] else " (bound: a search did not reach 1%)")),
        ("scorer >= 10 M points/s/core (scoring path)",
         None if math.isnan(s["scorer_steady"]) else s["scorer_steady"] >= 1e7,
         "- (no layer was enumerated: best-first scores each structure's sub-space)"
         if math.isnan(s["scorer_steady"])
         else f"{s['scorer_steady'] / 1e6:.2f} M/s; cold, preparation included: {s['scorer_rate'] / 1e6:.2f} M/s"),
        ("every answer passes the executor's validation", s["validation_failed"] == 0,
         f"{s['validation_failed']} of {s['layers']} failed or could not run"),
    ]  # fmt: skip


def print_goals(report: dict[str, Any]) -> None:
    print("\n## goal checks")
    if len(report) > 1:
        every = [row for rep in report.values() for row in rep["rows"]]
        slowest = min((rep["summary"] for rep in report.values()), key=lambda x: x["scorer_steady"])
        overall = {**summarize(every), "scorer_rate": slowest["scorer_rate"], "scorer_steady": slowest["scorer_steady"]}
        overall["resnet50_layers"] = next(iter(report.values()))["summary"]["resnet50_layers"]
        overall["resnet50_seconds"] = max(rep["summary"]["resnet50_seconds"] for rep in report.values())
        overall["resnet50_seconds_with_validation"] = max(
            rep["summary"]["resnet50_seconds_with_validation"] for rep in report.values()
        )
        report = {"ALL TARGETS (ResNet-50 and scorer: slowest target)": {"summary": overall}, **report}
    for preset, rep in report.items():
        print(f"{preset}:")
        for goal, ok, measured in goal_lines(preset, rep["summary"]):
            mark = "n/a " if ok is None else ("PASS" if ok else "FAIL")
            print(f"  [{mark}] {goal:52} {measured}")
        s = rep["summary"]
        pr, cr = s["random_over_mapper_points"], s["cold_over_mapper_trials"]
        print(f"         (points scored to 1%, random / mapper: {pr[0] if pr else float('nan'):.2g}x; "
              f"trials, cold TPE / mapper: {cr[0] if cr else float('nan'):.2g}x; random's expected trials to 1% "
              f"on the median layer: {s['random_expected_median'] or float('nan'):.0f}; "
              f"mapper's: {s['mapper_trials_to_1pct_median']})")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    from costmodels.registry import target_names

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--targets", default=",".join(target_names()))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true", help="every 4th distinct layer only")
    ap.add_argument("--workers", type=int, default=2, help="processes for the optima and the baselines")
    ap.add_argument("--refresh-optima", action="store_true")
    ap.add_argument(
        "--no-baselines", action="store_true", help="validate every answer, skip the TPE and random side-by-side runs"
    )
    ap.add_argument("--json", type=Path, help="also write the full report to this file")
    args = ap.parse_args(argv if argv is not None else [])
    t0 = time.perf_counter()
    layers = distinct_layers(tuple(args.workloads.split(",")), args.quick)
    report: dict[str, Any] = {}
    for preset in args.targets.split(","):
        try:
            report[preset] = run_target(preset, layers, args.workers, args.refresh_optima, not args.no_baselines)
        except Exception as e:  # a target being rewritten must not hide the others
            print(f"## {preset}: failed ({type(e).__name__}: {e})", flush=True)
    print_goals(report)
    print(f"\nbenchmark ran in {time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
