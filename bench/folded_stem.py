"""ResNet-50's stem on Tenstorrent, as given (7x7/s2 on 3 channels) and folded (4x4/s1 on 16), side by side.

Run with ``python -m bench.folded_stem [--batch 16] [--dtype bfloat8_b]``. For each preset
(wormhole-n150, blackhole-p150), fidelity policy (the preset's default, HiFi4 only, and LoFi) and
placement of the stem's tensors (``alone``: input read from DRAM, output written to DRAM, the cost
model's default; ``in L1``: input arriving L1-sharded, as tt-metal copies the image to the device
sharded, and output kept in L1 for the max-pool), the search prices the stem as given and folded
(`mapper.transforms.tune_both_forms`: both forms searched whole, each space enumerated, the fold op
priced on top; `mapper.search.tune` itself skips a form its bound rules out, `bench.fold_search_time`)
and answers with the cheaper; the table prints both prices and the choice, all from one run.

What-if columns (not the search's answer): the stem as given on 8 and 16 real input channels. The
cost model pads a conv's input channels as ttnn does (`costmodels.tenstorrent.shape.padded_in_channels`,
tt-metal's ``get_input_channels_alignment``: a row-major input to 8, a tiled one such as ``bfloat8_b``
to 32), so the 3-channel stem computes and moves through L1 what an 8-channel (bf16) or 32-channel
(block float) one does; a row-major input is still read from DRAM on its real 3 channels.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from costmodels.registry import get_target
from mapper.transforms import tune_both_forms
from workload import named
from workload.conv2d import as_conv2d, conv2d
from workload.problem import Problem

PRESETS = ("wormhole-n150", "blackhole-p150")
PLACEMENTS: dict[str, dict[str, Any]] = {"alone": {}, "in L1": {"input_in_l1": True, "output_in_l1": True}}


def padded(problem: Problem, channels: int) -> Problem:
    """The stem as given with its input channels padded to `channels` (what-if column)."""
    p = as_conv2d(problem)
    assert p is not None
    x, w = problem.inputs
    return conv2d(
        batch=p.batch,
        in_channels=channels,
        out_channels=p.out_channels,
        input_height=p.input_height,
        input_width=p.input_width,
        kernel=p.kernel,
        stride=p.stride,
        padding=p.padding,
        dtype=x.dtype,
        weights_dtype=w.dtype,
        out_dtype=problem.output.dtype,
    )


def us(v: float | None) -> str:
    return f"{'-':>8s}" if v is None else f"{v * 1e6:8.2f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--dtype", default="bfloat8_b", help="input dtype: bf16, bfloat8_b or bfloat4_b")
    args = ap.parse_args(argv)
    stem = named.load("resnet50", batch=args.batch, dtype=args.dtype)[0]
    t0 = time.time()
    print(f"ResNet-50 stem ({stem.label}), batch {args.batch}, {args.dtype} inputs; microseconds")
    head = (
        f"{'preset':15s} {'fidelity':8s} {'placement':9s} {'original':>8s} {'folded':>8s} {'fold op':>8s} "
        f"{'total':>8s} {'chosen':8s} {'fold/orig':>9s} {'orig c8':>8s} {'orig c16':>8s}"
    )
    print(head)
    print("-" * len(head))
    for preset in PRESETS:
        for fid in ({}, {"fidelities": ["LoFi"]}):
            for place, where in PLACEMENTS.items():
                target = get_target(preset, {**fid, **where})
                t = tune_both_forms(stem, target).transform
                assert t is not None and t.original_latency is not None and t.total_latency is not None
                what_if = [tune_both_forms(padded(stem, c), target).transform for c in (8, 16)]
                c8, c16 = (w.original_latency if w is not None else None for w in what_if)
                name = ",".join(target.hardware.fidelities)  # type: ignore[attr-defined]
                print(
                    f"{preset:15s} {name:8s} {place:9s} {us(t.original_latency)} {us(t.transformed_latency)} "
                    f"{us(t.transform_latency)} {us(t.total_latency)} {'folded' if t.chosen else 'original':8s} "
                    f"{t.total_latency / t.original_latency:9.3f} {us(c8)} {us(c16)}"
                )
    print(f"(every space enumerated whole; {time.time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
