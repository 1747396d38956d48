"""The Tensix mapping space, and the model evaluated at one point of it.

The space is the legal space (issue #12): every core grid of height, block and width sharding,
splits that do not divide the rows or channels (padded, priced as padding), and act_block_h /
in0_block_w up to the L1 limit, less two proved dominance rules; `build_space` gives the rules,
their proofs and the space's size for a 4096^3 GEMM and a ResNet-50 3x3 conv.

Points are dicts of the parameters in `tenstorrent.cost.PARAMS`; `mapping()` stores them in
``Mapping.knobs`` so `check`/`cost` recover the point from the mapping.
"""

from __future__ import annotations

import numpy as np

from costmodels.protocol import Choice, Param, SearchSpace
from costmodels.tenstorrent.cost import MEMORIES, Evaluation, dram_k_tiles, evaluate
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.resolve import block_divisors, block_limit, numeric_inputs
from costmodels.tenstorrent.shape import TTShape, candidate_layouts, layout_stats, tt_shape
from workload.problem import Problem

#: ttnn's sub-block list has 20 pairs (`tenstorrent.cost.SUBBLOCKS`): the unpruned space offers every rank
SUBBLOCK_RANKS = 20


def in0_block_w_choices(shape: TTShape, hw: TensixHardware) -> tuple[int, ...]:
    """Every divisor of the DRAM path's K_t up to `block_limit` tiles, largest first (ttnn: in0_block_w divides K_t)."""
    return block_divisors(dram_k_tiles(shape), block_limit(shape, hw))


def build_space(
    problem: Problem, hw: TensixHardware, shape: TTShape | None = None, *, prune: bool = True
) -> SearchSpace:
    """The mapping choices of a problem (`shape`: its GEMM view in tiles, when already at hand).

    The space is every mapping the references allow, up to the L1 limits, less what two proved
    dominance rules leave out when `prune` is set (tests compare the pruned space with the
    unpruned one on small problems, ``tests/costmodels/tenstorrent/test_tenstorrent_space.py``):

    * layouts: every core-grid shape of height, block and width sharding, padded where it does
      not divide (`shape.candidate_layouts`); rule 1 (`shape.layout_key`) keeps one of the
      matmul layouts that differ only in unused core rows;
    * act_block_h: every divisor of the per-core height up to `resolve.block_limit` (a rank);
      in0_block_w: every divisor of K_t up to the same limit; act_block_w_div 1, 2 or 4;
    * output sub-block: rule 2 keeps rank 0 only. Proof: the sub-block enters
      `tenstorrent.cost.evaluate` only through its feasibility rules and the sub-block count
      ``n_sub = B * nbh * kblocks * (act_block_h / sb_h) * (pn_t / sb_w)``, which adds
      ``n_sub * subblock_overhead_cycles`` to the compute time; off-chip bytes and the footprint do
      not depend on it. ttnn's list (`tenstorrent.cost.SUBBLOCKS`) is ordered by area
      ``sb_h * sb_w`` from 8 down to 1, so its first feasible pair (rank 0) has the largest area
      of all feasible pairs, the fewest sub-blocks and a latency no larger than any other rank's,
      at equal feasibility and equal other objectives;
    * double buffering, split reader, fidelity (the preset's policy) and fp32 accumulation.

    Sizes in points (all flags and act_block_w_div 1/2/4 included; `tests/.../test_tenstorrent_space.py`
    recomputes them), after / before the two dominance rules, and the fixed list before issue #12
    (ttnn's layouts plus a few smaller grids, 6 act_block_h ranks, the 4 largest divisors of K_t up
    to 16 tiles, 4 sub-block ranks):

    ============================================  ===========  ============  ==========
    problem (bf16)                                pruned       unpruned      before #12
    ============================================  ===========  ============  ==========
    4096^3 GEMM, wormhole-n150                    457,728      11,796,480    32,256
    4096^3 GEMM, blackhole-p150                   740,352      20,275,200    55,296
    ResNet-50 3x3 conv 64->64 @56, wormhole-n150  141,696      2,833,920     27,648
    same conv, blackhole-p150                     207,360      4,147,200     32,256
    ============================================  ===========  ============  ==========

    (the conv at batch 1; conv layouts are never merged, so only rule 2 shrinks it). Pruned, both
    stay under the mapper's 2,000,000-point enumeration limit.
    """
    if shape is None:
        shape = tt_shape(problem, hw.tile)
    layouts = candidate_layouts(shape, hw, prune=prune)
    limit = block_limit(shape, hw)
    ranks = max(len(block_divisors(layout_stats(shape, hw, lay).pm_t, limit)) for lay in layouts)
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
            doc="act_block_h = k-th largest multiple of 32 dividing the per-core height, up to the L1 limit "
            "(0 = whole, ttnn default)",
        ),
        Param(name="act_block_w_div", choices=(1, 2, 4), doc="divides the maximum act_block_w (width sharding only)"),
        Param(name="in0_block_w", choices=in0_block_w_choices(shape, hw), doc="K tiles per streamed block (DRAM only)"),
        Param(
            name="subblock_rank",
            choices=(0,) if prune else tuple(range(SUBBLOCK_RANKS)),
            doc="k-th feasible output sub-block of ttnn's list (0, the largest, dominates the others)",
        ),
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
