"""`python -m bench [name ...]`: run the named benchmarks (all by default), one after another."""

from __future__ import annotations

import importlib
import inspect
import sys

ALL = (
    "costmodels_overview",
    "scorer_speed",
    "executor_speed",
    "tenstorrent_resnet50",
    "mapper_quality",
    "search_strategies",
    "heldout_shapes",
    "health_latency",
    "read_path",
    "budget_overrun",
    "published_configs",
)


def main(argv: list[str]) -> None:
    for name in argv or list(ALL):
        print(f"\n===== bench.{name} =====", flush=True)
        run = importlib.import_module(f"bench.{name}").main
        # a benchmark with options runs on its defaults (not on this command's arguments, the benchmarks' names)
        run([]) if inspect.signature(run).parameters else run()


if __name__ == "__main__":
    main(sys.argv[1:])
