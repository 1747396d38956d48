"""The PTO rules a problem or a mapping must follow on Ascend, each with a reason.

Problem level (`supports`): TMATMUL only sums products, over the (accumulator, left, right)
dtype triples of the generation (pto-tmatmul.txt, Constraints); row reductions run in half or
float (pto-trowprod.txt, Constraints, Data types).

Mapping level: the tile types a mapping declares in its knobs (the static ``TileLeft``,
``TileRight``, ``TileAcc`` / TROWPROD ``src``, ``tmp``, ``dst`` template parameters) must obey
the static shape relations, fractal multiples and layouts of the references, and must hold the
instruction tile of the loop nest. Capacity and range rules live with the cost formulas
(ascend/cost.py, ascend/vector.py) because they depend on the point.
"""

from __future__ import annotations

import math

from costmodels.ascend.hardware import AscendHardware
from costmodels.ascend.vector import INSTRUCTION, accumulates_narrower
from costmodels.family import KNOBS, block_float_refusal
from costmodels.gemm_view import gemm_view
from costmodels.ir import Mapping
from costmodels.protocol import Violation
from workload.problem import Problem

#: every code `supports` and `check` can return (problem level, knobs and coverage, the cube's rules
#: and capacities, the vector cores' rules)
CODES: tuple[str, ...] = (
    "cube-reduce-op",
    "tmatmul-dtype",
    "trowprod-dtype",
    KNOBS,
    "coverage",
    "tmatmul-range",
    "l0a-capacity",
    "l0b-capacity",
    "l0c-capacity",
    "l1-capacity",
    "core-count",
    "tile-shape",
    "fractal",
    "tile-layout",
    "tile-valid",
    "ub-capacity",
    "trowprod-empty",
    "trowprod-valid-rows",
    "trowprod-dst-shape",
    "trowprod-tmp-shape",
    "trowprod-layout",
    "trowprod-accumulator",
)


def supports(problem: Problem, hw: AscendHardware, preset: str) -> list[Violation]:
    """Problem-level reasons the preset cannot run `problem` at all."""
    out: list[Violation] = []
    if problem.is_binary:
        if problem.reduce_op != "add":
            out.append(
                Violation(
                    code="cube-reduce-op",
                    message=f"the cube unit (TMATMUL) sums products; a {problem.reduce_op}-reduction of a product of "
                    "two inputs has no Ascend instruction: use reduce op add",
                )
            )
        v = gemm_view(problem)
        left, right = problem.inputs[v.moving].dtype, problem.inputs[v.stationary].dtype
        acc = problem.acc_dtype
        refusals = [r for o in problem.inputs if (r := block_float_refusal(o.name, o.dtype))]
        if refusals:
            out += [Violation(code="tmatmul-dtype", message=r) for r in refusals]
        elif not hw.supports_triple(acc, left, right):
            triples = ", ".join(f"({a}, {b}, {c})" for a, b, c in hw.matmul_triples)
            out.append(
                Violation(
                    code="tmatmul-dtype",
                    message=f"TMATMUL on {preset} ({hw.generation}) has no (accumulator, left, right) = "
                    f"({acc}, {left}, {right}) triple; supported: {triples} (pto-tmatmul.txt, Constraints): "
                    "convert the inputs to a supported pair",
                )
            )
        return out
    allowed = ", ".join(hw.vector_dtypes)
    src, dst = problem.inputs[0].dtype, problem.output.dtype
    refusal = block_float_refusal(problem.inputs[0].name, src)
    if refusal:
        out.append(Violation(code="trowprod-dtype", message=refusal))
    for role, d in (("input", src), ("output", dst)):
        if d not in hw.vector_dtypes and not (refusal and role == "input"):
            out.append(
                Violation(
                    code="trowprod-dtype",
                    message=f"row reductions (TROWPROD/TROWSUM) on {preset} take {allowed}; the {role} is {d} "
                    f"(pto-trowprod.txt, Data types): use an {allowed} {role}",
                )
            )
    return out


def _shape(text: object) -> tuple[int, int] | None:
    parts = str(text).split("x")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def _tile_size(mapping: Mapping, axes: tuple[str, ...]) -> int:
    tile = mapping.levels[-1]
    return math.prod(lp.factor for lp in tile.loops if lp.axis in axes)


