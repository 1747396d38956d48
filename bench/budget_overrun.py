"""How far past its time budget a search returns (`python -m bench.budget_overrun`).

`SearchSettings.max_seconds` bounds a search; a target's per-problem preparation (its space, the
tables, the warm starts) is one step the mapper cannot split, so a small budget on a large space
can end late. This times `mapper.tune` (no validation) on held-out problems with awkward sizes, on
a target made fresh for each search (``get_target`` builds a new one, so the preparation is part
of the search, as in a worker's first job of a layer), at each budget of ``--budgets``, and prints
each search's wall time over its budget (the ratio) and its stop reason, then the median and worst
ratio per budget. Run: ``python -m bench.budget_overrun [--targets rngd] [--budgets 0.25,1]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from costmodels.registry import get_target
from mapper.search import tune
from mapper.settings import SearchSettings
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem


def problems() -> dict[str, Problem]:
    """Held-out problems: grouped, depthwise and strided convs, awkward GEMM and batched-matmul sizes."""
    return {
        "grouped conv i4 256@56 g32": conv2d(
            batch=1, in_channels=256, out_channels=256, input_height=56, input_width=56, kernel=3, padding=1,
            groups=32, dtype="i4",
        ),
        "depthwise conv i8 96@112": conv2d(
            batch=1, in_channels=96, out_channels=96, input_height=112, input_width=112, kernel=3, padding=1,
            groups=96, dtype="i8",
        ),
        "conv 7x7/2 3->64 224 b4": conv2d(
            batch=4, in_channels=3, out_channels=64, input_height=224, input_width=224, kernel=7, stride=2, padding=3
        ),
        "conv 3x3 61->127 29": conv2d(
            batch=2, in_channels=61, out_channels=127, input_height=29, input_width=29, kernel=3, padding=1
        ),
        "gemm 4099x131x8191": einsum("mk,nk->mn", {"m": 4099, "n": 131, "k": 8191}),
        "bmm f8 16x128x128x64": einsum("bmk,bnk->bmn", {"b": 16, "m": 128, "n": 128, "k": 64}, dtype="f8"),
    }  # fmt: skip


def wall(preset: str, problem: Problem, budget: float) -> tuple[float, str]:
    """Seconds a fresh target's search of `problem` takes with `budget` seconds, and its stop reason."""
    target = get_target(preset)
    t0 = time.perf_counter()
    r = tune(problem, target, SearchSettings(max_seconds=budget), validate=False)
    return time.perf_counter() - t0, r.stop_reason


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="rngd", help="comma-separated presets")
    ap.add_argument("--budgets", default="0.25,1", help="comma-separated search budgets in seconds")
    a = ap.parse_args(argv)
    budgets = [float(b) for b in a.budgets.split(",") if b]
    t_start = time.perf_counter()
    ratios: dict[float, list[float]] = {b: [] for b in budgets}
    head = "  ".join(f"{b:g} s: wall/budget (stop)".rjust(28) for b in budgets)
    for preset in a.targets.split(","):
        get_target(preset)  # (the preset's import and first build, outside the timings)
        print(f"{preset}: {'problem':32s}{head}")
        for name, p in problems().items():
            if get_target(preset).supports(p):
                print(f"{preset}: {name:32s}  (not supported)")
                continue
            cells = []
            for b in budgets:
                secs, reason = wall(preset, p, b)
                ratios[b].append(secs / b)
                cells.append(f"{secs:6.2f} s  x{secs / b:5.2f} ({reason})".rjust(28))
            print(f"{preset}: {name:32s}" + "  ".join(cells), flush=True)
    for b in budgets:
        rs = ratios[b]
        if rs:
            print(f"budget {b:g} s: wall/budget median x{statistics.median(rs):.2f}, worst x{max(rs):.2f} "
                  f"over {len(rs)} searches")  # fmt: skip
    print(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
