"""The Tensix mapping space, its loop-nest rendering and the ttnn rules of thumb.

Points are dicts of the parameters in `tt_eval.PARAMS`; `mapping()` stores them in
``Mapping.knobs`` so `check`/`cost` recover the point from the mapping.
"""

from __future__ import annotations

import numpy as np

from costmodels.gemm_view import gemm_view
from costmodels.ir import Level, Loop, Mapping
from costmodels.protocol import Choice, Param, SearchSpace
from costmodels.tt_eval import MEMORIES, PARAMS, Evaluation, dram_k_tiles, evaluate
from costmodels.tt_hardware import TensixHardware
from costmodels.tt_resolve import numeric_inputs, top_divisors
from costmodels.tt_shape import TTShape, candidate_layouts, cdiv, layout_stats
from workload.problem import Problem

#: in0_block_w (K tiles per streamed block) choices: the largest divisors of K_t up to this many tiles
MAX_IN0_BLOCK_W = 16


def in0_block_w_choices(shape: TTShape) -> tuple[int, ...]:
    """The 4 largest divisors of the DRAM path's K_t that are at most `MAX_IN0_BLOCK_W` tiles, largest first."""
    k_t = dram_k_tiles(shape)
    return tuple(d for d in range(min(k_t, MAX_IN0_BLOCK_W), 0, -1) if k_t % d == 0)[:4]


def build_space(shape: TTShape, hw: TensixHardware) -> SearchSpace:
    layouts = candidate_layouts(shape, hw)
    ranks = max(len(top_divisors(layout_stats(shape, hw, lay).pm_t)) for lay in layouts)
    params = (
        Param(name="layout", choices=tuple(layouts), doc="height/R, block/RxC or width/C over the core grid"),
        Param(
            name="memory",
            choices=MEMORIES,
            doc="l1-sharded: operands resident in L1 shards; dram-interleaved: blocks streamed from/to DRAM",
        ),
        Param(
            name="act_block_h_rank",
            choices=tuple(range(ranks)),
            doc="act_block_h = k-th largest multiple of 32 dividing the per-core height (0 = whole, ttnn default)",
        ),
        Param(name="act_block_w_div", choices=(1, 2, 4), doc="divides the maximum act_block_w (width sharding only)"),
        Param(name="in0_block_w", choices=in0_block_w_choices(shape), doc="K tiles per streamed block (DRAM only)"),
        Param(name="subblock_rank", choices=(0, 1, 2, 3), doc="k-th feasible output sub-block of ttnn's list"),
        Param(name="act_double_buffer", choices=(False, True)),
        Param(name="weights_double_buffer", choices=(False, True), doc="block sharding and DRAM streaming only"),
        Param(name="split_reader", choices=(False, True), doc="two activation reader kernels (sharded conv)"),
        Param(
            name="math_fidelity",
            choices=tuple(hw.fidelities),
            doc="the fidelities the preset's policy allows (HiFi4 unless overridden)",
        ),
        Param(
            name="fp32_acc",
            choices=(False, True) if hw.bf16_accumulation else (True,),
            doc="accumulate in fp32 in the destination register (bf16 only if the preset allows it)",
        ),
    )
    return SearchSpace(params=params)


def resolve_point(shape: TTShape, hw: TensixHardware, point: dict[str, Choice]) -> dict[str, Choice]:
    """A space point with its ranks resolved to act_block_h rows and an out_subblock pair."""
    if "act_block_h_rank" not in point:
        return dict(point)
    cols = {k: np.array([v], dtype=object if isinstance(v, str) else None) for k, v in point.items()}
    _, x = numeric_inputs(shape, hw, cols)
    out = dict(point)
    out["act_block_h"] = int(x["abh_rows"][0])
    out["out_subblock"] = f"{int(x['sb_h'][0])}x{int(x['sb_w'][0])}"
    return out


