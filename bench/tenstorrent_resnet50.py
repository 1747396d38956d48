"""Cheapest Tensix mapping of every ResNet-50 conv on wormhole-n150 (batch 16, bf16), next to the roofline.

Run with ``python -m bench.tenstorrent_resnet50``. Every point of each layer's space is priced with
`score_batch` (exhaustive). Columns: the cheapest layout and its math fidelity, its cycles, the
roofline lower bound (all cores at LoFi, DRAM bandwidth for the minimum bytes), the ratio, the
bound of the chosen mapping, and the cheapest mapping at HiFi4 (the ttnn default fidelity).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from costmodels.protocol import Choice
from costmodels.tenstorrent import TenstorrentTarget, make_target
from workload import named
from workload.problem import Problem


def best(
    target: TenstorrentTarget, problem: Problem, fidelity: str | None = None
) -> tuple[dict[str, Choice], float] | None:
    """The cheapest feasible point (optionally at one fidelity) and its cycles."""
    cols = target.space(problem).columns()
    lat = target.score_batch(problem, cols).objectives["latency"].copy()
    if fidelity is not None:
        lat[np.asarray(cols["math_fidelity"]).astype(str) != fidelity] = np.inf
    i = int(np.argmin(lat))
    if not np.isfinite(lat[i]):
        return None
    point = {k: (v[i].item() if isinstance(v[i], np.generic) else v[i]) for k, v in cols.items()}
    return point, float(lat[i]) * target.hardware.clock_hz


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="wormhole-n150")
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args(argv)
    target = make_target(args.preset, {})
    problems = named.load("resnet50", batch=args.batch, dtype="bf16")
    t0 = time.time()
    head = f"{'layer':28s} {'layout':12s} {'fid':5s} {'cycles':>10s} {'bound':>10s} {'x':>5s} {'by':7s} {'HiFi4':>10s}"
    print(f"{args.preset}, ResNet-50 batch {args.batch}, bf16")
    print(head)
    print("-" * len(head))
    tot = {"best": 0.0, "lb": 0.0, "hifi4": 0.0}
    for p in problems:
        lb = target.lower_bound(p).cycles
        found, hi = best(target, p), best(target, p, "HiFi4")
        if found is None or hi is None:
            print(f"{p.label:28s} no feasible mapping")
            continue
        point, cyc = found
        rep = target.cost(p, target.mapping(p, point))
        tot["best"] += cyc
        tot["lb"] += lb
        tot["hifi4"] += hi[1]
        print(
            f"{p.label.removeprefix('resnet50/'):28s} {point['layout']!s:12s} {point['math_fidelity']!s:5s} "
            f"{cyc:10.0f} {lb:10.0f} {cyc / lb:5.2f} {rep.bound:7s} {hi[1]:10.0f}"
        )
    hz = target.hardware.clock_hz
    print("-" * len(head))
    print(f"{'total':28s} {'':12s} {'':5s} {tot['best']:10.0f} {tot['lb']:10.0f} {tot['best'] / tot['lb']:5.2f} "
          f"{'':7s} {tot['hifi4']:10.0f}")  # fmt: skip
    print(
        f"convs only: {tot['best'] / hz * 1e3:.3f} ms per batch at the cheapest fidelity "
        f"({args.batch * hz / tot['best']:.0f} img/s), {tot['hifi4'] / hz * 1e3:.3f} ms at HiFi4 "
        f"({args.batch * hz / tot['hifi4']:.0f} img/s); search took {time.time() - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
