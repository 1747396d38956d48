"""Network plans with the max pool, the residual adds and the projection shortcut's skip (issue #13), and cancel.

Small residual chains on a reduced grid so that brute force over every choice sequence (the skip
tensor carried explicitly, convs priced by the target with their real input layout) stays cheap;
DRAM is slowed so that keeping tensors in L1 changes the answer.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from costmodels.registry import get_target
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.reshard import reshard_cycles
from mapper.layout_brute import brute_force
from mapper.layout_chain import build_chain
from mapper.layout_plan import PlanCancelled, plan_layouts
from mapper.layout_prices import Prices
from mapper.layout_tables import conv_tables
from mapper.watch import Watch
from workload import dtypes
from workload.conv2d import conv2d
from workload.problem import Problem

PRESET = "wormhole-n150"


def stem(h: int, c: int) -> list[Problem]:
    """A stem conv whose output the 3x3/2 max pool halves to ``h x h``."""
    return [conv2d(batch=1, in_channels=8, out_channels=c, input_height=2 * h, input_width=2 * h, kernel=3,
                   padding=1, label="stem")]  # fmt: skip


def block(h: int, c: int, mid: int, proj: bool, name: str = "b.0") -> list[Problem]:
    """A residual block: 1x1, 3x3 and, with `proj`, a 1x1 projection shortcut from half the channels."""
    cin = c // 2 if proj else c
    ps = [
        conv2d(batch=1, in_channels=cin, out_channels=mid, input_height=h, input_width=h, kernel=1,
               label=f"{name}.conv1"),
        conv2d(batch=1, in_channels=mid, out_channels=c, input_height=h, input_width=h, kernel=3, padding=1,
               label=f"{name}.conv2"),
    ]  # fmt: skip
    if proj:
        ps.append(conv2d(batch=1, in_channels=cin, out_channels=c, input_height=h, input_width=h, kernel=1,
                         label=f"{name}.downsample"))  # fmt: skip
    return ps


SLOW = {"grid_x": 2, "grid_y": 1, "dram_gb_per_s": 8.0}
CASES: list[tuple[list[Problem], dict[str, Any]]] = [
    (stem(8, 32) + block(8, 32, 32, proj=False), SLOW),  # stem -> max pool -> identity block
    (stem(8, 32) + block(8, 64, 32, proj=True), SLOW),  # the projection reads the block input kept in L1
    (block(8, 64, 32, proj=True) + block(8, 64, 32, proj=False, name="b.1")[:1], SLOW),  # the add feeds a conv
    (stem(8, 32) + block(8, 32, 32, proj=False), {"grid_x": 2, "grid_y": 2, "dram_gb_per_s": 4.0}),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_dp_equals_brute_force_with_pool_adds_and_skip(case: int) -> None:
    problems, ov = CASES[case]
    plan = plan_layouts(problems, PRESET, ov)
    kinds = [lay.kind for lay in plan.layers]
    assert "add" in kinds  # the chain really has its network ops
    assert plan.total_seconds == pytest.approx(brute_force(problems, PRESET, ov), rel=1e-12)
    assert sum(lay.seconds for lay in plan.layers) == pytest.approx(plan.total_seconds, rel=1e-12)
    assert plan.total_seconds <= plan.greedy_seconds * (1 + 1e-12)
    assert plan.total_seconds < plan.layer_by_layer_seconds


def test_projection_and_add_read_the_skip_from_l1() -> None:
    problems, ov = CASES[1]
    plan = plan_layouts(problems, PRESET, ov)
    at = {lay.label: lay for lay in plan.layers}
    assert at["maxpool"].kind == "maxpool" and at["maxpool"].output == "l1"
    assert at["b.0.downsample"].input.startswith("skip l1")  # the block input, kept in L1 by the pool
    assert at["b.0.add"].input.startswith("l1 + skip l1")  # conv2's output, kept in L1 through the projection
    # without the network ops every edge around the pool and the add goes through DRAM, and it costs more
    bare = plan_layouts(problems, PRESET, ov, network_ops=False)
    assert all(lay.kind == "conv" for lay in bare.layers)
    assert bare.layers[1].input == "dram"  # the first block conv reads DRAM (the pool is not there)
    convs = plan.conv_seconds()
    assert convs < bare.total_seconds


def test_an_add_with_its_skip_in_another_layout_pays_the_noc_reshard() -> None:
    problems, ov = CASES[2]
    steps = build_chain(problems)
    i = next(k for k, s in enumerate(steps) if s.mode == "close")  # b.0's add, which b.1 reads
    assert steps[i].out_l1
    target = get_target(PRESET, ov)
    hw = cast(TensixHardware, target.hardware)
    tables = conv_tables(steps, PRESET, ov, get_target, hw.cores)
    prices = Prices(steps, tables, target, [0] * len(steps))
    a, b = prices.index["height/2"], prices.index["height/1"]
    G, Gc, U = prices.options(i, np.array([a]), np.array([b]))
    same, _, U_same = prices.options(i, np.array([a]), np.array([a]))
    col = list(U).index(a)  # output kept in L1 in the chain operand's layout
    op = steps[i].item
    n, h, w, c = op.dims  # type: ignore[union-attr]
    nbytes = dtypes.info(op.dtype).bytes  # type: ignore[union-attr]  # f32: conv2d's default output
    move = reshard_cycles(n * h * w, c, nbytes, "height/1", "height/2", hw) / hw.clock_hz
    assert move > 0
    assert G[0, 0, col] == pytest.approx(same[0, 0, list(U_same).index(a)] + move)
    d = prices.detail(i, a, b, int(Gc[0, 0, col]))
    assert d.reshard_seconds == pytest.approx(move) and "from height/1" in d.input


def test_plan_reports_progress_and_stops_when_cancelled() -> None:
    problems, ov = CASES[1]
    seen: list[tuple[int, int]] = []
    units: list[str] = []

    def progress(done: int, total: int, best: float | None) -> None:
        seen.append((done, total))
        units.append(full.unit)

    full = Watch(progress=progress)
    plan = plan_layouts(problems, PRESET, ov, watch=full)
    convs, steps = len(problems), len(plan.layers)
    assert steps == convs + 2  # the max pool and the add
    # one report per conv table, then one per DP step
    assert seen == [(k, convs) for k in range(1, convs + 1)] + [(k, steps) for k in range(1, steps + 1)]
    assert units == ["plan layers"] * convs + ["plan steps"] * steps
    calls = {"n": 0}

    def cancel_after_two() -> bool:
        calls["n"] += 1
        return len(seen2) >= 2  # cancelled mid-plan: after the second table

    seen2: list[int] = []
    watch = Watch(progress=lambda done, total, best: seen2.append(done), cancel=cancel_after_two)
    with pytest.raises(PlanCancelled):
        plan_layouts(problems, PRESET, ov, watch=watch)
    assert seen2 == [1, 2]  # it stopped before the third table
    assert calls["n"] > 2


def test_a_cancelled_plan_leaves_the_workload_incomplete() -> None:
    from mapper.settings import SearchSettings
    from mapper.workloads import tune_layers

    problems, ov = CASES[0]
    state = {"planning": False}

    def progress(done: int, total: int, best: float | None) -> None:
        if watch.unit == "plan layers":
            state["planning"] = True

    watch = Watch(progress=progress, cancel=lambda: state["planning"])
    w = tune_layers(problems, PRESET, SearchSettings(), overrides=ov, workers=1, validate=False, watch=watch)
    assert state["planning"]  # the layers were searched, then the plan started and was cancelled
    assert all(lay.stop_reason != "cancelled" for lay in w.layers)
    assert w.network is None and not w.complete
