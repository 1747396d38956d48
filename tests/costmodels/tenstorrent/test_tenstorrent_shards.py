"""One shard rule for the cost model, the halo executor and the reshard price (issue #13, height-shard mismatch).

ttnn pads a height-sharded tensor's sticks to a multiple of ``cores * 32`` and gives every core an
equal, tile-high shard (tt-metal ``conv2d_utils.cpp``, ``create_sharded_memory_config_from_parallel_config``;
hardware-facts.md §4.1, Tile), so 3136 rows over 64 cores are 64-row shards on 49 busy cores. The cost
model prices that split (``pm_t``); the halo configuration the executor validates through
(`halo_config_of`) and the reshard boxes must split the same way: before, the halo split them evenly
(49 rows on each of 64 cores).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from costmodels.registry import get_target
from costmodels.tenstorrent.halo import TILE_HEIGHT, build_halo, shard_sticks
from costmodels.tenstorrent.halo_of import halo_config_of
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.reshard import shard_boxes
from costmodels.tenstorrent.shape import cdiv, halo_sticks, layout_stats, parse_layout, tt_shape
from tests.costmodels.tenstorrent.points import BASE
from workload.conv2d import as_conv2d, conv2d
from workload.problem import Problem


def test_shard_sticks_is_ttnn_tile_high_rule() -> None:
    # round_up(3136, 64 * 32) / 64 = 4096 / 64 = 64 rows per core: 3136 / 64 = 49 busy cores
    assert shard_sticks(3136, 64, 32) == 64
    assert cdiv(3136, shard_sticks(3136, 64, 32)) == 49
    assert shard_sticks(50176, 64, 32) == 800  # ResNet-50 layer1 at batch 16: 1568 tiles / 64 -> 25 tiles
    assert shard_sticks(24, 3, 1) == 8  # the document's untiled example (tenstorrent-conv2d.md, Step 3)
    assert shard_sticks(24, 3, 32) == 32  # one tile: core 0 holds everything
    with pytest.raises(ValueError, match="cores"):
        shard_sticks(10, 0, 32)
    # the cost model's per-point form (row-core counts as an array) gives the same numbers
    np.testing.assert_array_equal(shard_sticks(3136, np.array([64.0, 13.0, 1.0]), 32), [64, 256, 3136])


def test_the_worked_example_tiled_puts_everything_on_core_0() -> None:
    ex = as_conv2d(conv2d(batch=1, in_channels=6, out_channels=6, input_height=4, input_width=6, kernel=3, padding=1))
    assert ex is not None
    cfg = build_halo(ex, 3, tile=TILE_HEIGHT)
    assert [(c.out_start, c.out_end) for c in cfg.cores] == [(0, 24), (24, 24), (24, 24)]
    assert cfg.input_shards == ((0, 24), (24, 24), (24, 24)) and cfg.total_remote_sticks() == 0


L1C2 = conv2d(batch=1, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1)
CASES = [
    # (problem, layout): ResNet-50 layer1 conv2 at batch 1 over 64 rows of cores (the 49-of-64 case), a
    # stride-2 conv, block sharding, and a shape whose rows do not fill the last tile
    (L1C2, "height/64"),
    (L1C2, "height/13"),
    (conv2d(batch=2, in_channels=32, out_channels=64, input_height=28, input_width=28, kernel=3, stride=2, padding=1),
     "height/10"),
    (conv2d(batch=1, in_channels=128, out_channels=128, input_height=28, input_width=28, kernel=3, padding=1),
     "block/8x4"),
    (conv2d(batch=1, in_channels=16, out_channels=32, input_height=15, input_width=13, kernel=3, padding=1),
     "height/7"),
]  # fmt: skip


@pytest.mark.parametrize(("problem", "layout"), CASES)
def test_cost_model_and_halo_executor_split_rows_alike(problem: Problem, layout: str) -> None:
    t = get_target("wormhole-n150")
    hw = cast(TensixHardware, t.hardware)
    assert hw.tile == TILE_HEIGHT  # the executor's halo uses the preset's tile height
    shape = tt_shape(problem, hw.tile)
    stats = layout_stats(shape, hw, layout)
    point: dict[str, Any] = {**BASE, "layout": layout, "memory": "l1-sharded"}
    config, why = halo_config_of(problem, t.mapping(problem, point))
    assert config is not None, why
    parsed = parse_layout(layout)
    assert parsed is not None and config.num_cores == parsed[1]
    out_lengths = [c.out_end - c.out_start for c in config.cores]
    # the cost model's per-core height is the halo's output shard; both leave the same cores idle
    assert max(out_lengths) == stats.pm_t * hw.tile
    assert sum(n > 0 for n in out_lengths) == cdiv(shape.rows, stats.pm_t * hw.tile)
    assert sum(out_lengths) == shape.rows
    # the halo sizes the cost model prices are those of the configuration the executor runs
    conv = as_conv2d(problem)
    assert conv is not None
    assert (stats.halo_buffer_sticks, stats.halo_max_remote_sticks, stats.halo_total_remote_sticks) == (
        config.max_buffer_sticks(),
        config.max_remote_sticks(),
        config.total_remote_sticks(),
    )
    assert halo_sticks(conv, parsed[1], tile=hw.tile)[0] == config.max_buffer_sticks()
    # the reshard price splits the input sticks into the same shards as the halo's input
    boxes = shard_boxes(shape.in_sticks, shape.in_channels, f"height/{parsed[1]}", hw.cores)
    assert [int(b[1] - b[0]) for b in boxes[: parsed[1]]] == [e - s for s, e in config.input_shards]


def test_64_cores_on_3136_rows_use_49() -> None:
    p = CASES[0][0]
    t = get_target("wormhole-n150")
    config, _ = halo_config_of(p, t.mapping(p, {**BASE, "layout": "height/64"}))
    assert config is not None
    busy = [c for c in config.cores if c.out_end > c.out_start]
    assert len(busy) == 49 and all(c.out_end - c.out_start == 64 for c in busy)
