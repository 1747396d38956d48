"""Ascend points -> loop nests: a TMATMUL point over the cube cores, a row-reduction point over the
vector cores; each mapping's knobs carry the point and the PTO tile types it declares.

The cube nest, outermost first: ``cores`` (spatial) > ``blocks`` (output L1 blocks of one core,
N innermost, or N outermost where the model runs them B-resident: cost.py, Block loop order)
> ``l1`` (K chunks, MTE2 GM->L1) > ``l0`` (base tiles, MTE1 L1->L0A/B) > ``tile`` (TMATMUL).
The vector nest: ``vcores`` (spatial) > ``blocks`` > ``tile`` (one UB tile).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from costmodels.ascend.cost import cube_consts, cube_model
from costmodels.ascend.cube_tables import cube_tables
from costmodels.ascend.space import CUBE_PARAMS, CubeSetup
from costmodels.ascend.tiling import GroupNest, Side, nest_group, parse_grid, round_up
from costmodels.ascend.vector import VECTOR_PARAMS, VectorSetup
from costmodels.family import zero_fill
from costmodels.ir import Level, Loop, Mapping
from costmodels.param_tables import gather_fields
from costmodels.protocol import Choice


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

    def nest(group: str, inner: tuple[int, ...], side: Side) -> GroupNest:
        """The group's levels: `inner`, then the cores (innermost first, or per axis: ascend/grids.py), blocks."""
        axes = s.axes(group)
        if isinstance(side, int):
            return nest_group(axes, (*inner, side))
        if len(side) != len(axes):
            raise ValueError(f"core grid {point['core_grid']!r}: a per-axis side gives {len(side)} counts "
                             f"for a group of {len(axes)} axes")  # fmt: skip
        return nest_group(axes, inner, side)

    return CubeNests(
        b=nest("b", (), gb),
        m=nest("m", (int(point["base_m"]), int(point["l1_m"])), gm),
        n=nest("n", (int(point["base_n"]), int(point["l1_n"])), gn),
        k=nest_group(s.axes("k"), (int(point["base_k"]), int(point["l1_k"]))),
    )


def resident_b(s: CubeSetup, point: dict[str, Choice]) -> bool:
    """Whether the model runs this point's block loops B-resident (N outermost; cost.py, Block loop order)."""
    tables = cube_tables(s, tuple((point[k],) for k in CUBE_PARAMS))
    f = gather_fields(tables, [np.zeros(1, dtype=np.intp)] * len(CUBE_PARAMS), (1,) * len(CUBE_PARAMS))
    return bool(cube_model(cube_consts(s), f)["b_resident"][0])


def _loops(nest: GroupNest, level: int, spatial: bool = False) -> list[Loop]:
    return [
        Loop(axis=a, factor=f, spatial=spatial) for a, f in zip(nest.axes, nest.factors[level], strict=True) if f > 1
    ]


def point_errors(point: dict[str, Choice], names: tuple[str, ...]) -> list[str]:
    """Why `point` is not a point of the cube (`CUBE_PARAMS`) or vector (`VECTOR_PARAMS`) space the builders can read
    (empty when it is): each of `names` present, the sizes whole and at least 1, double_buffer a boolean."""
    errs = [f"{n} is missing" for n in names if n not in point]
    for n in names:
        v = point.get(n)
        if n not in point or n == "core_grid":  # (the grid's own parser says what is wrong with it)
            continue
        if n == "double_buffer":
            if not isinstance(v, bool | np.bool_):
                errs.append(f"double_buffer={v!r} must be true or false")
        elif isinstance(v, bool | np.bool_) or not isinstance(v, numbers.Integral) or int(v) < 1:
            errs.append(f"{n}={v!r} must be a whole number of at least 1")
    return errs


def _readable(point: dict[str, Choice], names: tuple[str, ...]) -> None:
    errs = point_errors(point, names)
    if errs:
        raise ValueError(f"not a point of this target: {'; '.join(errs)}")


def cube_mapping(s: CubeSetup, preset: str, point: dict[str, Choice]) -> Mapping:
    """The loop nest of one point; knobs carry the point and the PTO tile types it declares.

    Raises:
        ValueError: the point is not one it can read (`point_errors`, or a core grid that is not BxMxN)."""
    _readable(point, CUBE_PARAMS)
    ns = cube_nests(s, point)
    hw = s.hw
    rows, cols = _loops(ns.b, 1) + _loops(ns.m, 3), _loops(ns.n, 3)
    blocks = cols + rows if resident_b(s, point) else rows + cols  # the order cost.py prices
    levels = (
        Level(name="cores", loops=tuple(_loops(ns.b, 0, True) + _loops(ns.m, 2, True) + _loops(ns.n, 2, True))),
        Level(name="blocks", loops=tuple(blocks)),
        Level(name="l1", loops=tuple(_loops(ns.k, 2))),
        Level(name="l0", loops=tuple(_loops(ns.m, 1) + _loops(ns.n, 1) + _loops(ns.k, 1))),
        Level(name="tile", loops=tuple(_loops(ns.m, 0) + _loops(ns.k, 0) + _loops(ns.n, 0))),
    )
    fill = zero_fill(s.problem, levels, s.view.k_axes)  # fractal padding is zero (hardware-facts.md §3.2 step 1)
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


def vector_mapping(s: VectorSetup, preset: str, point: dict[str, Choice]) -> Mapping:
    """The loop nest of one point; knobs carry the point and the tile types it declares.

    Raises:
        ValueError: the point is not one it can read (`point_errors`)."""
    _readable(point, VECTOR_PARAMS)
    rn = nest_group(s.rows_axes, (int(point["row_block"]), s.hw.aiv_cores))
    cn = nest_group(s.cols_axes, (int(point["col_block"]),))

    def loops(n: GroupNest, level: int, spatial: bool = False) -> tuple[Loop, ...]:
        return tuple(
            Loop(axis=a, factor=f, spatial=spatial) for a, f in zip(n.axes, n.factors[level], strict=True) if f > 1
        )

    levels = (
        Level(name="vcores", loops=loops(rn, 1, True)),
        Level(name="blocks", loops=loops(rn, 2) + loops(cn, 1)),
        Level(name="tile", loops=loops(rn, 0) + loops(cn, 0)),
    )
    r, c = rn.size(0), cn.size(0)
    dt = s.compute_dtype
    knobs: dict[str, int | float | str | bool] = {k: point[k] for k in VECTOR_PARAMS}
    knobs.update(
        engine="vector",
        instruction=s.instruction,
        src_tile=f"{r}x{c}",
        tmp_tile=f"{r}x{c}",
        dst_tile=f"{r}x1",
        src_layout="ND",
        dst_layout="DN",
        load_layout="DN" if s.transposed else "ND",  # as MTE2 brings the tile from GM (vector.py docstring)
        src_dtype=dt,
        dst_dtype=dt,
    )
    return Mapping(target=preset, levels=levels, acc_dtype=dt, knobs=knobs)
