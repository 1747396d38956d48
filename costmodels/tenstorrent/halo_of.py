"""The halo configuration a Tenstorrent mapping runs from (what the executor validates it through).

The cost model prices an L1-sharded conv on the conv path (`shape.tt_shape`: not a 1x1, stride-1,
unpadded, ungrouped conv) with the halo of its output rows sharded over the layout's ``R`` row
cores (`shape.layout_stats` calls `shape.halo_sticks(conv, r)`, the closed form of
`halo.build_halo(conv, r)`), both in ttnn's tile-high shards (`halo.shard_sticks`). Block sharding
gives each of the ``C`` channel columns of a core row the same rows (hardware-facts.md §4.2 step 5:
BS), so the row halo is the same for every column; width sharding (``R = 1``) is the one-core halo.
`halo_config_of` returns that configuration, or why the mapping runs without one: a DRAM-interleaved
conv reads its im2col windows straight from DRAM (`tenstorrent.cost` module docstring), and the
matmul special case has no halo at all.
"""

from __future__ import annotations

from costmodels.ir import Mapping
from costmodels.tenstorrent.cost import MEMORIES
from costmodels.tenstorrent.halo import TILE_HEIGHT, HaloConfig, build_halo
from costmodels.tenstorrent.shape import parse_layout
from workload.conv2d import as_conv2d
from workload.problem import Problem


def halo_config_of(problem: Problem, mapping: Mapping) -> tuple[HaloConfig | None, str]:
    """(halo configuration of `mapping`, "") or (None, why it runs without one).

    A mapping is recognised as Tenstorrent's by its ``layout`` and ``memory`` knobs (what
    `tenstorrent.mapping.build_mapping` records).
    """
    layout, memory = mapping.knobs.get("layout"), mapping.knobs.get("memory")
    if layout is None or memory not in MEMORIES:
        return None, "not a Tenstorrent mapping (no layout/memory knobs)"
    params = as_conv2d(problem)
    if params is None:
        return None, "not a conv2d: the matmul path has no halo"
    if params.is_matmul():
        return None, "a 1x1, stride-1, unpadded conv runs as a matmul (no halo)"
    if memory != "l1-sharded":
        return None, f"{memory}: the conv reads its im2col windows from DRAM (no halo)"
    parsed = parse_layout(str(layout))
    if parsed is None or parsed[1] < 1:
        return None, f"layout {layout!r} is not height/R, block/RxC or width/C"
    return build_halo(params, parsed[1], tile=TILE_HEIGHT), ""
