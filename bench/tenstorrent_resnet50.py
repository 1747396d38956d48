"""Cheapest Tensix mapping of every ResNet-50 conv (batch 16, bf16), next to the roofline.

Run with ``python -m bench.tenstorrent_resnet50 [--preset wormhole-n150]``. Every point of each
layer's space is priced with `score_codes` (exhaustive, in chunks). Columns: the cheapest layout and memory
placement at the preset's default fidelity policy (HiFi4 only, ttnn's default), its cycles, the
roofline lower bound at that policy, the ratio and the stage that bounds the mapping; then, as a
side column, the cheapest cycles when the fidelity policy is overridden to LoFi (fewer mantissa
bits: not numerically equivalent for bf16).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from costmodels.protocol import Choice
from costmodels.tenstorrent.target import TenstorrentTarget, make_target
from mapper.enumerate import ChunkPlan
from workload import named
from workload.problem import Problem


def best(target: TenstorrentTarget, problem: Problem) -> tuple[dict[str, Choice], float] | None:
    """The cheapest feasible point of the target's space and its cycles (the whole space, by choice code)."""
    space = target.space(problem)
    plan = ChunkPlan(space, 1 << 16)
    cycles, point = np.inf, None
    for b0, b1 in plan.bounds():
        codes = plan.codes(b0, b1)
        s = target.score_codes(problem, codes)
        lat = np.where(s.feasible, s.objectives["latency"], np.inf)
        i = int(np.argmin(lat))
        if lat[i] < cycles:
            cycles, point = float(lat[i]), {p.name: p.choices[int(codes[p.name][i])] for p in space.params}
    if point is None:
        return None
    return point, cycles * target.hardware.clock_hz


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="wormhole-n150")
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args(argv)
    target = make_target(args.preset, {})
    lofi = make_target(args.preset, {"fidelities": ["LoFi"]})
    problems = named.load("resnet50", batch=args.batch, dtype="bf16")
    t0 = time.time()
    policy = ",".join(target.hardware.fidelities)
    head = (
        f"{'layer':28s} {'layout':12s} {'memory':6s} {'cycles':>10s} {'bound':>10s} {'x':>5s} {'by':7s} {'LoFi':>10s}"
    )
    print(f"{args.preset}, ResNet-50 batch {args.batch}, bf16; fidelity policy [{policy}], LoFi as a side column")
    print(head)
    print("-" * len(head))
    tot = {"best": 0.0, "lb": 0.0, "lofi": 0.0}
    for p in problems:
        lb = target.lower_bound(p).cycles
        found, lo = best(target, p), best(lofi, p)
        if found is None or lo is None:
            print(f"{p.label:28s} no feasible mapping")
            continue
        point, cyc = found
        rep = target.cost(p, target.mapping(p, point))
        tot["best"] += cyc
        tot["lb"] += lb
        tot["lofi"] += lo[1]
        mem = "L1" if point["memory"] == "l1-sharded" else "DRAM"
        print(
            f"{p.label.removeprefix('resnet50/'):28s} {point['layout']!s:12s} {mem:6s} "
            f"{cyc:10.0f} {lb:10.0f} {cyc / lb:5.2f} {rep.bound:7s} {lo[1]:10.0f}"
        )
    hz = target.hardware.clock_hz
    print("-" * len(head))
    print(f"{'total':28s} {'':12s} {'':6s} {tot['best']:10.0f} {tot['lb']:10.0f} {tot['best'] / tot['lb']:5.2f} "
          f"{'':7s} {tot['lofi']:10.0f}")  # fmt: skip
    print(
        f"convs only: {tot['best'] / hz * 1e3:.3f} ms per batch at [{policy}] "
        f"({args.batch * hz / tot['best']:.0f} img/s), {tot['lofi'] / hz * 1e3:.3f} ms at LoFi "
        f"({args.batch * hz / tot['lofi']:.0f} img/s); search took {time.time() - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
