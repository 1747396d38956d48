"""Every RNGD constraint tripped, with a message that says what is wrong and how to fix it.

contraction-engine-rngd.txt, Constraints (alignment, TRF capacity, rows, Stream Adapter buffer
limits, data types) and hardware-facts.md §1.2 step 1 (feasibility checks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from costmodels.ir import Level, Loop
from costmodels.protocol import Choice, Target, Violation
from costmodels.registry import get_target
from costmodels.rngd.space import grid_code
from costmodels.rngd.target import RngdTarget
from costmodels.rngd.violations import CODES as CODES  # the family's codes: the `tripped` fixture reads them
from tests.costmodels.rngd.points import BASE
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

T = get_target("rngd")
assert isinstance(T, RngdTarget)
GEMM = einsum("mk,nk->mn", {"m": 64, "k": 64, "n": 16}, weight=1)


def _codes(problem: Problem, point: dict[str, Choice], target: Target = T) -> list[str]:
    return [v.code for v in target.check(problem, target.mapping(problem, point))]


def _conv(**kw: Any) -> Problem:
    args: dict[str, Any] = dict(batch=1, in_channels=32, out_channels=24, input_height=32, input_width=32, kernel=3)
    args.update(kw)
    return conv2d(**args)


def test_baseline_is_feasible() -> None:
    assert _codes(GEMM, BASE) == []


def test_f32_input_rejected_with_vector_engine_advice() -> None:
    p = einsum("mk,nk->mn", {"m": 8, "k": 8, "n": 8}, dtype="f32", weight=1)
    vs = T.supports(p)
    assert {v.code for v in vs} == {"dtype"}
    assert "Vector Engine" in vs[0].message and "bf16" in vs[0].message
    assert T.supports(einsum("mk,nk->mn", {"m": 8, "k": 8, "n": 8}, dtype="f16", weight=1))[0].code == "dtype"
    assert not T.score_batch(p, {"packet_k": np.asarray([32])}).feasible.any()


def test_mixed_int_and_float_inputs_rejected() -> None:
    p = einsum(
        "A[m, k], B[n, k] -> Y[m, n]",
        {"m": 8, "k": 8, "n": 8},
        dtype={"A": "i8", "B": "bf16"},
        out_dtype="f32",
        weight=1,
    )
    assert [v.code for v in T.supports(p)] == ["dtype"]


def test_unary_and_non_add_problems_rejected() -> None:
    assert [v.code for v in T.supports(einsum("ij->i", {"i": 4, "j": 8}))] == ["unary"]
    assert "Vector Engine" in T.supports(einsum("ij->i", {"i": 4, "j": 8}))[0].message
    p = einsum("mk,nk->mn", {"m": 8, "k": 8, "n": 8}, reduce_op="max", weight=1)
    assert [v.code for v in T.supports(p)] == ["reduce-op"]


def test_alignment_misaligned_loop_nest() -> None:
    m = T.mapping(GEMM, BASE)
    levels = list(m.levels)
    levels[-1] = Level(name="packet", loops=(Loop(axis="k", factor=16, spatial=True, stride=1),))
    broken = m.model_copy(update={"levels": tuple(levels)})
    vs = T.check(GEMM, broken)
    assert [v.code for v in vs] == ["alignment"] and "exactly once" in vs[0].message
    swapped = m.model_copy(
        update={"levels": (m.levels[0], m.levels[1], m.levels[4], m.levels[3], m.levels[2], m.levels[5])}
    )
    assert [v.code for v in T.check(GEMM, swapped)] == ["alignment"]
    narrow = m.model_copy(update={"acc_dtype": "bf16"})
    assert "widens outputs" in T.check(GEMM, narrow)[0].message
    assert T.check(GEMM, m.model_copy(update={"knobs": {}}))[0].code == "knobs"


def test_packet_k_larger_than_a_32_byte_packet() -> None:
    vs = T.check(GEMM, T.mapping(GEMM, {**BASE, "feed_flits": 1}))
    assert [v.code for v in vs] == ["packet"] and "16 elements" in vs[0].message


def test_rows_must_be_1_2_4_8() -> None:
    assert _codes(GEMM, {**BASE, "rows": 3}) == ["rows"]
    four = get_target("rngd", {"rows": 4})
    assert _codes(GEMM, BASE, four) == ["rows"]


def test_shards_must_exist() -> None:
    assert _codes(GEMM, {**BASE, "slice_grid": 512}) == ["shards"]
    assert _codes(GEMM, {**BASE, "slice_grid": grid_code(32, 16)}) == ["shards"]  # 32 x 16 = 512 slices
    assert _codes(GEMM, {**BASE, "slice_grid": grid_code(2, 0)}) == ["shards"]  # no slice at all


def test_feed_flits_limits() -> None:
    assert _codes(GEMM, {**BASE, "feed_flits": 3}) == ["feed-flits"]
    assert _codes(_conv(), {**BASE, "shift": True, "feed_flits": 4}) == ["feed-flits"]


def test_trf_capacity_message_says_how_to_tile() -> None:
    p = einsum("mk,nk->mn", {"m": 8, "k": 2048, "n": 48}, weight=1)
    vs = T.check(p, T.mapping(p, {**BASE, "inner": "k"}))
    assert [v.code for v in vs] == ["trf-capacity"]
    assert vs[0].message.startswith("TRF needs 192 KiB per slice, 64 KiB available: tile N by 3 or more")
    assert _codes(p, {**BASE, "inner": "k", "trf_split": 3}) == []  # the advice: 3 loads of 2 groups fit
    assert _codes(p, {**BASE, "inner": "k", "trf_split": 4}) == ["trf-split"]  # 4 loads of 2: 3 do as well


def test_trf_capacity_offers_no_split_that_cannot_help() -> None:
    """K so long that one N group a load overflows the TRF (three N over eight rows: one group a slice): no trf_split
    can fit it, so the advice is to shard K, not to tile N (it said "tile N by 2 or more" before)."""
    p = einsum("mk,nk->mn", {"m": 8, "k": 8192, "n": 3}, weight=1)
    vs = T.check(p, T.mapping(p, {**BASE, "inner": "k"}))
    assert [v.code for v in vs] == ["trf-capacity"], vs
    assert "tile N" not in vs[0].message and "shard K (or N) over more slices" in vs[0].message, vs[0].message
    assert "one N group a load would still need 128 KiB" in vs[0].message


def test_time_reducer_capacity() -> None:
    p = einsum("mk,nk->mn", {"m": 64, "k": 64, "n": 64}, weight=1)
    pt = {**BASE, "packet_k": 1, "rows": 1, "inner": "n"}  # 64 N groups x 32 outputs per row
    vs = T.check(p, T.mapping(p, pt))
    assert [v.code for v in vs] == ["accumulator"] and "128 cells" in vs[0].message
    assert _codes(p, {**pt, "inner": "k"}) == []


def test_dm_capacity() -> None:
    tiny = get_target("rngd", {"dm_bytes_per_slice": 65536})
    p = einsum("mk,nk->mn", {"m": 256, "k": 256, "n": 64}, weight=1)
    vs = tiny.check(p, tiny.mapping(p, BASE))
    assert [v.code for v in vs] == ["dm-capacity"] and "64 KiB" in vs[0].message


def test_shift_window_must_fit_the_shift_buffer() -> None:
    p = _conv(kernel=(3, 9), dilation=(1, 2))  # span 17 bf16 > 16 with one flit
    assert "shift-window" in _codes(p, {**BASE, "shift": True, "feed_flits": 1})


def test_shift_range() -> None:
    p = _conv(kernel=7, in_channels=16)  # shifts 0..6, bf16 reaches [-3, 4]
    vs = T.check(p, T.mapping(p, {**BASE, "shift": True}))
    assert [v.code for v in vs] == ["shift-range"] and "[-3, 4]" in vs[0].message
    i8 = conv2d(batch=1, in_channels=16, out_channels=24, input_height=32, input_width=32, kernel=7, dtype="i8")
    assert _codes(i8, {**BASE, "packet_k": 64, "shift": True}) == []  # i8 reaches [-7, 8]


def test_shift_unsupported_stride_dilation() -> None:
    p = _conv(input_width=40, stride=(1, 3), dilation=(1, 2))
    assert "shift-unsupported" in _codes(p, {**BASE, "shift": True})


def _swapped(problem: Problem) -> list[Violation]:
    m = T.mapping(problem, BASE)
    levels = (m.levels[0], m.levels[1], m.levels[4], m.levels[3], m.levels[2], m.levels[5])
    return T.check(problem, m.model_copy(update={"levels": levels}))


def _mapped(problem: Problem, point: dict[str, Choice], target: Target = T) -> list[Violation]:
    return target.check(problem, target.mapping(problem, point))


#: one problem and mapping that trips each code of `CODES`
TRIPS: dict[str, Callable[[], list[Violation]]] = {
    "unary": lambda: T.supports(einsum("ij->i", {"i": 4, "j": 8})),
    "reduce-op": lambda: T.supports(einsum("mk,nk->mn", {"m": 8, "k": 8, "n": 8}, reduce_op="max", weight=1)),
    "dtype": lambda: T.supports(einsum("mk,nk->mn", {"m": 8, "k": 8, "n": 8}, dtype="f32", weight=1)),
    "knobs": lambda: T.check(GEMM, T.mapping(GEMM, BASE).model_copy(update={"knobs": {}})),
    "alignment": lambda: _swapped(GEMM),
    "packet": lambda: _mapped(GEMM, {**BASE, "feed_flits": 1}),
    "rows": lambda: _mapped(GEMM, {**BASE, "rows": 3}),
    "shards": lambda: _mapped(GEMM, {**BASE, "slice_grid": 512}),
    "feed-flits": lambda: _mapped(GEMM, {**BASE, "feed_flits": 3}),
    "trf-split": lambda: _mapped(GEMM, {**BASE, "trf_split": 4}),  # N=16 on 8 rows: 2 groups, 4 loads pad
    "trf-capacity": lambda: _mapped(
        einsum("mk,nk->mn", {"m": 8, "k": 2048, "n": 48}, weight=1), {**BASE, "inner": "k"}
    ),
    "accumulator": lambda: _mapped(
        einsum("mk,nk->mn", {"m": 64, "k": 64, "n": 64}, weight=1), {**BASE, "packet_k": 1, "rows": 1, "inner": "n"}
    ),
    "dm-capacity": lambda: _mapped(
        einsum("mk,nk->mn", {"m": 256, "k": 256, "n": 64}, weight=1),
        BASE,
        get_target("rngd", {"dm_bytes_per_slice": 65536}),
    ),
    "shift-window": lambda: _mapped(_conv(kernel=(3, 9), dilation=(1, 2)), {**BASE, "shift": True, "feed_flits": 1}),
    "shift-range": lambda: _mapped(_conv(kernel=7, in_channels=16), {**BASE, "shift": True}),
    "shift-unsupported": lambda: _mapped(
        _conv(input_width=40, stride=(1, 3), dilation=(1, 2)), {**BASE, "shift": True}
    ),
}


def test_code_trips(tripped: tuple[str, set[str]]) -> None:
    """Each code of CODES, tripped by its TRIPS case (the fixture holds the table to CODES)."""
    code, found = tripped
    assert code in found
