"""Unary reductions on the Ascend vector cores (AIV): TROWPROD, and TROWSUM/TROWMAX/TROWMIN.

A unary problem is a row reduction: rows = the output (free) axes, columns = the reduced axes.
One point of the space fixes ``row_block`` (rows of one UB tile), ``col_block`` (columns of one
tile; a whole row, or an exact part of it whose partial results a vector op combines) and
``double_buffer`` (MTE2 GM->UB overlapping the vector work). Row blocks are spread over the AIV
cores. The loop nest: ``vcores`` (spatial rows) > ``blocks`` (rows, column chunks) > ``tile``.

What is modelled (hardware-facts.md §3.1 TROWPROD rows, §3.2 step 7):

- product on A2/A3: no ``vcmul`` (pto-trowprod.txt, Implementation Notes), so per row a
  ``vector_dup`` of tmp, one ``vmul`` per 32 B block under ``pipe_barrier`` (43 cycles each),
  then a scalar product of the 8 (fp32) / 16 (fp16) partials with V->S and S->V syncs;
- product on A5: ``vmul`` over the row's 256 B registers, then a ``vintlv``+``vmul`` tree of
  7 (b16) / 6 (b32) steps, about one VF instruction per cycle (ASSUMPTION of the sheet);
- sum, max, min: the ``vcadd``-style row reduction, 7 cycles per 256 B repeat plus a 14-cycle
  head and 32-cycle tail, after ``vadd``-folding longer rows (2 cycles per repeat); max and min
  are priced like sum (ASSUMPTION: vcmax/vcmin cost as vcadd);
- a TCVT pass when the input dtype differs from the compute dtype (f32 if either side is f32, or
  for a sum or product the problem declares f32 accumulation for: every float problem does, so an
  f16 row sum or product converts its tile to f32, reduces in f32 and converts the result back);
- a transposed load when the reduced axes are not the input's contiguous ones (``ji->i``: the
  kept axis ``i`` is innermost in memory). TROWPROD (like TROWSUM) reduces the rows of an ND
  (row-major) src tile (pto-trowprod.txt, Constraints: "Tile layout of src: ND fractal
  (isRowMajor ...)"; Math Interpretation: ``dst[i,0] = prod_j src[i,j]``), and hardware-facts.md §3.1
  (TROWPROD dtypes / layout) lists no column-reduction form; TMATMUL's operand layouts are fixed
  fractals too (pto-tmatmul.txt, Constraints). So MTE2 brings in the tile as it lies in GM, columns x
  rows (DN with respect to the reduction), and a transpose (PTO's TTRANS) makes it ND before the
  reduction. [ASSUMPTION] The references give no cycle count for a transpose: it is priced as one
  elementwise vector instruction over the tile's bytes (`_vec_op`: the fixed cost plus 2 cycles per
  256 B repeat, hardware-facts.md §3.1 Vector unit), and the DN tile MTE2 writes is its own UB
  buffer, double-buffered like the src; its short strided bursts move at the GM->UB rate like any
  load (no reference gives a burst-size penalty). A column reduction by elementwise ``vmul``/``vadd`` across
  the rows of the DN tile would avoid the transpose; it is not modelled (no reference prices it
  against the row instructions), so the model prices what the references describe.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodels.ascend.hardware import AscendHardware
from costmodels.ascend.tiling import nest_group, round_up
from workload import dtypes
from workload.problem import Problem

ROW_BLOCKS = (8, 16, 32, 64, 128, 256, 512, 1024)
VECTOR_PARAMS = ("row_block", "col_block", "double_buffer")
INSTRUCTION = {"mul": "TROWPROD", "add": "TROWSUM", "max": "TROWMAX", "min": "TROWMIN"}


def accumulates_narrower(problem: Problem, dtype: str) -> bool:
    """Would a row reduction computed in `dtype` accumulate in less than the problem declares?

    Sums and products round each partial in the compute type; max and min select an element, exact in any.
    """
    rounds = problem.reduce_op in ("add", "mul")
    return rounds and dtypes.info(dtype).bits < dtypes.info(problem.acc_dtype).bits


@dataclass(frozen=True)
class VectorSetup:
    """Problem-level facts of a row reduction on one Ascend preset."""

    problem: Problem
    hw: AscendHardware

    @property
    def rows_axes(self) -> tuple[tuple[str, int], ...]:
        return tuple((a, self.problem.axes[a]) for a in self.problem.axes if a in self.problem.free_axes)

    @property
    def cols_axes(self) -> tuple[tuple[str, int], ...]:
        return tuple((a, self.problem.axes[a]) for a in self.problem.reduction_axes)

    @property
    def rows(self) -> int:
        return int(np.prod([s for _, s in self.rows_axes], dtype=np.int64))

    @property
    def cols(self) -> int:
        return int(np.prod([s for _, s in self.cols_axes], dtype=np.int64))

    @property
    def src_dtype(self) -> str:
        return self.problem.inputs[0].dtype

    @property
    def compute_dtype(self) -> str:
        """TROWPROD needs dst.DType == src.DType (pto-trowprod.txt): compute in f32 if either side is, or
        when the reduction rounds (a sum or a product) and the problem declares an f32 accumulator: a half
        TROWPROD/TROWSUM rounds every vmul/vadd partial to half, a narrower accumulator than the problem's
        (`accumulates_narrower`). A max or min of halves is exact in half, so it stays in half."""
        if "f32" in (self.src_dtype, self.problem.output.dtype):
            return "f32"
        return "f32" if accumulates_narrower(self.problem, "f16") else "f16"

    @property
    def instruction(self) -> str:
        return INSTRUCTION[self.problem.reduce_op]

    @property
    def transposed(self) -> bool:
        """The input's innermost dimensions after its last reduced one are kept axes of more than one
        element: a tile of the input is DN for TROWPROD and needs a transpose (module docstring)."""
        op = self.problem.inputs[0]
        red = set(self.problem.reduction_axes)
        axes = [d.axes[0] if d.is_plain() else None for d in op.dims]
        last = max((i for i, a in enumerate(axes) if a in red), default=-1)
        inner = [a for a in axes[last + 1 :] if a is not None]
        return int(np.prod([self.problem.axes[a] for a in inner], dtype=np.int64)) > 1

    @property
    def contiguous_axis(self) -> str:
        """The input's innermost axis (the one contiguous in memory)."""
        return self.problem.inputs[0].dims[-1].axes[-1]

    @property
    def in_ratio(self) -> float:
        full = self.rows * self.cols * dtypes.info(self.src_dtype).bytes
        return min(1.0, self.problem.input_bytes[0] / full) if full else 1.0


