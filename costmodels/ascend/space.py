"""The Ascend mapping spaces: TMATMUL on the cube unit (binary problems), row reductions on the
vector cores (unary problems, `vector_space`).

A binary problem is seen as a GEMM (`gemm_view`; conv2d as implicit GEMM, img2col L1->L0A,
hardware-facts.md §3.2 step 8). One point of the space fixes:

- ``base_m``, ``base_k``, ``base_n``: the instruction tile (one TMATMUL on L0A/L0B/L0C);
- ``l1_m``, ``l1_k``, ``l1_n``: how many base tiles one L1 tile holds (K chunking: the
  ``l1_k`` base tiles of one L1 chunk and all chunks accumulate into L0C);
- ``double_buffer``: ping-pong buffers in L1/L0A/L0B so MTE2, MTE1 and the cube overlap;
- ``core_grid``: ``BxMxN`` distribution of output blocks over the AI cores.

The loop nest of a point is drawn in `costmodels.ascend.mapping`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from costmodels.ascend.hardware import AscendHardware
from costmodels.ascend.tiling import capped_choices, core_grids, exact_tiles, round_up
from costmodels.ascend.vector import ROW_BLOCKS, VectorSetup
from costmodels.gemm_view import GemmView, gemm_view
from costmodels.protocol import Param, SearchSpace
from workload import dtypes
from workload.problem import Problem

BASE_MN = (16, 32, 64, 128, 256, 512)
K_MULTS = (1, 2, 4, 8, 16)
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


def cube_space(s: CubeSetup) -> SearchSpace:
    """Base tiles, L1 multiples, double buffering and core grids, capped to the problem's size."""
    v, hw = s.view, s.hw
    mp, np_, kp = round_up(v.M, hw.fractal_m), round_up(v.N, hw.fractal_n), round_up(v.K, s.k0)
    rec_m, rec_k, rec_n = hw.recommended_base_mkn
    bm = capped_choices((*BASE_MN[:-1], rec_m), mp)
    bn = capped_choices((*BASE_MN, rec_n), np_)
    bk = capped_choices((*(s.k0 * f for f in K_MULTS), rec_k), kp)
    grids = core_grids(hw.aic_cores, v.B, -(-v.M // hw.fractal_m), -(-v.N // hw.fractal_n))

    def mults(base: tuple[int, ...], values: tuple[int, ...], extent: int) -> tuple[int, ...]:
        return capped_choices(values, -(-extent // min(base)))

    return SearchSpace(
        params=(
            Param(name="base_m", choices=bm, doc="rows of one TMATMUL (L0A/L0C tile)"),
            Param(name="base_k", choices=bk, doc="reduction depth of one TMATMUL (L0A/L0B tile)"),
            Param(name="base_n", choices=bn, doc="columns of one TMATMUL (L0B/L0C tile)"),
            Param(name="l1_m", choices=mults(bm, L1_MULTS, mp), doc="base tiles along M per L1 tile"),
            Param(name="l1_k", choices=mults(bk, L1_K_MULTS, kp), doc="base tiles along K per L1 chunk"),
            Param(name="l1_n", choices=mults(bn, L1_MULTS, np_), doc="base tiles along N per L1 tile"),
            Param(name="double_buffer", choices=(True, False), doc="ping-pong L1/L0A/L0B buffers"),
            Param(name="core_grid", choices=grids, doc="BxMxN cores sharing the output blocks"),
        )
    )


def vector_space(s: VectorSetup) -> SearchSpace:
    return SearchSpace(
        params=(
            Param(name="row_block", choices=capped_choices(ROW_BLOCKS, s.rows), doc="rows of one UB tile"),
            Param(name="col_block", choices=exact_tiles(s.cols_axes) or (1,), doc="columns of one UB tile"),
            Param(name="double_buffer", choices=(True, False), doc="ping-pong UB source tiles"),
        )
    )


def build_space(problem: Problem, hw: AscendHardware, setup: CubeSetup | VectorSetup | None = None) -> SearchSpace:
    """The mapping choices of a problem: TMATMUL tiles when binary, row-reduction tiles when unary
    (`setup`: the problem's cube or vector setup, when already at hand)."""
    if problem.is_binary:
        return cube_space(setup if isinstance(setup, CubeSetup) else cube_setup(problem, hw))
    return vector_space(setup if isinstance(setup, VectorSetup) else VectorSetup(problem=problem, hw=hw))
