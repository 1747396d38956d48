"""Held-out problems with awkward sizes on every target (issue #12, "Figures"), in one run.

Problems no benchmark workload has: primes, 4095, a size of 1 and one of about 1e6, and an odd
conv. For each target and problem, side by side:

- ``auto`` (the default search, executor validation included): the answer's latency, its cycles
  over the roofline `lower_bound`, the stop reason and whether it is proven optimal over the
  target's space, the search time and the time with validation;
- branch and bound (targets with a `StructureBounded` hook): TPE over structures of ``--inner``
  points (default 4,096: the spaces split as the wider ones will be) for at most ``--seconds``,
  with its certificate: structures scored / pruned by bound / unexplored, the gap bound, the time,
  and its latency over auto's (1.000: the same answer).

Run: ``python -m bench.heldout_shapes [--targets trn2,ascend-a5] [--inner 4096] [--seconds 10]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from costmodels.registry import get_target, target_names
from costmodels.structure_bound import StructureBounded
from mapper.search import tune
from mapper.settings import SearchSettings
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem


def heldout() -> list[Problem]:
    """The awkward problems (bf16, weight second)."""
    gemms = [(4099, 131, 8191), (127, 4095, 1000), (4095, 127, 1000003), (1, 4099, 4095), (97, 89, 83)]
    out = [
        einsum("mk,kn->mn", {"m": m, "k": k, "n": n}, dtype="bf16", weight=1, label=f"gemm {m}x{k}x{n}")
        for m, k, n in gemms
    ]
    conv = conv2d(batch=3, in_channels=13, out_channels=29, input_height=31, input_width=31, kernel=3, padding=1)
    out.append(conv.model_copy(update={"label": "conv 3x13x31x31 -> 29, 3x3"}))
    return out


def _auto(target_name: str, p: Problem) -> dict[str, object]:
    t = get_target(target_name)
    if t.supports(p):
        return {"supported": False, "why": t.supports(p)[0].code}
    t0 = time.perf_counter()
    search = tune(p, t, SearchSettings(), validate=False)
    searched = time.perf_counter() - t0
    t0 = time.perf_counter()
    validated = tune(p, t, SearchSettings(), validate=True)
    total = time.perf_counter() - t0
    cycles = search.cost.cycles if search.cost else float("nan")
    return {
        "supported": True,
        "points": t.space(p).size,
        "latency": search.values.get("latency"),
        "roofline": cycles / search.lower_bound.cycles if search.lower_bound.cycles else float("nan"),
        "stop": search.stop_reason,
        "proven": search.proven_optimal,
        "search_s": searched,
        "total_s": total,
        "valid": validated.validation_passed,
        "same": validated.values.get("latency") == search.values.get("latency"),
    }


def _bnb(target_name: str, p: Problem, inner: int, seconds: float) -> dict[str, object] | None:
    t = get_target(target_name)
    if t.supports(p) or not isinstance(t, StructureBounded):
        return None
    s = SearchSettings(strategy="tpe", inner_points=inner, max_seconds=seconds, max_trials=100_000, patience=0)
    t0 = time.perf_counter()
    r = tune(p, t, s, validate=False)
    c = r.certificate
    assert c is not None
    return {
        "latency": r.values.get("latency"),
        "structures": c.structures_total,
        "scored": c.scored,
        "pruned": c.pruned_by_bound,
        "unexplored": c.unexplored,
        "gap": c.gap_bound,
        "proven": r.proven_optimal,
        "s": time.perf_counter() - t0,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--targets", default=",".join(target_names()))
    ap.add_argument("--inner", type=int, default=4096, help="points per structure of the branch-and-bound runs")
    ap.add_argument("--seconds", type=float, default=10.0, help="budget of each branch-and-bound run")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    problems = heldout()
    print(f"{'target':14s} {'problem':28s} {'points':>9s} {'latency s':>10s} {'/roof':>6s} {'stop':>15s} "
          f"{'proven':>6s} {'search':>7s} {'+valid':>7s} {'valid':>5s} | branch and bound: "
          f"{'scored/pruned/left of':>24s} {'gap':>7s} {'s':>6s} {'lat/auto':>8s}")  # fmt: skip
    searched: list[float] = []
    proven_all = proven_n = 0
    for name in args.targets.split(","):
        for p in problems:
            a = _auto(name, p)
            if not a["supported"]:
                print(f"{name:14s} {p.label:28s} not supported ({a['why']})")
                continue
            searched.append(float(a["search_s"]))  # type: ignore[arg-type]
            proven_all += 1
            proven_n += bool(a["proven"])
            if a["latency"] is None:
                print(f"{name:14s} {p.label:28s} {a['points']:>9,} nothing feasible in the space ({a['stop']})")
                continue
            line = (
                f"{name:14s} {p.label:28s} {a['points']:>9,} {a['latency']:>10.4g} {a['roofline']:>6.3f} "
                f"{a['stop']:>15s} {'yes' if a['proven'] else 'no':>6s} {a['search_s']:>6.2f}s {a['total_s']:>6.2f}s "
                f"{'ok' if a['valid'] else 'FAIL':>5s}"
            )
            b = _bnb(name, p, args.inner, args.seconds)
            if b is not None:
                gap = "-" if b["gap"] is None else f"{b['gap']:.2%}"
                ratio = float(b["latency"]) / float(a["latency"]) if b["latency"] and a["latency"] else float("nan")  # type: ignore[arg-type]
                line += (
                    f" | {b['scored']:>6}/{b['pruned']:>6}/{b['unexplored']:>5} of {b['structures']:>5} "
                    f"{gap:>7s} {b['s']:>5.2f}s {ratio:>8.3f}"
                )
            print(line, flush=True)
    if searched:
        print(
            f"\nauto: {proven_n} of {proven_all} answers proven optimal over their spaces; search time median "
            f"{statistics.median(searched):.3f} s, slowest {max(searched):.3f} s"
        )
    print(f"benchmark ran in {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
