"""Every Ascend constraint, tripped: TMATMUL range, dtypes, tiles and buffers; TROWPROD rules."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from costmodels.ascend.violations import CODES as CODES  # the family's codes: the `tripped` fixture reads them
from costmodels.ir import Level, Mapping
from costmodels.protocol import Choice, Violation
from costmodels.registry import get_target
from workload.einsum import einsum
from workload.problem import Problem

GEMM_POINT: dict[str, Choice] = {
    "base_m": 128,
    "base_k": 64,
    "base_n": 128,
    "l1_m": 1,
    "l1_k": 1,
    "l1_n": 1,
    "double_buffer": False,
    "core_grid": "1x1x1",
}


def gemm(m: int = 256, n: int = 256, k: int = 256, dtype: str | dict[str, str] = "f16") -> Problem:
    return einsum("mk,kn->mn", {"m": m, "n": n, "k": k}, dtype=dtype, weight=1)


def codes(preset: str, p: Problem, **point: Choice) -> set[str]:
    t = get_target(preset)
    return {v.code for v in t.check(p, t.mapping(p, {**GEMM_POINT, **point}))}


def knob_codes(preset: str, p: Problem, point: dict[str, Choice], **knobs: Choice) -> set[str]:
    t = get_target(preset)
    m = t.mapping(p, point)
    m = m.model_copy(update={"knobs": {**m.knobs, **knobs}})
    return {v.code for v in t.check(p, m)}


def test_reference_point_is_feasible() -> None:
    assert codes("ascend-910b", gemm()) == set()


@pytest.mark.parametrize("axis", ["m", "k", "n"])
def test_tmatmul_dims_above_4095_are_rejected(axis: str) -> None:
    # pto-tmatmul.txt, Runtime: m/k/n must be in [1, 4095]
    p = gemm(m=8192, n=8192, k=8192)
    assert "tmatmul-range" in codes("ascend-a5", p, **{f"base_{axis}": 4096})
    assert "tmatmul-range" not in codes("ascend-a5", p, **{f"base_{axis}": 4095})


@pytest.mark.parametrize(
    ("preset", "dtype", "ok"),
    [
        ("ascend-910b", "f16", True),
        ("ascend-910b", "bf16", True),
        ("ascend-910b", "f32", True),
        ("ascend-910b", "i8", True),
        ("ascend-910b", "f8e4m3", False),  # no fp8 on A2/A3 (pto-tmatmul.txt, A2A3 triples)
        ("ascend-910b", "i4", False),
        ("ascend-a5", "f8e4m3", True),  # A5 adds fp8 pairs
        ("ascend-a5", "f8e5m2", True),
        ("ascend-a5", "i4", False),  # fp4/int4 only through TMATMUL_MX, not modelled
        ("ascend-910b", {"A": "f16", "B": "bf16"}, False),
        ("ascend-a5", {"A": "f8e4m3", "B": "f8e5m2"}, True),
        ("ascend-a5", {"A": "f16", "B": "f8e4m3"}, False),
    ],
)
def test_dtype_triples_per_generation(preset: str, dtype: str | dict[str, str], ok: bool) -> None:
    t = get_target(preset)
    p = gemm(dtype=dtype)
    found = [v for v in t.supports(p) if v.code == "tmatmul-dtype"]
    assert (found == []) == ok
    if not ok:
        assert "supported" in found[0].message
        assert "tmatmul-dtype" in {v.code for v in t.check(p, t.mapping(p, GEMM_POINT))}
        assert not t.score_batch(p, t.space(p).columns()).feasible.any()


def test_product_contraction_is_rejected() -> None:
    p = einsum("mk,kn->mn", {"m": 32, "n": 32, "k": 32}, dtype="f16", reduce_op="mul", weight=1)
    assert {v.code for v in get_target("ascend-910b").supports(p)} == {"cube-reduce-op"}


def test_l0a_capacity_and_double_buffer_halving() -> None:
    # hardware-facts.md §3.2 step 2: m'k'sA <= 64 KiB, halved for ping-pong
    p = gemm(m=512, n=512, k=512)
    assert "l0a-capacity" in codes("ascend-910b", p, base_m=256, base_k=256)  # 128 KiB
    assert "l0a-capacity" not in codes("ascend-910b", p, base_m=256, base_k=96)  # 48 KiB
    assert "l0a-capacity" in codes("ascend-910b", p, base_m=256, base_k=96, double_buffer=True)


def test_l0b_capacity() -> None:
    p = gemm(m=512, n=1024, k=512)
    assert "l0b-capacity" in codes("ascend-910b", p, base_k=128, base_n=512)  # 128 KiB
    assert "l0b-capacity" not in codes("ascend-910b", p, base_k=64, base_n=512)  # 64 KiB


def test_l0c_capacity_per_generation() -> None:
    # L0C 128 KiB on A2/A3, 256 KiB on A5: a 256x256 fp32 accumulator is 256 KiB
    p = gemm(m=512, n=512, k=64)
    assert "l0c-capacity" in codes("ascend-910b", p, base_m=256, base_n=256, base_k=16)
    assert "l0c-capacity" not in codes("ascend-a5", p, base_m=256, base_n=256, base_k=16)
    # the accumulators of every base tile of an L1 block stay in L0C
    assert "l0c-capacity" in codes("ascend-a5", p, base_m=256, base_n=256, base_k=16, l1_n=2)


def test_l1_capacity() -> None:
    p = gemm(m=512, n=512, k=4096)
    assert "l1-capacity" in codes("ascend-910b", p, base_m=128, base_n=128, base_k=128, l1_k=16)  # 1 MiB
    assert "l1-capacity" not in codes("ascend-910b", p, base_m=128, base_n=128, base_k=128, l1_k=8)  # 512 KiB
    assert "l1-capacity" in codes("ascend-910b", p, base_m=128, base_n=128, base_k=128, l1_k=8, double_buffer=True)


def test_core_count() -> None:
    assert "core-count" in codes("ascend-910b", gemm(), core_grid="1x4x8")  # 32 > 24 AIC
    assert "core-count" not in codes("ascend-a5", gemm(), core_grid="1x4x8")  # 36 AIC
    assert "core-count" in codes("ascend-910b", gemm(), core_grid="1x4x8") - codes("ascend-910b", gemm())


def test_tile_shape_relations() -> None:
    # pto-tmatmul.txt, Static shape constraints: TileLeft::Rows == TileRes::Rows,
    # TileLeft::Cols == TileRight::Rows, TileRight::Cols == TileRes::Cols
    p = gemm()
    assert "tile-shape" in knob_codes("ascend-910b", p, GEMM_POINT, tile_acc="64x128")
    assert "tile-shape" in knob_codes("ascend-910b", p, GEMM_POINT, tile_right="32x128")
    assert "tile-shape" in knob_codes("ascend-910b", p, GEMM_POINT, tile_left="128x32")
    # a consistent set is not a shape error
    assert "tile-shape" not in knob_codes("ascend-910b", p, GEMM_POINT, tile_acc="128x64", tile_right="64x64")


def test_fractal_multiples() -> None:
    # hardware-facts.md §3.1 Fractal layout: rows multiples of 16, K multiples of k0 = 32 B / sizeof
    p = gemm()
    found = knob_codes("ascend-910b", p, GEMM_POINT, tile_left="120x64", tile_acc="120x128")
    assert "fractal" in found
    found = knob_codes(
        "ascend-910b", gemm(dtype="i8"), {**GEMM_POINT, "base_k": 64}, tile_left="128x48", tile_right="48x128"
    )
    assert "fractal" in found  # int8 k0 = 32


def test_tile_layouts() -> None:
    # pto-tmatmul.txt (A5): Left !isRowMajor/SFractal RowMajor (Nz), Right isRowMajor/ColMajor (Zn), Acc Nz
    p = gemm()
    assert "tile-layout" in knob_codes("ascend-a5", p, GEMM_POINT, left_layout="ND")
    assert "tile-layout" in knob_codes("ascend-a5", p, GEMM_POINT, right_layout="Nz")
    assert "tile-layout" not in knob_codes("ascend-a5", p, GEMM_POINT)


def test_declared_tiles_must_hold_the_instruction_tile() -> None:
    p = gemm()
    found = knob_codes("ascend-910b", p, GEMM_POINT, tile_left="64x64", tile_acc="64x128")
    assert "tile-valid" in found


def test_broken_loop_nest_is_reported() -> None:
    t = get_target("ascend-910b")
    p = gemm()
    m = t.mapping(p, GEMM_POINT)
    levels = tuple(Level(name=lv.name, loops=lv.loops if lv.name != "blocks" else ()) for lv in m.levels)
    assert "coverage" in {v.code for v in t.check(p, Mapping(**{**m.model_dump(), "levels": levels}))}


# ---- TROWPROD (pto-trowprod.txt, Constraints) -------------------------------------------------
ROW_POINT: dict[str, Choice] = {"row_block": 16, "col_block": 64, "double_buffer": True}


def rowprod(dtype: str = "f32", out: str | None = None, rows: int = 64, cols: int = 64) -> Problem:
    return einsum("ij->i", {"i": rows, "j": cols}, dtype=dtype, out_dtype=out, reduce_op="mul")


@pytest.mark.parametrize("dtype", ["i8", "bf16", "i32"])
def test_trowprod_dtypes_half_and_float_only(dtype: str) -> None:
    t = get_target("ascend-910b")
    p = rowprod(dtype=dtype)
    assert "trowprod-dtype" in {v.code for v in t.supports(p)}
    assert t.supports(rowprod("f16", "f16")) == [] and t.supports(rowprod("f32")) == []


def test_trowprod_valid_rows_tmp_shape_and_empty() -> None:
    p = rowprod()
    assert knob_codes("ascend-910b", p, ROW_POINT) == set()
    assert "trowprod-valid-rows" in knob_codes("ascend-910b", p, ROW_POINT, dst_tile="8x1")
    assert "trowprod-dst-shape" in knob_codes("ascend-910b", p, ROW_POINT, dst_tile="16x2")
    assert "trowprod-tmp-shape" in knob_codes("ascend-910b", p, ROW_POINT, tmp_tile="16x32")
    assert "trowprod-empty" in knob_codes("ascend-910b", p, ROW_POINT, src_tile="0x64", tmp_tile="0x64", dst_tile="0x1")


def test_trowprod_dtype_consistency_and_layout() -> None:
    p = rowprod()
    assert "trowprod-dtype" in knob_codes("ascend-910b", p, ROW_POINT, dst_dtype="f16")
    assert "trowprod-layout" in knob_codes("ascend-910b", p, ROW_POINT, src_layout="DN")
    assert "trowprod-layout" in knob_codes("ascend-910b", p, ROW_POINT, dst_layout="ND")


@pytest.mark.parametrize("preset", ["ascend-910b", "ascend-a5"])
@pytest.mark.parametrize("op", ["mul", "add"])
def test_half_row_sums_and_products_accumulate_in_the_declared_f32(preset: str, op: str) -> None:
    """A half TROWPROD/TROWSUM rounds every partial to half; every float problem declares f32 accumulation."""
    p = einsum("ij->i", {"i": 7, "j": 31}, dtype="f16", out_dtype="f16", reduce_op=op)
    t = get_target(preset)
    m = t.mapping(p, {"row_block": 8, "col_block": 1, "double_buffer": False})
    assert (m.acc_dtype, m.knobs["src_dtype"], m.knobs["dst_dtype"]) == ("f32", "f32", "f32")
    assert t.check(p, m) == []
    half = m.model_copy(update={"acc_dtype": "f16", "knobs": {**m.knobs, "src_dtype": "f16", "dst_dtype": "f16"}})
    found = [v for v in t.check(p, half) if v.code == "trowprod-accumulator"]
    assert len(found) == 1 and "declares f32 accumulation" in found[0].message and "TCVT" in found[0].message
    # the accumulator alone (knobs in f32) trips it too
    assert "trowprod-accumulator" in {v.code for v in t.check(p, m.model_copy(update={"acc_dtype": "f16"}))}
    from executor.validate import validate

    assert validate(p, m).passed  # a column at a time, 31 roundings: within the problem's f32 bound now


def test_half_row_max_stays_in_half() -> None:
    """A max selects an element, exact in half: no f32 compute, no TCVT, no violation."""
    p = einsum("ij->i", {"i": 7, "j": 31}, dtype="f16", out_dtype="f16", reduce_op="max")
    t = get_target("ascend-910b")
    m = t.mapping(p, {"row_block": 8, "col_block": 1, "double_buffer": False})
    assert m.acc_dtype == "f16" and t.check(p, m) == []


def test_ub_capacity() -> None:
    # UB 192 KiB (A2/A3): 1024 rows x 64 fp32 = 256 KiB for src alone
    p = rowprod(rows=4096, cols=64)
    t = get_target("ascend-910b")
    found = {v.code for v in t.check(p, t.mapping(p, {**ROW_POINT, "row_block": 1024}))}
    assert "ub-capacity" in found
    assert "ub-capacity" not in {v.code for v in t.check(p, t.mapping(p, {**ROW_POINT, "row_block": 64}))}


def test_a5_has_more_ub_than_a2() -> None:
    p = rowprod(rows=4096, cols=64)
    point = {**ROW_POINT, "row_block": 256}  # ping-pong src 2 x 64 KiB + tmp 64 KiB + dst: over 192, under 248 KiB
    assert "ub-capacity" in knob_codes("ascend-910b", p, point)
    assert "ub-capacity" not in knob_codes("ascend-a5", p, point)


def _check(preset: str, p: Problem, point: dict[str, Choice], **knobs: Choice) -> list[Violation]:
    t = get_target(preset)
    m = t.mapping(p, point)
    return t.check(p, m.model_copy(update={"knobs": {**m.knobs, **knobs}}))


def _no_blocks() -> list[Violation]:
    t, p = get_target("ascend-910b"), gemm()
    m = t.mapping(p, GEMM_POINT)
    levels = tuple(Level(name=lv.name, loops=lv.loops if lv.name != "blocks" else ()) for lv in m.levels)
    return t.check(p, Mapping(**{**m.model_dump(), "levels": levels}))


_MUL = einsum("mk,kn->mn", {"m": 32, "n": 32, "k": 32}, dtype="f16", reduce_op="mul", weight=1)

#: one problem and mapping that trips each code of `CODES`
TRIPS: dict[str, Callable[[], list[Violation]]] = {
    "cube-reduce-op": lambda: get_target("ascend-910b").supports(_MUL),
    "tmatmul-dtype": lambda: get_target("ascend-910b").supports(gemm(dtype="f8e4m3")),
    "trowprod-dtype": lambda: get_target("ascend-910b").supports(rowprod(dtype="i8")),
    "knobs": lambda: get_target("ascend-910b").check(
        gemm(), get_target("ascend-910b").mapping(gemm(), GEMM_POINT).model_copy(update={"knobs": {}})
    ),
    "coverage": _no_blocks,
    "tmatmul-range": lambda: _check("ascend-a5", gemm(8192, 8192, 8192), {**GEMM_POINT, "base_m": 4096}),
    "l0a-capacity": lambda: _check("ascend-910b", gemm(512, 512, 512), {**GEMM_POINT, "base_m": 256, "base_k": 256}),
    "l0b-capacity": lambda: _check("ascend-910b", gemm(512, 1024, 512), {**GEMM_POINT, "base_k": 128, "base_n": 512}),
    "l0c-capacity": lambda: _check(
        "ascend-910b", gemm(512, 512, 64), {**GEMM_POINT, "base_m": 256, "base_n": 256, "base_k": 16}
    ),
    "l1-capacity": lambda: _check(
        "ascend-910b", gemm(512, 512, 4096), {**GEMM_POINT, "base_m": 128, "base_n": 128, "base_k": 128, "l1_k": 16}
    ),
    "core-count": lambda: _check("ascend-910b", gemm(), {**GEMM_POINT, "core_grid": "1x4x8"}),
    "tile-shape": lambda: _check("ascend-910b", gemm(), GEMM_POINT, tile_acc="64x128"),
    "fractal": lambda: _check("ascend-910b", gemm(), GEMM_POINT, tile_left="120x64", tile_acc="120x128"),
    "tile-layout": lambda: _check("ascend-a5", gemm(), GEMM_POINT, left_layout="ND"),
    "tile-valid": lambda: _check("ascend-910b", gemm(), GEMM_POINT, tile_left="64x64", tile_acc="64x128"),
    "ub-capacity": lambda: _check("ascend-910b", rowprod(rows=4096, cols=64), {**ROW_POINT, "row_block": 1024}),
    "trowprod-empty": lambda: _check(
        "ascend-910b", rowprod(), ROW_POINT, src_tile="0x64", tmp_tile="0x64", dst_tile="0x1"
    ),
    "trowprod-valid-rows": lambda: _check("ascend-910b", rowprod(), ROW_POINT, dst_tile="8x1"),
    "trowprod-dst-shape": lambda: _check("ascend-910b", rowprod(), ROW_POINT, dst_tile="16x2"),
    "trowprod-tmp-shape": lambda: _check("ascend-910b", rowprod(), ROW_POINT, tmp_tile="16x32"),
    "trowprod-layout": lambda: _check("ascend-910b", rowprod(), ROW_POINT, src_layout="DN"),
    "trowprod-accumulator": lambda: _check(
        "ascend-910b", rowprod("f16", "f16"), ROW_POINT, src_dtype="f16", dst_dtype="f16"
    ),
}


def test_code_trips(tripped: tuple[str, set[str]]) -> None:
    """Each code of CODES, tripped by its TRIPS case (the fixture holds the table to CODES)."""
    code, found = tripped
    assert code in found
