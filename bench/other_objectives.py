"""Objectives other than latency, alone and in pairs without latency, this tree beside another (issue #12).

One objective other than latency (off-chip bytes, energy, footprint) is bounded cell by cell where the target
has cells (`mapper.strategies.bestfirst`), and pairs without latency take the latency-bound order and the
dominance pass on Trainium (`mapper.strategies.front_pass`). For each target's two largest layers
(`bench.search_strategies.largest_layers`), a fresh process per tree builds the tables untimed (one best-first
run), then times ``auto`` on each objective set with a budget (default 20 s, the default search's), best of two
runs, and prints the time, whether the answer was proven over the whole space, the best value (one objective) or
the front's size (two), and the structures the certificate leaves unexplored. The trees run alternately per
layer. Run: ``python -m bench.other_objectives [--before <tree>] [--targets trn1,rngd] [--budget 20]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.two_objectives import TIMED

SETS = ("offchip_bytes", "energy", "footprint", "energy+footprint", "offchip_bytes+footprint")

#: run in a fresh process with the tree's root first on the path (`TIMED`: only APIs both trees have)
MEASURE = (
    TIMED
    + """
preset, index, budget, sets = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4].split(",")
target = get_target(preset)
problem = largest_layers(target, 2)[index]
tune(problem, target, SearchSettings(strategy="bestfirst", max_seconds=600), validate=False)  # tables, untimed
out = {"label": problem.label, "rows": {}}
for name in sets:
    objs = tuple(name.split("+"))
    best, r = timed(problem, target, objs, budget)
    cert = r.certificate
    out["rows"][name] = {
        "seconds": best, "proven": bool(r.proven_optimal),
        "value": r.values.get(objs[0]) if len(objs) == 1 else None, "front": len(r.pareto),
        "left": None if cert is None else cert.unexplored,
    }
print(json.dumps(out))
"""
)


def measure(root: Path, preset: str, index: int, budget: float, sets: list[str]) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    res = subprocess.run(
        [sys.executable, "-c", MEASURE, preset, str(index), str(budget), ",".join(sets)],
        cwd=root, env=env, capture_output=True, text=True, check=True, timeout=3600,
    )  # fmt: skip
    return json.loads(res.stdout.strip().splitlines()[-1])


def cell(row: dict[str, object]) -> str:
    what = f"{row['value']:.6g}" if row["value"] is not None else f"{row['front']} points"
    left = row["left"] if row["left"] else 0
    seconds = float(row["seconds"])  # type: ignore[arg-type]
    return f"{seconds * 1e3:9.1f} ms {'proven' if row['proven'] else 'NOT proven':>10s} {what:>14s} {left:>9}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="", help="root of the tree to compare with (omitted: this tree only)")
    ap.add_argument("--targets", default="rngd,trn1,trn2,ascend-910b,ascend-a5", help="comma list of presets")
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per search")
    ap.add_argument("--sets", default=",".join(SETS), help="objective sets, comma separated, '+' within a set")
    a = ap.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    trees = {"after": here, **({"before": Path(a.before).resolve()} if a.before else {})}
    sets = [x for x in a.sets.split(",") if x]
    t_start = time.perf_counter()
    head = " | ".join(f"{k:>6s}: time, proven, best or front, unexplored" for k in reversed(trees))
    print(f"{'target':12s} {'layer':30s} {'objectives':24s} {head}", flush=True)
    for preset in [t for t in a.targets.split(",") if t]:
        for index in range(2):
            order = list(trees) if index % 2 else list(reversed(trees))  # alternate which tree runs first
            got = {name: measure(trees[name], preset, index, a.budget, sets) for name in order}
            label = str(got["after"]["label"])[:30]
            for s in sets:
                cells = " | ".join(cell(got[name]["rows"][s]) for name in reversed(trees))  # type: ignore[index]
                print(f"{preset:12s} {label:30s} {s:24s} {cells}", flush=True)
    print(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