def vector_arrays(s: VectorSetup, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-point tile rows/cols, row blocks per core, column chunks and cores used."""
    rb_col = np.asarray(columns["row_block"], dtype=np.int64)
    cb_col = np.asarray(columns["col_block"], dtype=np.int64)
    out: dict[str, np.ndarray] = {}
    uniq, inv = np.unique(rb_col, return_inverse=True)
    rows = np.array([[nest_group(s.rows_axes, (int(u), s.hw.aiv_cores)).size(i) for i in range(3)] for u in uniq])
    rows = rows.reshape(-1, 3)[inv.reshape(-1)]
    out["r0"], out["r1"], out["r2"] = rows[:, 0], rows[:, 1], rows[:, 2]
    uniq, inv = np.unique(cb_col, return_inverse=True)
    cols = np.array([[nest_group(s.cols_axes, (int(u),)).size(i) for i in range(2)] for u in uniq]).reshape(-1, 2)
    cols = cols[inv.reshape(-1)]
    out["c0"], out["c1"] = cols[:, 0], cols[:, 1]
    out["db"] = np.asarray(columns["double_buffer"], dtype=bool).reshape(-1)
    return out


def _vec_op(hw: AscendHardware, nbytes: np.ndarray) -> np.ndarray:
    """One elementwise vector instruction (vmul/vadd/vdup/TCVT) over `nbytes`: fixed + 2 cycles/repeat."""
    return hw.vector_fixed_cycles + hw.vector_repeat_cycles * -(-nbytes // hw.vector_repeat_bytes)


def row_reduce_cycles(hw: AscendHardware, op: str, dtype: str, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Cycles of one row-reduction instruction on a ``rows x cols`` UB tile (module docstring)."""
    sc = int(dtypes.info(dtype).bytes)
    row_bytes = cols * sc
    repeats = -(-row_bytes // hw.vector_repeat_bytes)
    if op == "mul" and hw.rowprod_register_tree:
        steps = hw.rowprod_tree_steps_b16 if sc == 2 else hw.rowprod_tree_steps_b32
        per_row = hw.vf_cycles_per_instruction * (2 * repeats + 2 * steps)
        return hw.vector_fixed_cycles + rows * per_row
    if op == "mul":
        blocks = -(-row_bytes // hw.vector_block_bytes)
        epb = hw.vector_block_bytes // sc  # partials left for the scalar tail: 8 fp32, 16 fp16
        dup = _vec_op(hw, row_bytes)
        per_row = blocks * hw.rowprod_block_cycles + dup + epb * hw.rowprod_scalar_cycles_per_element
        return rows * (per_row + 2 * hw.rowprod_sync_cycles)
    per_row = hw.vector_repeat_cycles * (repeats - 1) + hw.vcadd_repeat_cycles
    return hw.vcadd_head_cycles + hw.vcadd_tail_cycles + rows * per_row


def vector_terms(s: VectorSetup, a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every intermediate quantity of the vector cost model, one entry per point."""
    hw = s.hw
    s_in = dtypes.info(s.src_dtype).bytes
    sc = dtypes.info(s.compute_dtype).bytes
    so = dtypes.info(s.problem.output.dtype).bytes
    rb, cores_used, rpc, cc, chunks, db = a["r0"], a["r1"], a["r2"], a["c0"], a["c1"], a["db"]
    al = hw.alignment_bytes
    src = rb * round_up(cc * sc, al)
    dst = round_up(rb * sc, al)
    cvt_in = rb * round_up(cc * s_in, al) if s.src_dtype != s.compute_dtype else np.zeros_like(src)
    ub = (src + cvt_in) * (1 + db) + src + dst * np.where(chunks > 1, 2, 1)
    t_tile = row_reduce_cycles(hw, s.problem.reduce_op, s.compute_dtype, rb, cc)
    t_trans = np.zeros_like(t_tile)
    if s.transposed:  # the DN tile as loaded (cc rows of rb contiguous elements), then TTRANS into src
        ub = ub + cc * round_up(rb * s_in, al) * (1 + db)
        t_trans = _vec_op(hw, rb * cc * s_in) + np.zeros_like(t_tile)
        t_tile = t_tile + t_trans
    if s.src_dtype != s.compute_dtype:
        t_tile = t_tile + _vec_op(hw, rb * cc * sc)
    t_comb = _vec_op(hw, rb * sc)
    t_out = _vec_op(hw, rb * sc) if s.problem.output.dtype != s.compute_dtype else np.zeros_like(t_comb)
    vec = rpc * (chunks * t_tile + (chunks - 1) * t_comb + t_out)
    in_bytes = rpc * chunks * rb * cc * s_in * s.in_ratio
    out_bytes = rpc * rb * so
    mte2 = in_bytes / hw.gm_to_ub_bytes_per_cycle
    mte3 = out_bytes / hw.ub_to_gm_bytes_per_cycle
    steps = rpc * chunks
    serial = mte2 + vec + mte3
    top = np.maximum(np.maximum(mte2, vec), mte3)
    core = np.where(db, top + (serial - top) / steps, serial)
    offchip = np.maximum(float(s.problem.min_bytes), cores_used * (in_bytes + out_bytes))
    hbm = offchip / (hw.aic_cores * hw.hbm_bytes_per_cycle_per_core)
    return {
        "ub": ub,
        "src": src,
        "vector": vec,
        "transpose": rpc * chunks * t_trans,
        "mte2": mte2,
        "mte3": mte3,
        "hbm": hbm,
        "core": core,
        "cycles": np.maximum(core, hbm),
        "offchip": offchip,
        "footprint": ub,
        "cores_used": cores_used,
        "ub_in": cores_used * in_bytes,
        "ub_out": cores_used * out_bytes,
    }


def vector_feasible(s: VectorSetup, t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"ub-capacity": t["ub"] <= s.hw.ub_bytes}


def vector_peak_cycles(s: VectorSetup) -> float:
    """Vector roofline: one 256 B repeat per cycle per AIV (ASSUMPTION, a generous peak)."""
    total = s.rows * s.cols * dtypes.info(s.compute_dtype).bytes
    return total / (s.hw.aiv_cores * s.hw.vector_repeat_bytes)


__all__ = [
    "VECTOR_PARAMS",
    "VectorSetup",
    "accumulates_narrower",
    "row_reduce_cycles",
    "vector_arrays",
    "vector_feasible",
    "vector_peak_cycles",
    "vector_terms",
]
