"""The loop nest of a mapping drawn as nested tiles, each with the memory that holds each operand.

Level i's tile is what one iteration of the levels outside it leaves to do: for every axis, the
product of the factors of its loops at level i and inside (padding included), and for every
operand the extent of each of its dimensions over those axis extents (a sliding-window dimension
``oh:2 + fh`` spans ``2 (oh - 1) + fh``). The outermost tile is the whole (padded) problem, the
innermost one instruction.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.patches import Rectangle

from costmodels.gemm_view import gemm_view
from costmodels.ir import Mapping
from report.residency import residency
from report.svg import new_figure, svg_text
from workload.problem import Operand, Problem


@dataclass(frozen=True)
class NestLevel:
    """One level of the nest as the report shows it."""

    name: str
    loops: str  # "m x2*, k x8" (* spatial)
    axis_extent: dict[str, int]  # the level's tile, per axis
    operand_tile: dict[str, tuple[int, ...]]  # operand name -> tile shape
    memory: dict[str, str]  # operand name -> memory holding its tile ("" unknown)


def operand_roles(problem: Problem) -> dict[str, str]:
    """Operand name -> role (moving, stationary, output) as in `costmodels.gemm_view`."""
    out = {problem.output.name: "output"}
    if problem.is_binary:
        view = gemm_view(problem)
        out[problem.inputs[view.moving].name] = "moving"
        out[problem.inputs[view.stationary].name] = "stationary"
    else:
        out[problem.inputs[0].name] = "moving"
    return out


def _tile(operand: Operand, extent: dict[str, int]) -> tuple[int, ...]:
    return tuple(sum(t.coeff * (extent.get(t.axis, 1) - 1) for t in d.terms) + 1 for d in operand.dims)


def nest_levels(problem: Problem, mapping: Mapping, family: str) -> list[NestLevel]:
    """Every level of the mapping, outermost first, with its tile and memories."""
    roles = operand_roles(problem)
    out: list[NestLevel] = []
    for i, level in enumerate(mapping.levels):
        extent = {a: 1 for a in problem.axes}
        for lvl in mapping.levels[i:]:
            for lp in lvl.loops:
                extent[lp.axis] = extent.get(lp.axis, 1) * lp.factor
        mem = residency(family, level.name, mapping.knobs, binary=problem.is_binary)
        loops = ", ".join(f"{lp.axis} x{lp.factor}{'*' if lp.spatial else ''}" for lp in level.loops) or "-"
        out.append(
            NestLevel(
                name=level.name,
                loops=loops,
                axis_extent=extent,
                operand_tile={o.name: _tile(o, extent) for o in problem.operands},
                memory={o.name: mem.get(roles[o.name], "") for o in problem.operands},
            )
        )
    return out


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(s) for s in shape)


def nest_svg(levels: list[NestLevel]) -> str:
    """Nested rectangles, outermost level outside; each names its loops and each operand's tile and memory."""
    n = len(levels)
    band = 0.62  # inches per level
    fig = new_figure(7.6, band * n + 0.2)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    step_y = 1.0 / (n + 0.3)
    colors = ["#eef3fb", "#dce8f7", "#c9dcf2", "#b5cfec", "#a2c2e6", "#8fb5e0", "#7ca8da", "#699bd4"]
    for i, lv in enumerate(levels):
        inset = 0.018 * i
        top = 1 - i * step_y - 0.01
        rect = Rectangle(
            (inset + 0.005, 0.01 + 0.012 * i), 0.99 - 2 * inset, top - 0.01 - 0.012 * i,
            facecolor=colors[i % len(colors)], edgecolor="#2b4a6f", linewidth=1.0,
        )  # fmt: skip
        rect.set_gid(f"level-{i}")
        ax.add_patch(rect)
        ops = "   |   ".join(
            f"{name} {_shape(shape)}" + (f" in {lv.memory[name]}" if lv.memory.get(name) else "")
            for name, shape in lv.operand_tile.items()
        )
        ax.text(inset + 0.015, top - 0.012, f"{lv.name}: {lv.loops}", va="top", ha="left", fontsize=9, weight="bold")
        ax.text(inset + 0.015, top - 0.012 - step_y * 0.42, ops, va="top", ha="left", fontsize=8, color="#1d2d44")
    return svg_text(fig, label=f"loop nest of {n} levels, outermost outside", name="nest")