def cube_tile_rules(problem: Problem, hw: AscendHardware, mapping: Mapping, k0: int) -> list[Violation]:
    """TileLeft/TileRight/TileAcc of the knobs: shapes, fractals, layouts, and the nest's tile."""
    kn = mapping.knobs
    left, right, acc = (_shape(kn.get(k)) for k in ("tile_left", "tile_right", "tile_acc"))
    if left is None or right is None or acc is None:
        return [Violation(code="knobs", message="the mapping does not declare its tile types as RxC: rebuild it")]
    out: list[Violation] = []
    if not (left[0] == acc[0] and left[1] == right[0] and right[1] == acc[1]):
        out.append(
            Violation(
                code="tile-shape",
                message=f"TileLeft {left[0]}x{left[1]}, TileRight {right[0]}x{right[1]}, TileAcc {acc[0]}x{acc[1]} "
                "break TileLeft::Rows == TileRes::Rows, TileLeft::Cols == TileRight::Rows, "
                "TileRight::Cols == TileRes::Cols (pto-tmatmul.txt, Static shape constraints)",
            )
        )
    fm, fn = hw.fractal_m, hw.fractal_n
    if left[0] % fm or left[1] % k0 or right[0] % k0 or right[1] % fn or acc[0] % fm or acc[1] % fn:
        out.append(
            Violation(
                code="fractal",
                message=f"tiles must be whole fractals: rows of TileLeft/TileAcc multiples of {fm}, K multiples of "
                f"{k0} (32 B / element size), columns of TileRight/TileAcc multiples of {fn} "
                "(hardware-facts.md §3.1 Fractal layout): pad m, k, n up",
            )
        )
    layouts = {"left_layout": "Nz", "right_layout": "Zn", "acc_layout": "Nz"}
    bad = [f"{k}={kn.get(k)!r}" for k, want in layouts.items() if kn.get(k) != want]
    if bad:
        out.append(
            Violation(
                code="tile-layout",
                message=f"{', '.join(bad)}: TMATMUL needs Left in Nz (!isRowMajor, SFractal RowMajor), Right in Zn "
                "(isRowMajor, SFractal ColMajor), Acc in Nz (pto-tmatmul.txt, Fractal/layout constraints)",
            )
        )
    v = gemm_view(problem)
    m, k, n = _tile_size(mapping, v.m_axes), _tile_size(mapping, v.k_axes), _tile_size(mapping, v.n_axes)
    if m > left[0] or k > left[1] or n > right[1]:
        out.append(
            Violation(
                code="tile-valid",
                message=f"the instruction tile m={m}, k={k}, n={n} does not fit the declared TileLeft "
                f"{left[0]}x{left[1]} / TileRight {right[0]}x{right[1]}: declare larger tiles",
            )
        )
    return out


def vector_tile_rules(problem: Problem, hw: AscendHardware, mapping: Mapping) -> list[Violation]:
    """TROWPROD src/tmp/dst of the knobs (pto-trowprod.txt, Constraints)."""
    kn = mapping.knobs
    src, tmp, dst = (_shape(kn.get(k)) for k in ("src_tile", "tmp_tile", "dst_tile"))
    if src is None or tmp is None or dst is None:
        return [Violation(code="knobs", message="the mapping does not declare its src/tmp/dst tiles as RxC")]
    out: list[Violation] = []
    if src[0] == 0 or src[1] == 0:
        out.append(
            Violation(
                code="trowprod-empty",
                message=f"src tile {src[0]}x{src[1]} is empty: srcValidRow and srcValidCol must be non-zero "
                "(pto-trowprod.txt, Runtime valid checks)",
            )
        )
    if dst[0] != src[0]:
        out.append(
            Violation(
                code="trowprod-valid-rows",
                message=f"dst has {dst[0]} valid rows, src {src[0]}: srcValidRow == dstValidRow "
                "(pto-trowprod.txt, Runtime valid checks)",
            )
        )
    if dst[1] != 1:
        out.append(
            Violation(
                code="trowprod-dst-shape",
                message=f"dst tile {dst[0]}x{dst[1]}: dst is a 1-column DN tile (pto-trowprod.txt, Tile layout of dst)",
            )
        )
    if tmp != src:
        out.append(
            Violation(
                code="trowprod-tmp-shape",
                message=f"tmp tile {tmp[0]}x{tmp[1]} differs from src {src[0]}x{src[1]}: tmp must have the same "
                "shape as src (pto-trowprod.txt, Constraints)",
            )
        )
    sd, dd = kn.get("src_dtype"), kn.get("dst_dtype")
    if sd != dd or sd not in hw.vector_dtypes:
        out.append(
            Violation(
                code="trowprod-dtype",
                message=f"src {sd} / dst {dd}: dst.DType == src.DType, one of {', '.join(hw.vector_dtypes)} "
                "(pto-trowprod.txt, DType consistency, Data types)",
            )
        )
    narrow = [d for d in (str(sd), mapping.acc_dtype) if d in hw.vector_dtypes and accumulates_narrower(problem, d)]
    if narrow:
        instr, acc = INSTRUCTION[problem.reduce_op], problem.acc_dtype
        out.append(
            Violation(
                code="trowprod-accumulator",
                message=f"{instr} computes in {narrow[0]} (src/dst {sd}, accumulator {mapping.acc_dtype}), the "
                f"problem declares {acc} accumulation: a {narrow[0]} {instr} rounds every partial to {narrow[0]}. "
                f"Compute in {acc}: TCVT the input to {acc}, reduce, TCVT the result to {problem.output.dtype} "
                "(rebuild the mapping with mapping())",
            )
        )
    if kn.get("src_layout") != "ND" or kn.get("dst_layout") != "DN":
        out.append(
            Violation(
                code="trowprod-layout",
                message=f"src layout {kn.get('src_layout')!r}, dst {kn.get('dst_layout')!r}: src must be ND "
                "(row-major, NoneBox) and dst DN (1-column col-major) (pto-trowprod.txt, Tile layout)",
            )
        )
    rows = _tile_size(mapping, problem.free_axes)
    cols = _tile_size(mapping, problem.reduction_axes)
    if (rows, cols) != src:
        out.append(
            Violation(
                code="tile-valid",
                message=f"the loop nest's tile is {rows}x{cols} but the mapping declares src {src[0]}x{src[1]}",
            )
        )
    return out
