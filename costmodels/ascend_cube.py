"""TMATMUL on the Ascend cube unit: the mapping space, the loop nest, and the plan arrays.

A binary problem is seen as a GEMM (`gemm_view`; conv2d as implicit GEMM, img2col L1->L0A,
hardware-facts.md §3.2 step 8). One point of the space fixes:

- ``base_m``, ``base_k``, ``base_n``: the instruction tile (one TMATMUL on L0A/L0B/L0C);
- ``l1_m``, ``l1_k``, ``l1_n``: how many base tiles one L1 tile holds (K chunking: the
  ``l1_k`` base tiles of one L1 chunk and all chunks accumulate into L0C);
- ``double_buffer``: ping-pong buffers in L1/L0A/L0B so MTE2, MTE1 and the cube overlap;
- ``core_grid``: ``BxMxN`` distribution of output blocks over the AI cores.

The loop nest, outermost first: ``cores`` (spatial) > ``blocks`` (output L1 blocks of one core)
> ``l1`` (K chunks, MTE2 GM->L1) > ``l0`` (base tiles, MTE1 L1->L0A/B) > ``tile`` (TMATMUL).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from costmodels.ascend_hw import AscendHardware
from costmodels.ascend_tiling import GroupNest, capped_choices, core_grids, nest_group, parse_grid, round_up
from costmodels.gemm_view import GemmView, gemm_view
from costmodels.ir import Level, Loop, Mapping
from costmodels.protocol import Choice, Param, SearchSpace
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


@dataclass(frozen=True)
class CubeNests:
    """The four group nests of one point: b (core, blocks), m/n (tile, l0, core, blocks), k (tile, l0, l1)."""

    b: GroupNest
    m: GroupNest
    n: GroupNest
    k: GroupNest


def cube_nests(s: CubeSetup, point: dict[str, Choice]) -> CubeNests:
    """Split each GEMM group over the levels of one point."""
    gb, gm, gn = parse_grid(str(point["core_grid"]))
    return CubeNests(
        b=nest_group(s.axes("b"), (gb,)),
        m=nest_group(s.axes("m"), (int(point["base_m"]), int(point["l1_m"]), gm)),
        n=nest_group(s.axes("n"), (int(point["base_n"]), int(point["l1_n"]), gn)),
        k=nest_group(s.axes("k"), (int(point["base_k"]), int(point["l1_k"]))),
    )


def _loops(nest: GroupNest, level: int, spatial: bool = False) -> list[Loop]:
    return [
        Loop(axis=a, factor=f, spatial=spatial) for a, f in zip(nest.axes, nest.factors[level], strict=True) if f > 1
    ]


def cube_mapping(s: CubeSetup, preset: str, point: dict[str, Choice]) -> Mapping:
    """The loop nest of one point; knobs carry the point and the PTO tile types it declares."""
    ns = cube_nests(s, point)
    hw = s.hw
    levels = (
        Level(name="cores", loops=tuple(_loops(ns.b, 0, True) + _loops(ns.m, 2, True) + _loops(ns.n, 2, True))),
        Level(name="blocks", loops=tuple(_loops(ns.b, 1) + _loops(ns.m, 3) + _loops(ns.n, 3))),
        Level(name="l1", loops=tuple(_loops(ns.k, 2))),
        Level(name="l0", loops=tuple(_loops(ns.m, 1) + _loops(ns.n, 1) + _loops(ns.k, 1))),
        Level(name="tile", loops=tuple(_loops(ns.m, 0) + _loops(ns.k, 0) + _loops(ns.n, 0))),
    )
    fill: dict[str, dict[str, str]] = {}
    for a in s.view.k_axes:
        if ns.k.factor(0, a) * ns.k.factor(1, a) * ns.k.factor(2, a) > s.view.sizes[a]:
            for op in s.problem.inputs:
                if a in op.axes:
                    fill.setdefault(op.name, {})[a] = "zero"  # fractal padding is zero (hardware-facts.md §3.2 step 1)
    mp = round_up(ns.m.size(0), hw.fractal_m)
    kp = round_up(ns.k.size(0), s.k0)
    np_ = round_up(ns.n.size(0), hw.fractal_n)
    knobs: dict[str, int | float | str | bool] = {k: point[k] for k in CUBE_PARAMS}
    knobs.update(
        engine="cube",
        tile_left=f"{mp}x{kp}",
        tile_right=f"{kp}x{np_}",
        tile_acc=f"{mp}x{np_}",
        left_layout="Nz",
        right_layout="Zn",
        acc_layout="Nz",
    )
    return Mapping(target=preset, levels=levels, acc_dtype=s.acc, fill=fill, knobs=knobs)
