"""How long the HTML report takes beside the search it reports: `python -m bench.report_render`.

For one ResNet-50 3x3 conv (64 channels, 56x56) on each family, and for the BERT-base workload on
trn2, the search (with validation for the single problems) and the report's rendering run side by
side in this process; it prints both times and their ratio (median of 3 renders, after one warm-up
render that loads matplotlib's fonts).
"""

from __future__ import annotations

import statistics
import time

from costmodels import get_target
from mapper import SearchSettings, tune
from mapper.workloads import tune_layers
from report import tune_report, workload_report
from workload import conv2d
from workload.named import load

TARGETS = ("rngd", "trn2", "ascend-910b", "wormhole-n150")


def _median_seconds(fn: object, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    conv = conv2d(batch=1, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=(3, 3),
                  stride=(1, 1), padding=(1, 1))  # fmt: skip
    print(f"{'what':34s} {'search s':>9s} {'report s':>9s} {'report/search':>14s} {'page kB':>8s}")
    warm = True
    for name in TARGETS:
        target = get_target(name)
        t0 = time.perf_counter()
        result = tune(conv, target, SearchSettings())
        search = time.perf_counter() - t0
        if warm:
            tune_report(result, conv, target)
            warm = False
        render = _median_seconds(lambda r=result, t=target: tune_report(r, conv, t))
        kb = len(tune_report(result, conv, target)) / 1024
        print(f"{'resnet50 3x3 64@56 on ' + name:34s} {search:9.3f} {render:9.3f} {render / search:14.2f} {kb:8.0f}")
    layers = load("bert-base")
    t0 = time.perf_counter()
    wl = tune_layers(layers, "trn2", SearchSettings(), name="bert-base", workers=1, validate=False)
    search = time.perf_counter() - t0
    target = get_target("trn2")
    render = _median_seconds(lambda: workload_report(wl, layers, target))
    kb = len(workload_report(wl, layers, target)) / 1024
    print(f"{'bert-base on trn2 (no validation)':34s} {search:9.3f} {render:9.3f} {render / search:14.2f} {kb:8.0f}")


if __name__ == "__main__":
    main()
