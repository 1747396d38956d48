"""Tensix points <-> loop nests: `build_mapping` draws a point as a `Mapping` (the point kept in its
knobs), `point_of` reads the point back from the knobs."""

from __future__ import annotations

from costmodels.family import point_of as knob_point
from costmodels.family import zero_fill
from costmodels.gemm_view import gemm_view
from costmodels.ir import Level, Loop, Mapping
from costmodels.protocol import Choice
from costmodels.tenstorrent.cost import PARAMS
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.shape import TTShape, cdiv, layout_stats
from costmodels.tenstorrent.space import resolve_point
from workload.problem import Problem


def _split(axes: list[tuple[str, int]], parts: int) -> tuple[dict[str, int], dict[str, int]]:
    """Spread `parts` over `axes` outermost first; returns (outer factors, remaining inner sizes)."""
    outer: dict[str, int] = {}
    inner = dict(axes)
    left = parts
    for a, size in axes:
        f = min(size, left) if left > 1 else 1
        outer[a] = f
        inner[a] = cdiv(size, f)
        left = cdiv(left, f)
    return outer, inner


def build_mapping(
    problem: Problem, shape: TTShape, hw: TensixHardware, preset: str, point: dict[str, Choice]
) -> Mapping:
    """An axis-aligned loop nest of the point (the cost model uses the exact flat tile counts in knobs).

    Levels: ``grid`` (spatial: rows over R cores, output channels over C), ``block`` (act blocks
    along the rows), ``kblock`` (K blocks), ``subblock`` (output sub-blocks along N) and
    ``tile`` (what one core's matrix unit runs per step). Padding on reduced axes is zero-filled:
    ttnn pads channels and K with zeros to whole tiles.
    """
    try:
        point = resolve_point(shape, hw, point)
    except KeyError as e:  # (a space point without one of its parameters)
        raise ValueError(f"not a point of this target: {e.args[0]} missing") from None
    missing = [k for k in PARAMS if k not in point]
    if missing:
        raise ValueError(
            f"not a point of this target: {', '.join(missing)} missing (give every knob: {', '.join(PARAMS)}; or a "
            "point of the space, with act_block_h_rank and subblock_rank)"
        )
    gv = gemm_view(problem)
    s = layout_stats(shape, hw, str(point["layout"]))
    abh_t = max(1, int(point["act_block_h"]) // shape.tile)
    nbh = max(1, s.pm_t // abh_t)
    sb = str(point["out_subblock"]).split("x")
    sb_w = int(sb[1]) if len(sb) == 2 and sb[1].isdigit() else 1
    m_axes = [(a, gv.sizes[a]) for a in gv.m_axes]
    n_axes = [(a, gv.sizes[a]) for a in gv.n_axes]
    grid_m, rest_m = _split(m_axes, s.r)
    grid_n, rest_n = _split(n_axes, s.c)
    blk_m, tile_m = _split(list(rest_m.items()), nbh)
    sub_n, tile_n = _split(list(rest_n.items()), max(1, s.pn_t // max(sb_w, 1)))
    k_axes = [(a, gv.sizes[a]) for a in gv.k_axes]
    kb = k_axes[:-1]  # Kh, Kw outer (the reader runs Kh x Kw blocks); innermost K axis in tiles
    last_k = k_axes[-1] if k_axes else None
    kloops = [Loop(axis=a, factor=sz) for a, sz in kb]
    tile_k: list[Loop] = []
    if last_k is not None:
        a, sz = last_k
        kt = cdiv(sz, shape.tile)
        kloops.append(Loop(axis=a, factor=kt))
        tile_k.append(Loop(axis=a, factor=shape.tile if kt > 1 else sz))
    levels = (
        Level(name="batch", loops=tuple(Loop(axis=a, factor=gv.sizes[a]) for a in gv.batch_axes)),
        Level(
            name="grid",
            loops=tuple(Loop(axis=a, factor=f, spatial=True) for a, f in (grid_m | grid_n).items() if f > 1),
        ),
        Level(name="block", loops=tuple(Loop(axis=a, factor=f) for a, f in blk_m.items() if f > 1)),
        Level(name="kblock", loops=tuple(kloops)),
        Level(name="subblock", loops=tuple(Loop(axis=a, factor=f) for a, f in sub_n.items() if f > 1)),
        Level(name="tile", loops=tuple(Loop(axis=a, factor=f) for a, f in (tile_m | tile_n).items()) + tuple(tile_k)),
    )
    fill = zero_fill(problem, levels, [a for a, _ in k_axes], padded_only=False)
    # fp32_dest_acc_en off: partial sums live in the 16-bit destination register (hardware-facts.md §4.1, Dst row)
    acc = "f32" if bool(point["fp32_acc"]) else "bf16"
    return Mapping(
        target=preset,
        levels=levels,
        acc_dtype=acc,
        fill=fill,
        knobs={k: point[k] for k in (*PARAMS, "act_block_h_rank", "subblock_rank") if k in point},
    )


#: the type of each knob `point_of` reads back
KNOB_TYPES: dict[str, type] = {
    "layout": str,
    "act_block_h": int,
    "act_block_w_div": int,
    "out_subblock": str,
    "act_double_buffer": bool,
    "weights_double_buffer": bool,
    "split_reader": bool,
    "math_fidelity": str,
    "fp32_acc": bool,
    "memory": str,
    "in0_block_w": int,
}


def point_of(mapping: Mapping) -> dict[str, Choice] | None:
    """The point a mapping's knobs record (every parameter of `PARAMS`), or None when a knob is missing."""
    point = knob_point(mapping, PARAMS)
    return None if point is None else {k: KNOB_TYPES[k](v) for k, v in point.items()}