def evaluate_point(shape: TTShape, hw: TensixHardware, point: dict[str, Choice]) -> Evaluation:
    """The model at one point (space or knob point)."""
    cols = {k: np.array([v], dtype=object if isinstance(v, str) else None) for k, v in point.items()}
    lt, x = numeric_inputs(shape, hw, cols)
    return evaluate(shape, hw, lt, x)


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
    point = resolve_point(shape, hw, point)
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
    fill = {o.name: {a: "zero" for a, _ in k_axes if a in o.axes} for o in problem.inputs}
    # fp32_dest_acc_en off: partial sums live in the 16-bit destination register (hardware-facts.md §4.1, Dst row)
    acc = "f32" if bool(point["fp32_acc"]) else "bf16"
    return Mapping(
        target=preset,
        levels=levels,
        acc_dtype=acc,
        fill={k: v for k, v in fill.items() if v},
        knobs={k: point[k] for k in (*PARAMS, "act_block_h_rank", "subblock_rank") if k in point},
    )


def point_of(mapping: Mapping) -> dict[str, Choice]:
    """Recover the point from a mapping's knobs (missing knobs get the ttnn defaults: HiFi4, L1 sharded)."""
    k = mapping.knobs
    return {
        "layout": str(k.get("layout", "")),
        "act_block_h": int(k.get("act_block_h", 32)),
        "act_block_w_div": int(k.get("act_block_w_div", 1)),
        "out_subblock": str(k.get("out_subblock", "1x1")),
        "act_double_buffer": bool(k.get("act_double_buffer", False)),
        "weights_double_buffer": bool(k.get("weights_double_buffer", False)),
        "split_reader": bool(k.get("split_reader", False)),
        "math_fidelity": str(k.get("math_fidelity", "HiFi4")),
        "fp32_acc": bool(k.get("fp32_acc", False)),
        "memory": str(k.get("memory", MEMORIES[0])),
        "in0_block_w": int(k.get("in0_block_w", 1)),
    }


def warm_starts(shape: TTShape, hw: TensixHardware, space: SearchSpace) -> list[dict[str, Choice]]:
    """ttnn auto-shard (hardware-facts.md §4.2 step 5): per-core L1 of HS, BS and WS, smallest first.

    Tall narrow convs (many sticks, few channels) land on height sharding, mid-size on block and
    very wide channels on width; BS only with at least grid_x cores, never WS for matmul-convs.
    Math fidelity: the most precise one the policy allows (HiFi4, the ttnn default, unless overridden).
    """
    by_name = {p.name: p.choices for p in space.params}
    layouts = [str(c) for c in by_name["layout"]]
    ranks = [int(c) for c in by_name["act_block_h_rank"]]
    scored: list[tuple[float, int, dict[str, Choice]]] = []
    for lay in layouts:
        s = layout_stats(shape, hw, lay)
        if s.kind == "block" and s.cores < hw.grid_x:
            continue
        if s.kind == "width" and shape.conv is None and shape.kh * shape.kw == 1:
            continue
        for rank in ranks:  # default: the whole per-core height, else the next largest divisor
            pt: dict[str, Choice] = {
                "layout": lay,
                "act_block_h_rank": rank,
                "act_block_w_div": 1,
                "subblock_rank": 0,
                "act_double_buffer": True,
                "weights_double_buffer": s.kind == "block",
                "split_reader": s.kind == "height",
                "math_fidelity": hw.preferred_fidelity,
                "fp32_acc": not hw.bf16_accumulation,
                "memory": MEMORIES[0],
                "in0_block_w": int(by_name["in0_block_w"][0]),
            }
            ev = evaluate_point(shape, hw, pt)
            if bool(ev.feasible[0]):
                order = {"height": 0, "block": 1, "width": 2}[s.kind]
                scored.append((float(ev.a["footprint"][0]), order, pt))
                break
    scored.sort(key=lambda x: (x[0], x[1]))
    return [p for _, _, p in scored]
