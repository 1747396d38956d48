"""Benchmark of Trainium's search over every tile count (issue #12): proofs, time, and the ladder it replaced.

For every distinct layer (by content hash) of ResNet-50, BERT-base and a Llama-7B decode and
prefill layer (the layers of `bench.mapper_quality`) on each Trainium preset:

- the default search (strategy ``auto``, default budget, no validation), timed alone in this
  process: its strategy, whether its certificate proves the optimum over the whole space (no
  structure unexplored), the structures scored and pruned by bound;
- the optimum of the ladder space offered before (``space.build_space(tiles=LADDER)``, at most
  2,000,000 points, priced whole by `scoring.price_grid`): the new answer must never be worse, as
  the space of every tile count contains it.

``bench.mapper_quality`` cannot run on these spaces (it enumerates each layer's whole space, up to
5e10 points, for its reference optimum and its scorer rate); this benchmark gives the proof
instead. Run: ``python -m bench.trainium_proofs [--targets trn1,trn2] [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.mapper_quality import WORKLOADS, distinct_layers
from costmodels.registry import get_target
from costmodels.trainium.scoring import price_grid
from costmodels.trainium.space import LADDER, build_space, problem_consts
from costmodels.trainium.target import TrainiumTarget
from mapper.search import tune
from mapper.settings import SearchSettings
from workload.problem import Problem


def ladder_optimum(target: TrainiumTarget, problem: Problem) -> float:
    """The best latency (s) of the ladder space offered before every tile count (priced whole)."""
    hw = target.hardware
    space = build_space(problem, hw, tiles=LADDER)
    grid = price_grid(problem, hw, space, lambda r: problem_consts(problem, hw, r, supported=True))
    return float(grid.latency.min())


def run_preset(preset: str, layers: list[tuple[str, Problem, int]]) -> list[dict[str, object]]:
    target = get_target(preset, {"tile_space": "every"})
    assert isinstance(target, TrainiumTarget)
    usable = [(wl, p) for wl, p, _ in layers if not target.supports(p)]
    tune(usable[0][1], target, SearchSettings(max_trials=3), validate=False)  # warm-up (imports, caches)
    rows: list[dict[str, object]] = []
    print(f"\n## {preset} ({len(usable)} distinct layers)")
    print(f"{'layer':44} {'points':>16} {'strategy':>10} {'s':>7} {'proven':>6} {'scored':>7} {'pruned':>10} "
          f"{'vs ladder':>10}")  # fmt: skip
    for _, p in usable:
        t0 = time.perf_counter()
        r = tune(p, target, SearchSettings(), validate=False)
        seconds = time.perf_counter() - t0
        cert = r.certificate
        proven = cert is not None and cert.unexplored == 0
        found = r.values.get("latency")
        old = ladder_optimum(target, p)
        change = None if found is None else found / old - 1
        row = {"label": p.label, "points": target.space(p).size, "strategy": r.strategy, "seconds": seconds,
               "proven": proven, "scored": cert.scored if cert else None,
               "pruned": cert.pruned_by_bound if cert else None, "change": change}  # fmt: skip
        rows.append(row)
        ch = "-" if change is None else f"{change:+.2%}"
        print(f"{p.label:44} {row['points']:>16,} {r.strategy:>10} {seconds:>7.3f} {proven!s:>6} "
              f"{row['scored']!s:>7} {row['pruned']!s:>10} {ch:>10}", flush=True)  # fmt: skip
    return rows


def summary(preset: str, rows: list[dict[str, object]]) -> None:
    secs = [float(r["seconds"]) for r in rows]  # type: ignore[arg-type]
    changes = [float(r["change"]) for r in rows if r["change"] is not None]  # type: ignore[arg-type]
    proven = sum(bool(r["proven"]) for r in rows)
    better = [c for c in changes if c < -1e-12]
    worse = [c for c in changes if c > 1e-12]
    print(f"\n{preset}: {proven}/{len(rows)} layers proven optimal over every tile count; time per layer "
          f"median {statistics.median(secs):.3f} s, max {max(secs):.3f} s; vs the ladder optimum: "
          f"{len(better)} better (median {statistics.median(better) if better else 0:+.2%}, best "
          f"{min(better) if better else 0:+.2%}), {len(worse)} worse")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="trn1,trn2")
    ap.add_argument("--quick", action="store_true", help="every fourth layer")
    args = ap.parse_args(argv)
    layers = distinct_layers(WORKLOADS, args.quick)
    results = {preset: run_preset(preset, layers) for preset in args.targets.split(",")}
    for preset, rows in results.items():
        summary(preset, rows)


if __name__ == "__main__":
    main()
