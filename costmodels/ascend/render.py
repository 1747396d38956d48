"""Readable dumps of Ascend mappings: the loop nest with the PTO tile types of each level."""

from __future__ import annotations

from costmodels.ascend.hardware import AscendHardware
from costmodels.ir import Level, Mapping
from workload.problem import Problem

#: What happens at each level of the nest, printed beside its loops.
CUBE_NOTES = {
    "cores": "output blocks over the AI cores",
    "blocks": "L1 output blocks of one core (L0C accumulates, FIX writes back)",
    "l1": "K chunks: MTE2 GM -> L1",
    "l0": "base tiles: MTE1 L1 -> L0A / L0B",
}
VECTOR_NOTES = {
    "vcores": "row blocks over the vector cores",
    "blocks": "UB tiles of one core: MTE2 GM -> UB, partials combined in UB",
}


def _loops(level: Level) -> str:
    if not level.loops:
        return "-"
    return " ".join(f"{lp.axis}:{lp.factor}{'*' if lp.spatial else ''}" for lp in level.loops)


def _nest(mapping: Mapping, notes: dict[str, str]) -> list[str]:
    lines = []
    for depth, lvl in enumerate(mapping.levels[:-1]):
        head = f"{'  ' * depth}{'par' if any(lp.spatial for lp in lvl.loops) else 'for'} {lvl.name}: {_loops(lvl)}"
        lines.append(f"{head:<48}# {notes.get(lvl.name, '')}")
    return lines


def render_mapping(problem: Problem, hw: AscendHardware, preset: str, mapping: Mapping) -> str:
    """The nest, outermost first (``*`` marks a spatial loop), ending with the instruction and its tiles."""
    kn = mapping.knobs
    ins = ", ".join(f"{o.name}[{o.dtype}]" for o in problem.inputs)
    out = f"{problem.output.name}[{problem.output.dtype}]"
    head = [f"{preset} ({hw.generation}) {problem.reduce_op}-reduction {ins} -> {out}"]
    depth = "  " * (len(mapping.levels) - 1)
    tile = _loops(mapping.levels[-1])
    if kn.get("engine") == "cube":
        a = problem.inputs[0 if problem.weight == 1 or problem.weight is None else 1].dtype
        b = problem.inputs[1 if problem.weight == 1 or problem.weight is None else 0].dtype
        lr, lc = str(kn["tile_left"]).split("x")
        rr, rc = str(kn["tile_right"]).split("x")
        cr, cc = str(kn["tile_acc"]).split("x")
        per_axis = "; a side with * gives its cores per axis, outermost first" if "*" in str(kn["core_grid"]) else ""
        head.append(
            f"core grid {kn['core_grid']} (BxMxN{per_axis}) of {hw.aic_cores} AIC; "
            f"double buffering {'on' if kn['double_buffer'] else 'off'}"
        )
        body = _nest(mapping, CUBE_NOTES)
        body.append(
            f"{depth}TMATMUL(TileAcc<{hw.cpp(mapping.acc_dtype)},{cr},{cc}>, TileLeft<{hw.cpp(a)},{lr},{lc}>, "
            f"TileRight<{hw.cpp(b)},{rr},{rc}>)   # tile {tile}; layouts Left {kn['left_layout']}, "
            f"Right {kn['right_layout']}, Acc {kn['acc_layout']}"
        )
        return "\n".join(head + body)
    sr, sc = str(kn["src_tile"]).split("x")
    dt = hw.cpp(str(kn["src_dtype"]))
    head.append(
        f"{hw.aiv_cores} AIV cores; double buffering {'on' if kn['double_buffer'] else 'off'}; "
        f"{'vmul + vintlv register tree' if hw.rowprod_register_tree else 'vmul per 32 B block + scalar tail'}"
        if kn.get("instruction") == "TROWPROD"
        else f"{hw.aiv_cores} AIV cores; double buffering {'on' if kn['double_buffer'] else 'off'}"
    )
    body = _nest(mapping, VECTOR_NOTES)
    if kn.get("load_layout") == "DN":  # the reduced axes are not contiguous in GM (ascend/vector.py docstring)
        body.append(
            f"{depth}TTRANS(Tile<Vec,{hw.cpp(problem.inputs[0].dtype)},{sr},{sc}> src <- {sc}x{sr} DN tile as loaded)"
            "   # the input's contiguous axis is kept: make the rows contiguous for the row reduction"
        )
    body.append(
        f"{depth}{kn['instruction']}(Tile<Vec,{dt},{sr},1,ColMajor> dst, Tile<Vec,{dt},{sr},{sc}> src, "
        f"Tile<Vec,{dt},{sr},{sc}> tmp)   # tile {tile}"
    )
    return "\n".join(head + body)
