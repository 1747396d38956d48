"""The Ascend mapping spaces: TMATMUL on the cube unit (binary problems), row reductions on the
vector cores (unary problems, `vector_space`).

A binary problem is seen as a GEMM (`gemm_view`; conv2d as implicit GEMM, img2col L1->L0A,
hardware-facts.md §3.2 step 8). One point of the space fixes:

- ``base_m``, ``base_k``, ``base_n``: the instruction tile (one TMATMUL on L0A/L0B/L0C);
- ``l1_m``, ``l1_k``, ``l1_n``: how many base tiles one L1 tile holds (K chunking: the
  ``l1_k`` base tiles of one L1 chunk and all chunks accumulate into L0C);
- ``double_buffer``: ping-pong buffers in L1/L0A/L0B so MTE2, MTE1 and the cube overlap;
- ``core_grid``: ``BxMxN`` split of the AI cores over the batch, M and N groups: every legal grid
  (at most the AI cores, both orientations, fewer cores than all, sides that do not divide their
  blocks padded, a group of several axes split over any of its axes: ``1x1*2*3x4``) that the
  grids' dominance rules keep (ascend/grids.py, sizes in `build_space`).

The loop nest of a point is drawn in `costmodels.ascend.mapping`.

Tile choices (`tile_choices`): for a small group (at most `EVERY_TILE_CHOICES` tiles left by the
rule below) every tile from 1 to its extent, pruned only by that rule; else a ladder of fractal
multiples (16 rows or columns, ``k0`` = 32 B of the input dtype along K: hardware-facts.md §3.1
"Fractal layout", §3.2 step 1), not only powers of two, plus the tiles that cover the group in 1,
2 or 3 pieces. Each is kept within TMATMUL's m/k/n in [1, 4095] (pto-tmatmul.txt, Constraints,
Runtime) and the L0 buffers, then tightened by the dominance rule of `tighten`.

**Dominance rule** (`tighten`): a tile ``t`` of a group is replaced by the smallest tile ``t'``
whose greedy split (`nest_group`) leaves the same remainder outside it (for one axis of extent
``E``: ``t' = ceil(E / ceil(E / t))``, the same number of tiles with the padding spread evenly).
Proof that ``t'`` is at least as good in every objective, whatever the other parameters:

1. every level outside the tile (L1 multiples, core grid, blocks) splits only the remainder, so
   all counts (tiles, blocks, K chunks, steps, cores used) are equal;
2. every field of the model that depends on the tile (cube_tables.py: ``u``, L0A/L0B bytes and
   their MTE1 time, the GM chunk bytes ``ach``/``bch``, L1 bytes, the accumulator, the output
   bytes ``bo_m``/``bo_n``) is a nondecreasing function of the tile or of its fractal padding,
   and ``t' <= t`` gives ``round_up(t') <= round_up(t)``;
3. the latency (pipes summed; or ``top + (three - top) / steps``; FIX overlapped only where it
   helps, cost.py `_core`), the off-chip bytes and the footprint are nondecreasing in those
   fields with the counts fixed, and every capacity or range check that passes for ``t`` passes
   for ``t'``.

So every point with ``t`` has a point with ``t'`` that is feasible whenever it is and no worse in
latency, off-chip bytes or footprint. Tiles whose fractal padding cannot fit L0A/L0B/L0C even with
the smallest partner tiles and no double buffering are left out (infeasible at every point).
`tests/costmodels/ascend/test_ascend_space.py` checks both against the unpruned space on small
problems.

The tile rule's effect (ascend-910b; L1 multiples, double buffering and the largest core grids only, as
before every legal grid was offered: 576 and 288 combinations of them for the two problems):

| problem | every tile 1..extent (no rule) | every tile after the rule | offered, before the rule | offered |
|---|---|---|---|---|
| GEMM 4096^3 (f16) | 4.0e13 | 1.15e9 (126 tiles per group) | 1,265,472 | 995,328 |
| ResNet-50 3x3 conv 64@56 | 3.3e10 | 2,134,080 | 2,875,392 | 302,400 |

(the fixed power-of-two space before issue #12: 86,400 and 21,600). The order of the block loops
(A- or B-resident) is not a parameter: the model takes the better one at every point, by the rule
proved in cost.py (Block loop order), which halves a space that would list both (GEMM 4096^3:
1,990,656 -> 995,328). Every tile after the rule is
beyond enumeration for the large groups, so those are offered the ladder: the tiles between its
rungs are a restriction of the space, not pruned by a proof. ascend-a5: 1,119,744 and 302,400.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from costmodels.ascend.grids import grid_choices, tight_sides, tight_splits
from costmodels.ascend.hardware import AscendHardware
from costmodels.ascend.tiling import Side, capped_choices, exact_tiles, nest_group, round_up, tighten
from costmodels.ascend.vector import ROW_BLOCKS, VectorSetup
from costmodels.gemm_view import GemmView, gemm_view
from costmodels.protocol import Param, SearchSpace
from workload import dtypes
from workload.problem import Problem

#: Tile ladder in fractals (16 rows/columns along M and N, k0 along K): powers of two and the 3 * 2**i between.
FRACTAL_MULTS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
#: Numbers of pieces a group is also covered in exactly (the tile ``ceil(extent / pieces)``).
PIECES = (1, 2, 3)
#: A group this small, whose tightened tiles are at most `EVERY_TILE_CHOICES`, is offered every tile
#: (only the dominance rule prunes); a larger one the ladder (the tiles in between are not offered).
EVERY_TILE_EXTENT = 128
EVERY_TILE_CHOICES = 16
L1_MULTS = (1, 2, 4)
L1_K_MULTS = (1, 2, 4, 8)
CUBE_PARAMS = ("base_m", "base_k", "base_n", "l1_m", "l1_k", "l1_n", "double_buffer", "core_grid")


@dataclass(frozen=True)
class CubeSetup:
    """Problem-level facts of a GEMM on one Ascend preset (independent of the point)."""

    problem: Problem
    hw: AscendHardware
    view: GemmView

    @cached_property
    def left(self) -> str:
        return self.problem.inputs[self.view.moving].dtype

    @cached_property
    def right(self) -> str:
        return self.problem.inputs[self.view.stationary].dtype

    @cached_property
    def acc(self) -> str:
        return self.problem.acc_dtype

    @cached_property
    def out(self) -> str:
        return self.problem.output.dtype

    @cached_property
    def k0(self) -> int:
        return self.hw.fractal_k.get(self.left, max(1, int(32 / dtypes.info(self.left).bytes)))

    @cached_property
    def repeats(self) -> int:
        return self.hw.cube_repeats(self.left)

    def axes(self, group: str) -> tuple[tuple[str, int], ...]:
        names = {"b": self.view.batch_axes, "m": self.view.m_axes, "n": self.view.n_axes, "k": self.view.k_axes}
        return tuple((a, self.view.sizes[a]) for a in names[group])

    @cached_property
    def input_bytes(self) -> tuple[float, ...]:
        return self.problem.input_bytes

    @cached_property
    def min_bytes(self) -> float:
        """`Problem.min_bytes`, computed once."""
        return sum(self.input_bytes) + self.problem.output_bytes

    @cached_property
    def a_ratio(self) -> float:
        """GM bytes of the left operand per im2col byte (< 1 for a conv: the patch, not the expansion)."""
        full = self.view.B * self.view.M * self.view.K * dtypes.info(self.left).bytes
        return min(1.0, self.input_bytes[self.view.moving] / full) if full else 1.0

    @cached_property
    def b_ratio(self) -> float:
        full = self.view.B * self.view.K * self.view.N * dtypes.info(self.right).bytes
        return min(1.0, self.input_bytes[self.view.stationary] / full) if full else 1.0

    @cached_property
    def l2_resident(self) -> bool:
        """Both inputs fit in L2, so re-reads hit L2 (hardware-facts.md §3.2 step 6)."""
        return sum(self.input_bytes) <= self.hw.l2_bytes


def cube_setup(problem: Problem, hw: AscendHardware) -> CubeSetup:
    return CubeSetup(problem=problem, hw=hw, view=gemm_view(problem))


def tile_limit(s: CubeSetup, group: str) -> int:
    """The largest tile of a group that can be feasible: TMATMUL's range, then L0 with the smallest partners."""
    hw = s.hw
    sa, sb = dtypes.info(s.left).bytes, dtypes.info(s.right).bytes
    acc = 4  # fp32/int32 accumulator (pto-tmatmul.txt, dtype triples)
    if group == "m":
        cap = min(hw.l0a_bytes // (s.k0 * sa), hw.l0c_bytes // (hw.fractal_n * acc))
    elif group == "n":
        cap = min(hw.l0b_bytes // (s.k0 * sb), hw.l0c_bytes // (hw.fractal_m * acc))
    else:
        cap = min(hw.l0a_bytes // (hw.fractal_m * sa), hw.l0b_bytes // (hw.fractal_n * sb))
    return min(hw.tmatmul_max_dim, int(cap))


def tile_choices(s: CubeSetup, group: str, ladder: Sequence[int] | None = None) -> tuple[int, ...]:
    """The tiles offered for a group (``m``, ``n`` or ``k``), tightened (see the module docstring).

    Args:
        s: the problem on the preset.
        group: which GEMM group.
        ladder: candidate tiles before tightening (default: the fractal ladder and the 1-3 piece covers).
    """
    axes = s.axes(group)
    extent = math.prod(size for _, size in axes)
    unit = s.k0 if group == "k" else (s.hw.fractal_m if group == "m" else s.hw.fractal_n)
    limit = tile_limit(s, group)
    if ladder is None:
        every = {tighten(axes, t) for t in range(1, min(extent, limit) + 1)} if extent <= EVERY_TILE_EXTENT else set()
        if 0 < len(every) <= EVERY_TILE_CHOICES:
            ladder = sorted(every)  # small groups: every tile, only the rule prunes
        else:
            ladder = [unit * f for f in FRACTAL_MULTS] + [-(-extent // p) for p in PIECES]
    tiles = {tighten(axes, min(int(t), extent)) for t in ladder}
    keep = sorted(t for t in tiles if round_up(t, unit) <= limit)  # past the limit: infeasible at every point
    return tuple(keep) if keep else (min(tiles),)


def cube_space(s: CubeSetup, prune: bool = True) -> SearchSpace:
    """Tightened base tiles, L1 multiples, double buffering and core grids, capped to the problem's size.

    Args:
        s: the problem on the preset.
        prune: apply the core grids' dominance rules (ascend/grids.py); False: every legal grid.
    """
    v, hw = s.view, s.hw
    mp, np_, kp = round_up(v.M, hw.fractal_m), round_up(v.N, hw.fractal_n), round_up(v.K, s.k0)
    bm, bk, bn = (tile_choices(s, g) for g in ("m", "k", "n"))

    def mults(base: tuple[int, ...], values: tuple[int, ...], extent: int) -> tuple[int, ...]:
        return capped_choices(values, -(-extent // min(base)))

    lm, lk, ln = mults(bm, L1_MULTS, mp), mults(bk, L1_K_MULTS, kp), mults(bn, L1_MULTS, np_)
    arity = (len(s.axes("b")), len(s.axes("m")), len(s.axes("n")))
    grids = grid_choices(hw.aic_cores, grid_sides(s, bm, lm, bn, ln) if prune else None, arity)
    return SearchSpace(
        params=(
            Param(name="base_m", choices=bm, doc="rows of one TMATMUL (L0A/L0C tile)"),
            Param(name="base_k", choices=bk, doc="reduction depth of one TMATMUL (L0A/L0B tile)"),
            Param(name="base_n", choices=bn, doc="columns of one TMATMUL (L0B/L0C tile)"),
            Param(name="l1_m", choices=lm, doc="base tiles along M per L1 tile"),
            Param(name="l1_k", choices=lk, doc="base tiles along K per L1 chunk"),
            Param(name="l1_n", choices=ln, doc="base tiles along N per L1 tile"),
            Param(name="double_buffer", choices=(True, False), doc="ping-pong L1/L0A/L0B buffers"),
            Param(name="core_grid", choices=grids, doc="BxMxN cores sharing the output blocks"),
        )
    )


def grid_sides(
    s: CubeSetup, bm: Sequence[int], lm: Sequence[int], bn: Sequence[int], ln: Sequence[int]
) -> tuple[frozenset[Side], frozenset[Side], frozenset[Side]]:
    """The B, M and N sides the grids' rules keep (ascend/grids.py): tight for a remainder the tiles leave; a
    group of several axes gets per-axis splits (rules 1 and 3), a group of one or none counts (rule 1)."""

    def rems(group: str, tiles: Sequence[int], mults: Sequence[int]) -> list[tuple[tuple[str, int], ...]]:
        axes = s.axes(group)
        out = []
        for t in tiles:
            for m in mults:
                rest = nest_group(axes, (int(t), int(m))).factors[2]
                out.append(tuple((a, r) for (a, _), r in zip(axes, rest, strict=True)))
        return out

    def kept(all_rems: list[tuple[tuple[str, int], ...]], arity: int) -> frozenset[Side]:
        return frozenset(tight_splits(all_rems, cores) if arity > 1 else tight_sides(all_rems, cores))

    cores = s.hw.aic_cores
    return (
        kept([s.axes("b")], len(s.axes("b"))),
        kept(rems("m", bm, lm), len(s.axes("m"))),
        kept(rems("n", bn, ln), len(s.axes("n"))),
    )


def vector_space(s: VectorSetup) -> SearchSpace:
    return SearchSpace(
        params=(
            Param(name="row_block", choices=capped_choices(ROW_BLOCKS, s.rows), doc="rows of one UB tile"),
            Param(name="col_block", choices=exact_tiles(s.cols_axes) or (1,), doc="columns of one UB tile"),
            Param(name="double_buffer", choices=(True, False), doc="ping-pong UB source tiles"),
        )
    )


def build_space(
    problem: Problem, hw: AscendHardware, setup: CubeSetup | VectorSetup | None = None, prune: bool = True
) -> SearchSpace:
    """The mapping choices of a problem: TMATMUL tiles when binary, row-reduction tiles when unary
    (`setup`: the problem's cube or vector setup, when already at hand; `prune`: apply the core
    grids' dominance rules, ascend/grids.py).

    Space sizes (bf16 GEMM 4096^3 and ResNet-50's 3x3 conv 64->64 at 56x56; tiles, L1 multiples and
    double buffering as offered: 124,416 and 75,600 combinations), by the core grids offered. The
    conv's M group has three axes (n, oh, ow), so its grids also split the M cores per axis
    (ascend/grids.py); the GEMM's groups have one axis each, so its grids are unchanged:

    | preset, problem | every legal grid | after the rules | innermost first only: all / kept | largest grids |
    |---|---|---|---|---|
    | ascend-910b GEMM | 25,256,448 (203 grids) | 9,704,448 (78) | same | 995,328 (8) |
    | ascend-910b conv | 70,610,400 (934) | 7,560,000 (100) | 15,346,800 (203) / 4,536,000 (60) | 302,400 (4) |
    | ascend-a5 GEMM | 45,163,008 (363) | 14,183,424 (114) | same | 1,119,744 (9) |
    | ascend-a5 conv | 136,458,000 (1,805) | 10,432,800 (138) | 27,442,800 (363) / 6,123,600 (81) | 302,400 (4) |

    Above the enumeration limit (2M points), so the mapper searches them by structures (the grid
    and double buffering fixed) with the exact structure bounds of ascend/bounds.py. On ascend-910b
    the rules keep 26 M sides for the conv (per-axis splits of its 56x56 output rows, of 227 legal:
    24 counts and 203 per-axis splits) and 13 N sides (64 channels).
    """
    if problem.is_binary:
        return cube_space(setup if isinstance(setup, CubeSetup) else cube_setup(problem, hw), prune)
    return vector_space(setup if isinstance(setup, VectorSetup) else VectorSetup(problem=problem, hw=hw))
