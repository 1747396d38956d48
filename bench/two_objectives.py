"""Two objectives against one, this tree beside another, layer by layer (issue #12: at most 3x).

The layers are `bench.search_strategies`' (each target's two largest spaces among ResNet-50,
BERT-base, Llama-7B decode and prefill). For each, a fresh process per tree builds the per-problem
tables untimed (one best-first run), then times ``auto`` with one objective (latency) and with two
(latency, offchip_bytes, or `--second`), best of two runs each (the machine is shared), with a 7.5 s budget (25
x 0.3 s, as `bench.search_strategies` gives them; ``--budget`` changes it) and no validation. It
prints both trees' times and ratios side by side, the two-objective front's size, whether it was proven exact and, when
not, how many structures were left unexplored at the budget and how close the front is proven to be (the certificate's
``front_gap``: every point of the space has a front point at most 1 + gap times it on both objectives), and how many
were scored (the certificate's counts); the trees run alternately per layer so load drifts reach both alike.
``--before`` names the other tree's root (a checkout of the code before; omitted: this tree only).
Run: ``python -m bench.two_objectives [--before ../main] [--targets rngd,trn2] [--layers 2] [--budget 7.5]
[--second energy]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: the start of a measurement run in another tree's process: only APIs both trees have; `timed` is the best of
#: two runs of ``auto`` on `objs` (seconds) and the last run's result
TIMED = """
import json, sys, time
from costmodels.registry import get_target
from bench.search_strategies import largest_layers
from mapper.search import tune
from mapper.settings import SearchSettings
def timed(problem, target, objs, budget):
    best = None
    for _ in range(2):
        t0 = time.perf_counter()
        r = tune(problem, target, SearchSettings(objectives=objs, max_seconds=budget), validate=False)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best, r
"""

#: run in a fresh process with the tree's root first on the path
MEASURE = (
    TIMED
    + """
preset, index, layers, budget, second = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
target = get_target(preset)
problem = largest_layers(target, layers)[index]
tune(problem, target, SearchSettings(strategy="bestfirst", max_seconds=600), validate=False)  # tables, untimed
out = {"label": problem.label or problem.summary()[:30]}
for name, objs in (("one", ("latency",)), ("two", ("latency", second))):
    best, r = timed(problem, target, objs, budget)
    out[name] = best
    if name == "two":
        out["front"] = len(r.pareto)
        out["proven"] = bool(r.proven_optimal)
        out["strategy"] = r.strategy
        out["left"] = None if r.certificate is None else r.certificate.unexplored
        out["scored"] = None if r.certificate is None else r.certificate.scored
        out["gap"] = getattr(r.certificate, "front_gap", None)  # (a tree before the field: None)
print(json.dumps(out))
"""
)


def measure(
    root: Path, preset: str, index: int, layers: int, budget: float = 7.5, second: str = "offchip_bytes"
) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    res = subprocess.run(
        [sys.executable, "-c", MEASURE, preset, str(index), str(layers), str(budget), second],
        cwd=root, env=env, capture_output=True, text=True, check=True, timeout=900,
    )  # fmt: skip
    return json.loads(res.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="", help="root of the tree to compare with (omitted: this tree only)")
    ap.add_argument("--targets", default="", help="comma list of presets (default: all)")
    ap.add_argument("--layers", type=int, default=2, help="largest-space layers per target")
    ap.add_argument("--budget", type=float, default=7.5, help="seconds per search (default 7.5: 25 x 0.3 s)")
    ap.add_argument("--second", default="offchip_bytes", help="the second objective beside latency")
    a = ap.parse_args(argv)
    from costmodels.registry import target_names

    here = Path(__file__).resolve().parent.parent
    trees = {"after": here, **({"before": Path(a.before).resolve()} if a.before else {})}
    presets = [t for t in a.targets.split(",") if t] or target_names()
    t_start = time.perf_counter()
    ratios: dict[str, list[float]] = {k: [] for k in trees}
    head = " | ".join(
        f"{k:>6s}: one ms   two ms  ratio front proven  unexplored   scored front gap" for k in reversed(trees)
    )
    print(f"{'target':15s} {'layer':30s} {head}", flush=True)
    for preset in presets:
        for index in range(a.layers):
            row: dict[str, dict[str, object]] = {}
            order = list(trees) if index % 2 else list(reversed(trees))  # alternate which tree runs first
            for name in order:
                row[name] = measure(trees[name], preset, index, a.layers, a.budget, a.second)
            cells = []
            for name in reversed(trees):
                m = row[name]
                one, two = float(m["one"]), float(m["two"])  # type: ignore[arg-type]
                ratios[name].append(two / one)
                cells.append(
                    f"{one * 1e3:14.1f} {two * 1e3:8.1f} x{two / one:5.2f} {m['front']:>5} "
                    f"{'yes' if m['proven'] else 'NO':>6s} {m.get('left') if m.get('left') is not None else '-':>11}"
                    f" {m.get('scored') if m.get('scored') is not None else '-':>8}"
                    f" {'-' if m.get('gap') is None else format(float(m['gap']), '.2%'):>9}"  # type: ignore[arg-type]
                )
            label = str(next(iter(row.values()))["label"])[:30]
            print(f"{preset:15s} {label:30s} " + " | ".join(cells), flush=True)
    for name in reversed(trees):
        r = ratios[name]
        print(f"{name}: worst x{max(r):.2f}, median x{statistics.median(r):.2f} over {len(r)} layers")
    print(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
