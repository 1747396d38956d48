"""Readable dump of a Trainium mapping: one loop per line, then the NKI tile shapes."""

from __future__ import annotations

import math

from costmodels.ir import Mapping
from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.nest import roles_of
from workload import dtypes
from workload.problem import Problem

_KIND = {
    "chip": "spatial over NeuronCores",
    "hbm": "SBUF block loop (DMA from HBM)",
    "sbuf": "tile loop inside the block",
    "nc_matmul": "inside one instruction",
}


def render_mapping(problem: Problem, hw: TrainiumHardware, preset: str, mapping: Mapping) -> str:
    """Loop nest (level, axis, factor, kind) and the nc_matmul stationary/moving/PSUM tile shapes."""
    if not problem.is_binary:
        return f"{preset}: unary problem, not mapped to the tensor engine"
    roles = roles_of(problem, str(mapping.knobs.get("stationary", "weight")))
    st, mv = problem.inputs[roles.stat_input], problem.inputs[roles.mov_input]
    lines = [
        f"{preset} ({hw.generation}, {hw.cores_per_chip} cores): {problem.summary()}",
        f"stationary = {st.name} ({mapping.knobs.get('stationary', 'weight')}), moving = {mv.name}"
        f", acc = {mapping.knobs.get('acc', 'sbuf')}, block order = {mapping.knobs.get('order', '-')}",
        f"{'level':<10} {'axis':<8} {'factor':>7}  kind",
    ]
    for lvl in mapping.levels:
        if not lvl.loops:
            lines.append(f"{lvl.name:<10} {'-':<8} {1:>7}  {_KIND.get(lvl.name, '')}")
        for lp in lvl.loops:
            kind = _KIND.get(lvl.name, "spatial" if lp.spatial else "temporal")
            lines.append(f"{lvl.name:<10} {lp.axis:<8} {lp.factor:>7}  {kind}")
    tile = next((lvl for lvl in mapping.levels if lvl.name == "nc_matmul"), None)
    loops = tile.loops if tile else ()

    def size(role: str) -> int:
        return math.prod(lp.factor for lp in loops if lp.axis in roles.axes[role])

    k, s, m = size("k"), size("s"), size("m")
    sn, mn = dtypes.canonical_dtype(st.dtype), dtypes.canonical_dtype(mv.dtype)
    lines.append(
        f"nc_matmul: stationary [{k} partition ({roles.label('k')}), {s} free ({roles.label('s')})] {sn}, "
        f"moving [{k}, {m} free ({roles.label('m')})] {mn} -> PSUM [{s}, {m}] fp32"
    )
    fp32 = "f32" in (sn, mn)
    cyc = max(min(hw.matmul_floor_cycles, s), m) * (hw.fp32_cost_factor if fp32 else 1)
    times = f" x {hw.fp32_cost_factor:g}" if fp32 else ""
    lines.append(f"instruction cost: max(min({hw.matmul_floor_cycles}, {s}), {m}){times} = {cyc:g} cycles")
    return "\n".join(lines)
