"""The Tensix mapping space, and the model evaluated at one point of it.

Points are dicts of the parameters in `tenstorrent.cost.PARAMS`; `mapping()` stores them in
``Mapping.knobs`` so `check`/`cost` recover the point from the mapping.
"""

from __future__ import annotations

import numpy as np

from costmodels.protocol import Choice, Param, SearchSpace
from costmodels.tenstorrent.cost import MEMORIES, Evaluation, dram_k_tiles, evaluate
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.resolve import numeric_inputs, top_divisors
from costmodels.tenstorrent.shape import TTShape, candidate_layouts, layout_stats, tt_shape
from workload.problem import Problem

#: in0_block_w (K tiles per streamed block) choices: the largest divisors of K_t up to this many tiles
MAX_IN0_BLOCK_W = 16


def in0_block_w_choices(shape: TTShape) -> tuple[int, ...]:
    """The 4 largest divisors of the DRAM path's K_t that are at most `MAX_IN0_BLOCK_W` tiles, largest first."""
    k_t = dram_k_tiles(shape)
    return tuple(d for d in range(min(k_t, MAX_IN0_BLOCK_W), 0, -1) if k_t % d == 0)[:4]


def build_space(problem: Problem, hw: TensixHardware, shape: TTShape | None = None) -> SearchSpace:
    """The mapping choices of a problem (`shape`: its GEMM view in tiles, when already at hand)."""
    if shape is None:
        shape = tt_shape(problem, hw.tile)
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
