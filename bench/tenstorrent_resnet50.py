"""Cheapest Tensix mapping of every ResNet-50 conv (batch 16), next to the roofline, then the network.

Run with ``python -m bench.tenstorrent_resnet50 [--preset wormhole-n150] [--dtype bfloat8_b]``
(inputs bf16 by default; ``bfloat8_b`` and ``bfloat4_b`` are tt-metal's block-float formats, and
issue #13's figure asks for the first). Every point of each layer's space is priced with
`score_codes` (exhaustive, in chunks). First table, each layer alone
(input read from DRAM, output written to DRAM): the layout and memory placement the tie rule picks
(`mapper.ties`: within 0.5% of the fastest, less data moved, then fewer cores) at the preset's
default fidelity policy (HiFi4 only, ttnn's default), its cycles, the roofline lower bound at that
policy, the ratio and the stage that bounds the mapping, the number of strategies in the tie; then,
as a side column, the cheapest cycles when the fidelity policy is overridden to LoFi (fewer
mantissa bits: not numerically equivalent for bf16).

Second table, the network (`mapper.layout_plan`, issue #13): each strided conv in the form the
search chooses for it (folded or as given, `mapper.layout_forms`; the ``form`` column, a folded
conv's time including the fold op), every step's layout chosen jointly
with activations kept in L1 between chained steps, reshards and spills, per step: the convs and,
put back between them (`workload.network_ops`), the stem's max pool and each block's residual add
(priced on the Tensix cores, `costmodels.tenstorrent.eltwise`; the add names where its skip
operand comes from). Then the totals side by side in one run: joint, layer by layer in L1 (greedy),
each step alone (DRAM in and out), the joint plan's time in the convs and in the other steps, the
reshards, the edges through DRAM and the plan's wall time; at the default policy and at LoFi; and
the convs-only plan (max pool and adds left out, their edges through DRAM) for comparison. The
published figure beside them is tt-metal's ResNet-50 demo on an n150 at batch 16, about 4,700
images/s end to end (hardware-facts.md §4.1, ResNet-50 (Wormhole) row; includes host time and
every op, so it is a reference point, not a like-for-like figure).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from costmodels.protocol import Choice
from costmodels.tenstorrent.target import TenstorrentTarget, make_target
from mapper.enumerate import ChunkPlan
from mapper.layout_plan import NetworkPlan, plan_layouts
from mapper.ties import strategy_ties
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


#: hardware-facts.md §4.1, ResNet-50 (Wormhole) row: tt-metal models/demos/wormhole/resnet50/README.md, n150 batch 16
PUBLISHED_FPS = 4700


def show_plan(plan: NetworkPlan, hz: float) -> None:
    """The joint plan, one row per layer."""
    head = (
        f"{'step':28s} {'kind':7s} {'form':8s} {'layout':11s} {'memory':6s} {'input':30s} {'out':4s} {'us':>8s} "
        f"{'reshard':>8s} {'alone':>8s}"
    )
    print(head)
    print("-" * len(head))
    for lay in plan.layers:
        mem = "L1" if lay.memory == "l1-sharded" else "DRAM"
        rs = f"{lay.reshard_seconds * 1e6:8.2f}" if lay.reshard_seconds else f"{'':8s}"
        print(
            f"{lay.label.removeprefix('resnet50/'):28s} {lay.kind:7s} {lay.form:8s} {lay.layout:11s} {mem:6s} "
            f"{lay.input:30s} {lay.output:4s} "
            f"{lay.seconds * 1e6:8.2f} {rs} {lay.alone_seconds * 1e6:8.2f}"
        )


def stem_answer(stem: Problem, target: Any) -> None:
    """The stem as the search answers it, both forms searched whole (`mapper.transforms.tune_both_forms`)."""
    from mapper.transforms import tune_both_forms

    t = tune_both_forms(stem, target).transform
    if t is None or t.original_latency is None or t.total_latency is None:
        return
    print(
        f"stem as the search answers it (fold offered): {'folded' if t.chosen else 'as given'}; as given "
        f"{t.original_latency * 1e6:.2f} us, folded {t.total_latency * 1e6:.2f} us (conv "
        f"{(t.transformed_latency or 0.0) * 1e6:.2f} + fold op {(t.transform_latency or 0.0) * 1e6:.2f}); "
        "the first table keeps every conv as given, the plans below take each strided conv's chosen form"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="wormhole-n150")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument(
        "--dtype", default="bf16", help="input dtype of every conv: bf16, or bfloat8_b / bfloat4_b (block floats)"
    )
    args = ap.parse_args(argv)
    target = make_target(args.preset, {})
    lofi = make_target(args.preset, {"fidelities": ["LoFi"]})
    problems = named.load("resnet50", batch=args.batch, dtype=args.dtype)
    t0 = time.time()
    policy = ",".join(target.hardware.fidelities)
    head = (
        f"{'layer':28s} {'layout':12s} {'memory':6s} {'cycles':>10s} {'bound':>10s} {'x':>5s} {'by':7s} {'tie':>4s} "
        f"{'LoFi':>10s}"
    )
    print(
        f"{args.preset}, ResNet-50 batch {args.batch}, {args.dtype} inputs; "
        f"fidelity policy [{policy}], LoFi as a side column"
    )
    print(head)
    print("-" * len(head))
    tot = {"best": 0.0, "lb": 0.0, "lofi": 0.0}
    for p in problems:
        lb = target.lower_bound(p).cycles
        found, lo = best(target, p), best(lofi, p)
        if found is None or lo is None:
            print(f"{p.label:28s} no feasible mapping")
            continue
        ties = strategy_ties(p, target, target.space(p))
        point, cyc = ties[0].point, ties[0].latency * target.hardware.clock_hz
        rep = target.cost(p, target.mapping(p, point))
        tot["best"] += cyc
        tot["lb"] += lb
        tot["lofi"] += lo[1]
        mem = "L1" if point["memory"] == "l1-sharded" else "DRAM"
        print(
            f"{p.label.removeprefix('resnet50/'):28s} {point['layout']!s:12s} {mem:6s} "
            f"{cyc:10.0f} {lb:10.0f} {cyc / lb:5.2f} {rep.bound:7s} {len(ties):4d} {lo[1]:10.0f}"
        )
    hz = target.hardware.clock_hz
    print("-" * len(head))
    print(f"{'total':28s} {'':12s} {'':6s} {tot['best']:10.0f} {tot['lb']:10.0f} {tot['best'] / tot['lb']:5.2f} "
          f"{'':7s} {'':4s} {tot['lofi']:10.0f}")  # fmt: skip
    print(
        f"convs only: {tot['best'] / hz * 1e3:.3f} ms per batch at [{policy}] "
        f"({args.batch * hz / tot['best']:.0f} img/s), {tot['lofi'] / hz * 1e3:.3f} ms at LoFi "
        f"({args.batch * hz / tot['lofi']:.0f} img/s); search took {time.time() - t0:.1f} s"
    )
    stem_answer(problems[0], target)
    print()
    plans: dict[str, tuple[NetworkPlan, float]] = {}
    for name, ov, ops in (
        (policy, {}, True),
        ("LoFi", {"fidelities": ["LoFi"]}, True),
        (f"{policy} convs only", {}, False),
        ("LoFi convs only", {"fidelities": ["LoFi"]}, False),
    ):
        t1 = time.time()
        plans[name] = (plan_layouts(problems, args.preset, ov, network_ops=ops), time.time() - t1)
    print(f"network, layouts chosen jointly at [{policy}] (activations kept in L1 between chained steps):")
    show_plan(plans[policy][0], hz)
    print()
    print(
        f"{'policy':18s} {'joint ms':>9s} {'greedy ms':>10s} {'alone ms':>9s} {'joint/alone':>11s} {'convs ms':>9s} "
        f"{'pool+add':>9s} {'img/s joint':>11s} {'reshards':>8s} {'via DRAM':>8s} {'plan s':>7s}"
    )
    for name, (plan, secs) in plans.items():
        convs = plan.conv_seconds()
        print(
            f"{name:18s} {plan.total_seconds * 1e3:9.3f} {plan.greedy_seconds * 1e3:10.3f} "
            f"{plan.layer_by_layer_seconds * 1e3:9.3f} {plan.total_seconds / plan.layer_by_layer_seconds:11.3f} "
            f"{convs * 1e3:9.3f} {(plan.total_seconds - convs) * 1e3:9.3f} "
            f"{args.batch / plan.total_seconds:11.0f} {plan.reshards:8d} {plan.spilled_edges:8d} {secs:7.1f}"
            f"  folded: {', '.join(x.removeprefix('resnet50/') for x in plan.folded()) or '-'}"
        )
    print(
        f"published (hardware-facts.md §4.1): tt-metal ResNet-50 on n150, batch 16, about {PUBLISHED_FPS} img/s end "
        f"to end ({args.batch / PUBLISHED_FPS * 1e3:.2f} ms per batch, host and every op included; the plans "
        f"above price the convs, the max pool and the adds, not the avg pool, the fc or the host)"
    )


if __name__ == "__main__":
    main()
