"""Check that a cost-model change kept every stored latency optimum: recompute them and compare.

`bench/optima.json` keeps, per preset and layer, the exhaustive latency optimum under the
cost-model version that computed it. A change that must not move latency (issue #15's energy
objective, for one) changes the version, so `bench.mapper_quality` would recompute the optima
rather than compare them. This script recomputes them with the current model
(`bench.mapper_quality.exhaustive`, the same enumeration) and compares each with the stored entry of
whatever version, printing per target how many layers agree exactly (latency, feasible points,
points within 1%) and the largest relative latency difference. It does not write optima.json.

Run: ``python -m bench.optima_unchanged [--targets trn2,rngd] [--quick]`` (``--quick``: every
fourth stored layer). Exit status 1 when some optimum moved.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench.mapper_quality import OPTIMA, WORKLOADS, distinct_layers, exhaustive
from costmodels.registry import get_target, target_names
from mapper.keys import problem_hash


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=",".join(target_names()))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    stored = json.loads(OPTIMA.read_text())
    layers = {problem_hash(p): p for _, p, _ in distinct_layers(WORKLOADS, quick=False)}
    moved = 0
    for preset in args.targets.split(","):
        entries = sorted((k.split("|")[1], v) for k, v in stored.items() if k.startswith(f"{preset}|"))
        entries = [e for e in entries if e[0] in layers][:: 4 if args.quick else 1]
        target = get_target(preset)
        same, worst, t0 = 0, 0.0, time.perf_counter()
        for h, old in entries:
            new = exhaustive(target, layers[h])
            keys = ("latency", "feasible", "near", "points")
            if all(new[k] == old[k] for k in keys):
                same += 1
            else:
                moved += 1
                print(f"  {preset} {old['label']}: stored {[old[k] for k in keys]} now {[new[k] for k in keys]}")
            if old["latency"] and new["latency"]:
                worst = max(worst, abs(new["latency"] / old["latency"] - 1))
        secs = time.perf_counter() - t0
        print(f"{preset}: {same}/{len(entries)} optima unchanged, largest relative latency change {worst:.2e}", end="")
        print(f" ({secs:.0f} s)")
        sys.stdout.flush()
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
