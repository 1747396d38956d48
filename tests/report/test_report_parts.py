"""The report's pure parts: the Tenstorrent core grid, the memory table, the SVG clean-up, the nest tiles."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels import get_target
from costmodels.ir import Level, Loop, Mapping
from costmodels.tenstorrent.hardware import TensixHardware
from report.core_grid import core_grid
from report.nest import nest_levels
from report.residency import residency
from report.svg import new_figure, svg_text
from workload import conv2d, einsum

CONV = conv2d(batch=1, in_channels=96, out_channels=96, input_height=14, input_width=14, kernel=(3, 3),
              stride=(1, 1), padding=(1, 1))  # fmt: skip


def _hw() -> TensixHardware:
    hw = get_target("wormhole-n150").hardware
    assert isinstance(hw, TensixHardware)
    return hw


@pytest.mark.parametrize("layout", ["height/7", "height/5", "block/3x2", "block/7x3", "width/3", "width/2"])
def test_the_cores_shards_cover_the_output_exactly_once(layout: str) -> None:
    # tenstorrent-conv2d.md "Sharding": height H/p, width W/p, block H/m x W/n of the GEMM view's output
    grid = core_grid(CONV, _hw(), layout)
    assert grid is not None
    assert grid.rows == 1 * 14 * 14 and grid.channels == 96  # N*Ho*Wo sticks, Cout channels
    seen = np.zeros((grid.rows, grid.channels), dtype=np.int64)
    for s in grid.cores:
        if not s.idle:
            seen[s.rows[0] : s.rows[1], s.channels[0] : s.channels[1]] += 1
    assert (seen == 1).all()
    _kind, _, n = layout.partition("/")
    r, _, c = n.partition("x")
    assert len(grid.cores) == int(r) * int(c or 1)
    assert len({(s.x, s.y) for s in grid.cores}) == len(grid.cores)  # one shard per core
    assert all(0 <= s.x < grid.grid_x and 0 <= s.y < grid.grid_y for s in grid.cores)


def test_a_layout_that_does_not_fit_the_grid_has_no_picture() -> None:
    assert core_grid(CONV, _hw(), "block/9x9") is None  # the 8x8 grid of wormhole-n150 (hardware-facts.md §4.1)
    assert core_grid(CONV, _hw(), "diagonal/3") is None


def test_the_memory_table_follows_the_tenstorrent_memory_knob_and_knows_no_other_level() -> None:
    assert residency("tenstorrent", "grid", {"memory": "l1-sharded"})["moving"] == "l1"
    assert residency("tenstorrent", "grid", {"memory": "dram-interleaved"})["moving"] == "dram"
    assert residency("tenstorrent", "grid", {"memory": "l1-sharded"})["stationary"] == "dram"
    assert residency("trainium", "no-such-level", {}) == {}
    assert residency("ascend", "blocks", {}, binary=False) == {"moving": "ub", "output": "ub"}


def test_nest_tiles_shrink_inwards_and_follow_a_sliding_window() -> None:
    p = einsum("X[oh:2 + fh], W[fh] -> Y[oh]", {"oh": 8, "fh": 3})
    m = Mapping(
        levels=(Level(name="outer", loops=(Loop(axis="oh", factor=4),)),
                Level(name="tile", loops=(Loop(axis="oh", factor=2), Loop(axis="fh", factor=3)))),
        acc_dtype="f32",
    )  # fmt: skip
    outer, tile = nest_levels(p, m, "unknown-family")
    assert outer.operand_tile == {"X": (2 * 7 + 2 + 1,), "W": (3,), "Y": (8,)}
    assert tile.operand_tile == {"X": (2 * 1 + 2 + 1,), "W": (3,), "Y": (2,)}
    assert outer.loops == "oh x4" and tile.memory == {"X": "", "W": "", "Y": ""}


def test_svg_text_is_inline_svg_without_urls_and_with_its_own_ids() -> None:
    fig = new_figure(3, 2)
    ax = fig.add_subplot()
    ax.scatter([1, 2], [3, 4]).set_gid("dots")
    text = svg_text(fig, label='a "quoted" <label>', name="demo")
    assert text.startswith("<svg ") and "http" not in text and "<?xml" not in text and "xlink:" not in text
    assert 'aria-label="a &quot;quoted&quot; &lt;label>"' in text
    assert 'id="demo-dots"' in text and ' id="figure_1"' not in text
    assert 'href="#demo-' in text  # the scatter's marker, renamed with its definition
