"""What the Tensix structure bound buys branch and bound (issue #12; costmodels/tenstorrent/bounds.py).

On every distinct ResNet-50 layer (batch 16) and a 4096^3 bf16 GEMM, per Tenstorrent preset, side by
side in one run, each on a fresh target (its tables priced inside the time):

* the exhaustive enumeration (the optimum and its time: what ``auto`` runs on spaces this size);
* bound order: the layouts (core grids) taken in increasing order of their `structure_bound`, each
  one's sub-space scored whole with `score_codes`, until the next bound reaches the best found
  (a proof over the whole space: every layout left is bounded out);
* the mapper's TPE search with the layout structural (``--inner`` points per structure, default
  4,096), convergence stop off (``patience 0``: it runs until every structure is scored or bounded
  out), with the target's bound ("after") and with it hidden, so the mapper bounds every structure
  by the whole problem's roofline ("before"): structures scored / pruned by bound and seconds;
* the same with the default convergence stop (40 trials without improvement), before and after:
  whether the final sweep of the certificate proves the answer.

"same optimum": the TPE answers equal the enumeration's (a proven Tenstorrent answer is the winner of
the tie rule, `mapper.ties`, up to 0.5% above the fastest) and the bound order found the space's
minimum latency. Timings are noisy on a shared machine: compare within a row.
Run: ``python -m bench.tenstorrent_bounds [--targets wormhole-n150,blackhole-p150] [--layers 0]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any

import numpy as np

from costmodels.protocol import Target
from costmodels.registry import get_target
from mapper.bounds import StructureBounds
from mapper.enumerate import subspace_codes
from mapper.keys import problem_hash
from mapper.search import tune
from mapper.settings import SearchSettings
from workload import named
from workload.einsum import einsum
from workload.problem import Problem


class Unbounded:
    """A target with its `structure_bound` hidden: the mapper then bounds every structure by the roofline."""

    def __init__(self, target: Target) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        if name == "structure_bound":
            raise AttributeError(name)
        return getattr(self._target, name)


def problems(layers: int) -> list[Problem]:
    """Distinct ResNet-50 layers (batch 16; the first `layers` if > 0) and the 4096^3 GEMM."""
    seen: dict[str, Problem] = {}
    for p in named.load("resnet50", batch=16):
        seen.setdefault(problem_hash(p), p)
    out = list(seen.values())[: layers or None]
    return [*out, einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, dtype="bf16", weight=1, label="gemm 4096^3")]


def run(problem: Problem, target: Target | Unbounded, settings: SearchSettings) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = tune(problem, target, settings, validate=False)
    seconds = time.perf_counter() - t0
    c = r.certificate
    assert c is not None
    return {
        "value": r.values["latency"],
        "seconds": seconds,
        "proven": r.proven_optimal,
        "scored": c.scored,
        "pruned": c.pruned_by_bound,
        "total": c.structures_total,
        "gap": c.gap_bound,
    }


def bound_order(problem: Problem, target: Any) -> tuple[float, int, float]:
    """(best latency, layouts scored, seconds) of branch and bound over the layouts in order of their bounds."""
    t0 = time.perf_counter()
    space = target.space(problem)
    layouts = space.params[0].choices
    inner = tuple(p.name for p in space.params[1:])
    bounds = sorted((target.structure_bound(problem, {"layout": lay}), i) for i, lay in enumerate(layouts))
    best, scored = math.inf, 0
    for b, i in bounds:
        if StructureBounds.bounded_out(b, best):  # the mapper's test (its float tolerance)
            break
        s = target.score_codes(problem, subspace_codes(space, {"layout": i}, inner))
        best, scored = min(best, float(np.where(s.feasible, s.objectives["latency"], np.inf).min())), scored + 1
    return best, scored, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="wormhole-n150,blackhole-p150")
    ap.add_argument("--layers", type=int, default=0, help="distinct ResNet-50 layers (0: all)")
    ap.add_argument("--inner", type=int, default=4096, help="points per structure")
    args = ap.parse_args(argv)
    full = SearchSettings(strategy="tpe", inner_points=args.inner, max_trials=20_000, patience=0, max_seconds=600)
    early = SearchSettings(strategy="tpe", inner_points=args.inner, max_trials=20_000, max_seconds=600)
    for preset in args.targets.split(","):
        print(f"\n## {preset} (TPE: {args.inner:,} points per structure)")
        print(
            "| problem | layouts | exhaustive s | bound order: scored, s | p0 before: scored / pruned, s "
            "| p0 after: scored / pruned, s | p40 before: proven, s | p40 after: proven (gap), s | same optimum |"
        )
        print("|---|---:|---:|---|---|---|---|---|---|")  # fmt: skip
        ratios: dict[str, list[float]] = {"bound order": [], "p0 after": [], "p0 before": []}
        proven = {"before": 0, "after": 0}
        rows = problems(args.layers)
        for p in rows:
            t0 = time.perf_counter()
            opt = tune(p, get_target(preset), SearchSettings(strategy="exhaustive", max_seconds=600), validate=False)
            ex = time.perf_counter() - t0
            ordered, n_ordered, t_ordered = bound_order(p, get_target(preset))
            before, after = run(p, Unbounded(get_target(preset)), full), run(p, get_target(preset), full)
            slow, fast = run(p, Unbounded(get_target(preset)), early), run(p, get_target(preset), early)
            value = opt.values["latency"]  # a proven Tenstorrent answer is the tie rule's winner (mapper.ties)
            fastest = min((t.latency for t in opt.ties), default=value)  # the space's minimum latency
            same = before["value"] == after["value"] == value and ordered == fastest and after["proven"]
            for k, sec in (
                ("bound order", t_ordered),
                ("p0 after", after["seconds"]),
                ("p0 before", before["seconds"]),
            ):
                ratios[k].append(sec / ex)
            proven["before"] += slow["proven"]
            proven["after"] += fast["proven"]
            gap = "" if fast["proven"] or fast["gap"] is None else f" ({fast['gap']:.2%})"
            print(
                f"| {p.label} | {after['total']} | {ex:.2f} | {n_ordered}, {t_ordered:.2f} | "
                f"{before['scored']} / {before['pruned']}, {before['seconds']:.2f} | "
                f"{after['scored']} / {after['pruned']}, {after['seconds']:.2f} | "
                f"{'yes' if slow['proven'] else 'no'}, {slow['seconds']:.2f} | "
                f"{'yes' if fast['proven'] else 'no'}{gap}, {fast['seconds']:.2f} | {'yes' if same else 'NO'} |",
                flush=True,
            )
        print(
            "\nmedian seconds / exhaustive seconds: "
            + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in ratios.items())
        )
        print(
            f"proven with patience 40: before {proven['before']} of {len(rows)}, after {proven['after']} of {len(rows)}"
        )


if __name__ == "__main__":
    main()
