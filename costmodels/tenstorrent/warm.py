"""Tensix warm starts: ttnn's auto-shard rule of thumb (hardware-facts.md §4.2 step 5)."""

from __future__ import annotations

from costmodels.protocol import Choice, SearchSpace
from costmodels.tenstorrent.cost import MEMORIES
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.shape import TTShape, layout_key, layout_stats, ttnn_layouts
from costmodels.tenstorrent.space import evaluate_point


def warm_starts(shape: TTShape, hw: TensixHardware, space: SearchSpace) -> list[dict[str, Choice]]:
    """ttnn auto-shard (hardware-facts.md §4.2 step 5): per-core L1 of HS, BS and WS, smallest first.

    Tall narrow convs (many sticks, few channels) land on height sharding, mid-size on block and
    very wide channels on width; BS only with at least grid_x cores, never WS for matmul-convs.
    Math fidelity: the most precise one the policy allows (HiFi4, the ttnn default, unless overridden).
    """
    by_name = {p.name: p.choices for p in space.params}
    # ttnn's own layouts (and a few smaller grids), each as the space's layout of the same key (dominance rule 1)
    in_space = {layout_key(shape, str(c)): str(c) for c in by_name["layout"]}
    layouts = list(
        dict.fromkeys(in_space[k] for k in (layout_key(shape, x) for x in ttnn_layouts(shape, hw)) if k in in_space)
    )
    ranks = [int(c) for c in by_name["act_block_h_rank"]][:6]
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
