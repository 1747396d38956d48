"""Whole-network layout choice on Tenstorrent (issue #13): the DP against brute force, reshards, spills, residuals.

Small chains on a reduced grid (``grid_x``/``grid_y`` overrides) so that brute force over every
layout sequence stays cheap; ``dram_gb_per_s`` is lowered in some cases so that DRAM traffic
matters and keeping activations in L1 changes the answer.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from costmodels.registry import get_target
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.reshard import reshard_cycles
from mapper.layout_brute import brute_force
from mapper.layout_chain import build_chain
from mapper.layout_plan import plan_layouts
from workload import named
from workload.conv2d import conv2d
from workload.network_ops import NetworkOp
from workload.problem import Problem


def block(h: int, ci: int, co: int, stride: int = 2) -> list[Problem]:
    """A bottleneck-like chain: 1x1, 3x3 (stride), 1x1."""
    ho = (h + 2 - 3) // stride + 1
    return [
        conv2d(batch=2, in_channels=ci, out_channels=64, input_height=h, input_width=h, kernel=1, label="b.0.conv1"),
        conv2d(
            batch=2,
            in_channels=64,
            out_channels=64,
            input_height=h,
            input_width=h,
            kernel=3,
            padding=1,
            stride=stride,
            label="b.0.conv2",
        ),
        conv2d(batch=2, in_channels=64, out_channels=co, input_height=ho, input_width=ho, kernel=1, label="b.0.conv3"),
    ]


SMALL = {"grid_x": 4, "grid_y": 2}
CASES: list[tuple[list[Problem], dict[str, Any]]] = [
    (block(12, 32, 64), {**SMALL, "dram_gb_per_s": 8.0}),  # the optimum reshards once (height -> block)
    (block(28, 256, 512), {**SMALL, "dram_gb_per_s": 40.0}),
    (block(14, 256, 64, stride=1), {"grid_x": 2, "grid_y": 2}),  # full DRAM bandwidth
    (block(28, 64, 256), {**SMALL, "dram_gb_per_s": 8.0, "l1_kib": 200}),  # little L1: spills
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_dp_equals_brute_force_over_every_layout_sequence(case: int) -> None:
    problems, ov = CASES[case]
    plan = plan_layouts(problems, "wormhole-n150", ov)
    assert plan.total_seconds == pytest.approx(brute_force(problems, "wormhole-n150", ov), rel=1e-12)
    # the per-layer rows add up to the total, and the joint choice is never worse than choosing layer by layer
    assert sum(lay.seconds for lay in plan.layers) == pytest.approx(plan.total_seconds, rel=1e-12)
    assert plan.total_seconds <= plan.greedy_seconds * (1 + 1e-12)
    assert plan.total_seconds <= plan.layer_by_layer_seconds * (1 + 1e-12)


def test_a_reshard_is_chosen_and_priced_from_the_noc() -> None:
    problems, ov = CASES[0]
    plan = plan_layouts(problems, "wormhole-n150", ov)
    assert plan.reshards == 1
    (lay,) = [lay for lay in plan.layers if lay.reshard_seconds > 0]
    assert lay.input.startswith("l1 from ")
    src = lay.input.removeprefix("l1 from ")
    hw = cast(TensixHardware, get_target("wormhole-n150", ov).hardware)
    p = problems[lay.index]
    # the input of conv2: 2 x 12 x 12 sticks of 64 bf16 channels
    expected = reshard_cycles(2 * 12 * 12, 64, 2, src, lay.layout, hw) / hw.clock_hz
    assert lay.reshard_seconds == pytest.approx(expected)
    assert p.label == "b.0.conv2"
    # and it pays: the joint plan beats keeping each layer's own choice
    assert plan.total_seconds < plan.layer_by_layer_seconds


def test_activations_stay_in_l1_when_dram_is_slow() -> None:
    plan = plan_layouts(*CASES[1][:1], "wormhole-n150", CASES[1][1])
    assert [lay.output for lay in plan.layers] == ["l1", "l1", "dram"]  # the last layer's output leaves the chain
    assert plan.spilled_edges == 0
    assert plan.total_seconds < plan.layer_by_layer_seconds


def test_spill_when_l1_is_too_small() -> None:
    problems, ov = CASES[3]
    roomy = plan_layouts(problems, "wormhole-n150", {k: v for k, v in ov.items() if k != "l1_kib"})
    tight = plan_layouts(problems, "wormhole-n150", ov)
    assert roomy.spilled_edges == 0
    assert tight.spilled_edges >= 1
    assert tight.total_seconds > roomy.total_seconds


def test_resnet_chain_edges_residual_liveness_and_network_ops() -> None:
    ps = named.load("resnet50", batch=1, dtype="bf16")
    steps = build_chain(ps)
    at = {s.label.removeprefix("resnet50/"): s for s in steps}
    assert len(steps) == 53 + 1 + 16  # the convs, the stem's max pool and one add per bottleneck block
    assert [s.label.removeprefix("resnet50/") for s in steps[:3]] == ["conv1", "maxpool", "layer1.0.conv1"]
    pool = at["maxpool"].item
    assert isinstance(pool, NetworkOp)
    assert (pool.kind, pool.dims, pool.out_dims, pool.kernel, pool.stride) == ("maxpool", (1, 112, 112, 64),
                                                                              (1, 56, 56, 64), 3, 2)  # fmt: skip
    assert at["maxpool"].chained and at["layer1.0.conv1"].chained  # the pool links the stem to the first block
    assert at["layer1.0.conv2"].chained and at["layer1.0.conv3"].chained
    assert not at["layer1.0.downsample"].chained  # reads the block input: the skip
    assert [at[f"layer1.0.{x}"].mode for x in ("conv1", "conv2", "conv3", "downsample", "add")] == [
        "open", "keep", "keep", "swap", "close"
    ]  # fmt: skip
    assert at["layer1.0.conv3"].out_l1  # its output may stay in L1 through the projection, for the add
    assert [at[f"layer1.1.{x}"].mode for x in ("conv1", "conv2", "conv3", "add")] == ["open", "keep", "keep", "close"]
    assert at["layer1.0.add"].chained and at["layer1.1.conv1"].chained  # the add's output feeds the next block
    assert not at["layer4.2.add"].out_l1  # the last step writes DRAM
    block_in = 56 * 56 * 64 * 2  # the block input, bf16, kept for the skip connection
    assert at["layer1.0.conv1"].live_bytes == 0  # it is the layer's own input
    assert at["layer1.0.conv2"].live_bytes == block_in
    # the projection shortcut reads the block input itself, and keeps conv3's output alive for the add
    # (bf16: a named workload's out_dtype defaults to its dtype)
    assert at["layer1.0.downsample"].live_bytes == 56 * 56 * 256 * 2
    assert at["layer1.1.conv2"].live_bytes == 56 * 56 * 256 * 2
    # without the network ops the convs alone: the pool's and the adds' edges go through DRAM
    bare = {s.label.removeprefix("resnet50/"): s for s in build_chain(ps, network_ops=False)}
    assert not bare["layer1.0.conv1"].chained and bare["layer1.0.conv1"].mode == "keep"


def test_workload_result_carries_the_plan_and_the_cli_table_shows_it() -> None:
    from rich.console import Console

    from mapper.display import show_workload
    from mapper.settings import SearchSettings
    from mapper.workloads import tune_layers

    problems, ov = CASES[0]
    w = tune_layers(problems, "wormhole-n150", SearchSettings(), overrides=ov, workers=1, validate=False)
    assert w.network is not None
    # the plan's layer-by-layer figure is the sum of the mapper's own per-layer optima (searched independently)
    assert w.total_value is not None
    assert w.network.layer_by_layer_seconds == pytest.approx(w.total_value, rel=1e-12)
    assert w.network.total_seconds == pytest.approx(plan_layouts(problems, "wormhole-n150", ov).total_seconds)
    console = Console(record=True, width=240)
    show_workload(console, w)
    text = console.export_text()
    assert "layouts chosen jointly" in text
    for lay in w.network.layers:
        assert lay.layout in text
    assert "l1 from" in text  # the reshard row
    off = tune_layers(problems, "wormhole-n150", SearchSettings(), overrides=ov, workers=1, validate=False,
                      plan_network=False)  # fmt: skip
    assert off.network is None


def test_no_plan_when_a_layer_has_no_feasible_mapping() -> None:
    from mapper.settings import SearchSettings
    from mapper.workloads import tune_layers

    problems, _ = CASES[2]
    tiny = {"grid_x": 2, "grid_y": 2, "l1_kib": 100, "l1_reserved_kib": 96}  # 4 KiB free: nothing fits
    w = tune_layers(problems, "wormhole-n150", SearchSettings(), overrides=tiny, workers=1, validate=False)
    assert w.total_value is None and w.network is None
    with pytest.raises(ValueError, match="no feasible mapping"):
        plan_layouts(problems, "wormhole-n150", tiny)
