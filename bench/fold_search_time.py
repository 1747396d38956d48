"""Tuning time of ResNet-50's strided convs on Tenstorrent, both forms searched whole against bounded.

Run with ``python -m bench.fold_search_time [--preset wormhole-n150] [--batch 16] [--dtype bfloat8_b]``.
Each conv with a stride (the stem, and the 3x3 and 1x1 projection convs opening layer2-4) is tuned
with the fold offered (`mapper.transforms`), latency alone, unvalidated, in two ways side by side in
one run, at the preset's default fidelity policy (HiFi4) and at LoFi:

- ``both``: both forms searched whole, then compared (`tune_both_forms`: what `mapper.search.tune`
  did before the bound);
- ``bounded``: `mapper.search.tune` as it runs now: the form with the lower structure bound first,
  the other only when its bound leaves it a chance (`mapper.transforms`, "Bounding the second form").

Per conv: the seconds of each (best of `--repeat` runs, to damp the load of a shared machine), the
form chosen, which form the bounded search skipped and its bound (microseconds, the folded one with
its fold op: above the answer, so it could not win), and a check that both answer the same latency.
"""

from __future__ import annotations

import argparse
import time

from costmodels.registry import get_target
from mapper.result import TuneResult
from mapper.search import tune
from mapper.transforms import tune_both_forms
from workload import named
from workload.conv2d import as_conv2d
from workload.problem import Problem


def timed(fn: object, problem: Problem, target: object, repeat: int) -> tuple[TuneResult, float]:
    """The result and the best wall time of `repeat` runs."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(problem, target)  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    assert out is not None
    return out, best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="wormhole-n150")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--dtype", default="bfloat8_b", help="input dtype: bf16, bfloat8_b or bfloat4_b")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    problems = [p for p in named.load("resnet50", batch=args.batch, dtype=args.dtype)
                if (c := as_conv2d(p)) is not None and c.stride != (1, 1)]  # fmt: skip
    print(f"{args.preset}, ResNet-50 batch {args.batch}, {args.dtype}: strided convs, seconds to tune (fold offered)")
    head = (
        f"{'fidelity':8s} {'layer':22s} {'both s':>7s} {'bounded s':>9s} {'ratio':>6s} {'chosen':8s} "
        f"{'skipped':8s} {'its bound':>9s} {'answer us':>10s} {'same':>5s}"
    )
    print(head)
    print("-" * len(head))
    totals = {"both": 0.0, "bounded": 0.0}
    for fid in ({}, {"fidelities": ["LoFi"]}):
        target = get_target(args.preset, fid)
        name = ",".join(target.hardware.fidelities)  # type: ignore[attr-defined]
        for p in problems:
            full, t_full = timed(tune_both_forms, p, target, args.repeat)
            bounded, t_bounded = timed(lambda q, t: tune(q, t, validate=False), p, target, args.repeat)
            totals["both"] += t_full
            totals["bounded"] += t_bounded
            tr = bounded.transform
            assert tr is not None
            skipped = "original" if tr.original_latency is None else "folded" if tr.transformed_latency is None else "-"
            bound = {  # the skipped form's bound (the folded one with its fold op), the reason it was not searched
                "original": tr.original_bound,
                "folded": None if tr.transformed_bound is None else tr.transformed_bound + tr.transform_latency,
            }.get(skipped)
            answer = bounded.best_value()
            same = answer == full.best_value() and bounded.point == full.point
            print(
                f"{name:8s} {p.label.removeprefix('resnet50/'):22s} {t_full:7.2f} {t_bounded:9.2f} "
                f"{t_bounded / t_full:6.2f} {'folded' if tr.chosen else 'as given':8s} {skipped:8s} "
                f"{'-' if bound is None else f'{bound * 1e6:.2f}':>9s} {(answer or 0.0) * 1e6:10.2f} "
                f"{'yes' if same else 'NO':>5s}"
            )
    print("-" * len(head))
    print(
        f"total: both forms {totals['both']:.2f} s, bounded {totals['bounded']:.2f} s "
        f"(x{totals['bounded'] / totals['both']:.2f}); best of {args.repeat} runs each"
    )


if __name__ == "__main__":
    main()
