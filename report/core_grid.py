"""A Tenstorrent mapping's core grid: which cores its sharding layout uses and each core's shard.

The layout (`costmodels.tenstorrent.shape`, knob ``layout``) shards the GEMM view's output
(rows = output sticks ``N*Ho*Wo``, columns = output channels): ``height/R`` gives each of R cores
``ceil(M_t / R)`` row tiles and every channel, ``width/C`` each of C cores ``ceil(N_t / C)``
channel tiles and every row, ``block/RxC`` a row slice times a channel slice (tenstorrent-conv2d.md,
"Sharding": height shards H/p, width shards W/p, block shards H/m x W/n). Per-core sizes come from
the cost model's own `layout_stats`.

[ASSUMPTION] placement on the grid: height and width shards fill the grid row by row, and block
row i / column j sits on grid row i / column j (ttnn's default ROW_MAJOR shard orientation,
tenstorrent-conv2d.md, Conv2dConfig ``transpose_shards``); the references do not draw the placement
of height shards, and nothing in the cost model depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.patches import Rectangle

from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.shape import layout_stats, parse_layout, tt_shape
from report.svg import new_figure, svg_text
from workload.problem import Problem


@dataclass(frozen=True)
class CoreShard:
    """One core of the grid and the part of the output it computes (half-open ranges; empty: idle)."""

    x: int
    y: int
    rows: tuple[int, int]  # output sticks
    channels: tuple[int, int]  # output channels

    @property
    def idle(self) -> bool:
        return self.rows[0] >= self.rows[1] or self.channels[0] >= self.channels[1]


@dataclass(frozen=True)
class CoreGrid:
    layout: str
    grid_x: int
    grid_y: int
    rows: int  # output sticks of the GEMM view
    channels: int  # output channels
    cores: list[CoreShard]  # the cores the layout uses


def core_grid(problem: Problem, hw: TensixHardware, layout: str) -> CoreGrid | None:
    """The layout's cores and shards (None for a layout that does not parse or fit)."""
    parsed = parse_layout(layout)
    if parsed is None or not problem.is_binary:
        return None
    shape = tt_shape(problem, hw.tile)
    stats = layout_stats(shape, hw, layout)
    if not stats.valid:
        return None
    kind, r, c = parsed
    t = hw.tile
    h, w = stats.pm_t * t, stats.pn_t * t

    def shard(i: int, j: int) -> tuple[tuple[int, int], tuple[int, int]]:
        rows = (min(i * h, shape.rows), min((i + 1) * h, shape.rows))
        chans = (min(j * w, shape.cols), min((j + 1) * w, shape.cols))
        return rows, chans

    cores: list[CoreShard] = []
    if kind == "block":
        for i in range(r):
            for j in range(c):
                rows, chans = shard(i, j)
                cores.append(CoreShard(j, i, rows, chans))
    else:
        for k in range(r * c):
            rows, chans = shard(k, 0) if kind == "height" else shard(0, k)
            cores.append(CoreShard(k % hw.grid_x, k // hw.grid_x, rows, chans))
    return CoreGrid(layout, hw.grid_x, hw.grid_y, shape.rows, shape.cols, cores)


def _range(a: tuple[int, int]) -> str:
    return f"{a[0]}-{a[1] - 1}" if a[1] > a[0] else "-"


def core_grid_svg(grid: CoreGrid) -> str:
    """The grid, used cores coloured and labelled with their output sticks (r) and channels (c)."""
    cell = min(0.68, 7.2 / grid.grid_x)
    fig = new_figure(cell * grid.grid_x + 0.3, cell * grid.grid_y + 0.6, left_in=0.15, bottom_in=0.15)
    ax = fig.add_subplot()
    ax.set_xlim(0, grid.grid_x)
    ax.set_ylim(grid.grid_y, 0)
    ax.set_aspect("equal")
    ax.grid(False)
    ax.set_xticks([])
    ax.set_yticks([])
    used = {(s.x, s.y): s for s in grid.cores}
    for y in range(grid.grid_y):
        for x in range(grid.grid_x):
            s = used.get((x, y))
            color = "#f2f2f2" if s is None else ("#f7d9a8" if s.idle else "#9cc3e6")
            rect = Rectangle((x + 0.04, y + 0.04), 0.92, 0.92, facecolor=color, edgecolor="#555", lw=0.6)
            rect.set_gid(f"core-{x}-{y}")
            ax.add_patch(rect)
            if s is not None:
                text = "idle" if s.idle else f"r {_range(s.rows)}\nc {_range(s.channels)}"
                ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", fontsize=6)
    busy = sum(not s.idle for s in grid.cores)
    ax.set_title(f"Core grid {grid.grid_y}x{grid.grid_x}, layout {grid.layout}: {busy} cores compute")
    return svg_text(fig, label=f"core grid with layout {grid.layout}: {busy} cores", name="cores")
