"""Every Tensix constraint trips with a reason, and small spaces map to exact-once loop nests.

Sources: tenstorrent-conv2d.md (L1 inequality, bHo mod 32, sub-blocks of at most 8 tiles,
Conv2dConfig knobs) and hardware-facts.md §4.1/§4.2 (Dst register: 4 tiles with fp32
accumulation; ttnn sub-block rule; halo buffer size).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from costmodels.ir import Mapping, coverage_errors
from costmodels.protocol import Violation
from costmodels.registry import get_target
from costmodels.tenstorrent.violations import CODES as CODES  # the family's codes: the `tripped` fixture reads them
from tests.costmodels.tenstorrent.points import BASE
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem

T = get_target("wormhole-n150")
CONV = conv2d(batch=1, in_channels=64, out_channels=64, input_height=16, input_width=16, kernel=3, padding=1)


def knobbed(problem: Problem, **knobs: Any) -> Mapping:
    m = T.mapping(problem, BASE)
    return m.model_copy(update={"knobs": {**m.knobs, **knobs}})


def codes(problem: Problem, m: Mapping) -> set[str]:
    vs = T.check(problem, m)
    assert all(len(v.message) > 20 for v in vs)
    return {v.code for v in vs}


def test_base_point_is_feasible() -> None:
    assert T.check(CONV, T.mapping(CONV, BASE)) == []


@pytest.mark.parametrize("layout", ["height/100", "block/9x8", "diagonal/4", "height/x"])
def test_layout_outside_grid(layout: str) -> None:
    assert "layout" in codes(CONV, knobbed(CONV, layout=layout))


def test_channel_split_must_divide_channels() -> None:
    assert "channel-split" in codes(CONV, knobbed(CONV, layout="block/2x3"))


@pytest.mark.parametrize("rows", [48, 64])  # 48: not a multiple of 32; 64: does not divide 1 tile per core
def test_act_block_h_multiple_of_32_dividing_height(rows: int) -> None:
    # tenstorrent-conv2d.md: bHo mod 32 = 0; hardware-facts.md §4.2 step 5: an override must divide
    vs = T.check(CONV, knobbed(CONV, act_block_h=rows))
    hit = [v for v in vs if v.code == "act-block-h"]
    assert hit and "multiple of 32" in hit[0].message


def test_act_block_w_div_must_divide_width_block() -> None:
    # width/2: 32 channels per core, K per core = ceil(32*9/32) = 9 tiles; 4 does not divide 9
    m = knobbed(CONV, layout="width/2", act_block_w_div=4, out_subblock="1x1")
    assert "act-block-w-div" in codes(CONV, m)
    # ignored for height sharding (tenstorrent-conv2d.md, Conv2dConfig: act_block_w_div)
    assert T.check(CONV, knobbed(CONV, act_block_w_div=4)) == []


def test_unknown_fidelity() -> None:
    assert "math-fidelity" in codes(CONV, knobbed(CONV, math_fidelity="MedFi"))


def test_dst_register_limit_8_tiles_and_4_with_fp32() -> None:
    # hardware-facts.md §4.1 Dst register: 8 tiles bf16, 4 with fp32 accumulation
    p = einsum("mk,kn->mn", {"m": 256, "k": 64, "n": 256}, dtype="bf16", weight=1)
    t16 = get_target("wormhole-n150", {"bf16_accumulation": True})
    ok = knobbed(p, layout="height/1", act_block_h=256, out_subblock="1x8", fp32_acc=False)
    assert t16.check(p, ok) == []
    assert "dst-capacity" in codes(p, knobbed(p, layout="height/1", act_block_h=256, out_subblock="1x8", fp32_acc=True))
    bad = knobbed(p, layout="height/1", act_block_h=256, out_subblock="3x8", fp32_acc=False)
    assert "dst-capacity" in [v.code for v in t16.check(p, bad)]


def test_bf16_destination_accumulation_is_opt_in() -> None:
    """The problem declares f32 accumulation; a 16-bit Dst (fp32_acc off) is rejected unless the preset allows it."""
    p = einsum("mk,kn->mn", {"m": 256, "k": 64, "n": 256}, dtype="bf16", weight=1)
    m16 = knobbed(p, layout="height/1", act_block_h=256, out_subblock="1x4", fp32_acc=False)
    violations = T.check(p, m16)
    assert [v.code for v in violations] == ["accumulation"]
    assert "bf16_accumulation" in violations[0].message
    assert T.space(p).params[[q.name for q in T.space(p).params].index("fp32_acc")].choices == (True,)
    t16 = get_target("wormhole-n150", {"bf16_accumulation": True})
    assert t16.check(p, m16) == []
    assert T.mapping(p, {**BASE, "layout": "height/1"}).acc_dtype == "f32"
    assert t16.mapping(p, {**BASE, "layout": "height/1", "fp32_acc": False}).acc_dtype == "bf16"


def test_subblock_must_divide_and_span_width() -> None:
    p = einsum("mk,kn->mn", {"m": 256, "k": 64, "n": 256}, dtype="bf16", weight=1)
    assert "subblock-divides" in codes(p, knobbed(p, layout="height/1", act_block_h=256, out_subblock="1x3"))
    # hardware-facts.md §4.2 step 2: h = 1 unless w = block width (8 tiles here)
    assert "subblock-shape" in codes(p, knobbed(p, layout="height/1", act_block_h=256, out_subblock="2x2"))


def test_l1_paper_inequality() -> None:
    # 1x1 conv 512 -> 2048 height sharded: [32*2048 + 512*(32 + 2048)]*2 B = 2.2 MB > free L1
    p = conv2d(batch=1, in_channels=512, out_channels=2048, input_height=14, input_width=14, kernel=1)
    vs = T.check(p, knobbed(p, layout="height/7", act_block_h=32, out_subblock="1x8"))
    assert "l1-paper" in {v.code for v in vs}


def test_l1_capacity_counts_the_halo_buffer() -> None:
    p = conv2d(batch=1, in_channels=64, out_channels=32, input_height=160, input_width=160, kernel=3, padding=1)
    vs = T.check(p, knobbed(p, layout="height/1", act_block_h=32, out_subblock="1x1"))
    cap = [v for v in vs if v.code == "l1-capacity"]
    assert cap and "halo buffer" in cap[0].message
    # the same conv over 64 cores fits
    assert T.check(p, T.mapping(p, {**BASE, "layout": "height/64", "act_block_h_rank": 3})) == []


def test_unsupported_problems() -> None:
    unary = einsum("ij->i", {"i": 8, "j": 8}, dtype="bf16")
    assert [v.code for v in T.supports(unary)] == ["unary"]
    i8 = einsum("mk,kn->mn", {"m": 32, "k": 32, "n": 32}, dtype="i8", weight=1)
    assert "dtype" in {v.code for v in T.supports(i8)}
    mx = einsum("mk,kn->mn", {"m": 32, "k": 32, "n": 32}, dtype="bf16", weight=1, reduce_op="max")
    assert "reduce-op" in {v.code for v in T.supports(mx)}
    assert not T.score_batch(unary, {"layout": np.array(["height/1"])}).feasible.any()


def _gemm(k: int = 64) -> Problem:
    return einsum("mk,kn->mn", {"m": 256, "k": k, "n": 256}, dtype="bf16", weight=1)


def _in0_block_w() -> list[Violation]:
    p = _gemm(96)  # K = 3 tiles: 2 does not divide it
    m = T.mapping(p, {**BASE, "layout": "height/8", "memory": "dram-interleaved", "in0_block_w": 3})
    return T.check(p, m.model_copy(update={"knobs": {**m.knobs, "in0_block_w": 2}}))


_L1 = conv2d(batch=1, in_channels=64, out_channels=32, input_height=160, input_width=160, kernel=3, padding=1)
_PAPER = conv2d(batch=1, in_channels=512, out_channels=2048, input_height=14, input_width=14, kernel=1)

#: one problem and mapping that trips each code of `CODES`
TRIPS: dict[str, Callable[[], list[Violation]]] = {
    "unary": lambda: T.supports(einsum("ij->i", {"i": 8, "j": 8}, dtype="bf16")),
    "reduce-op": lambda: T.supports(
        einsum("mk,kn->mn", {"m": 32, "k": 32, "n": 32}, dtype="bf16", weight=1, reduce_op="max")
    ),
    "dtype": lambda: T.supports(einsum("mk,kn->mn", {"m": 32, "k": 32, "n": 32}, dtype="i8", weight=1)),
    "knobs": lambda: T.check(CONV, T.mapping(CONV, BASE).model_copy(update={"knobs": {}})),
    "layout": lambda: T.check(CONV, knobbed(CONV, layout="height/100")),
    "memory": lambda: T.check(CONV, knobbed(CONV, memory="dram")),
    "channel-split": lambda: T.check(CONV, knobbed(CONV, layout="block/2x3")),
    "act-block-h": lambda: T.check(CONV, knobbed(CONV, act_block_h=48)),
    "act-block-w-div": lambda: T.check(CONV, knobbed(CONV, layout="width/2", act_block_w_div=4, out_subblock="1x1")),
    "in0-block-w": _in0_block_w,
    "math-fidelity": lambda: T.check(CONV, knobbed(CONV, math_fidelity="MedFi")),
    "accumulation": lambda: T.check(
        _gemm(), knobbed(_gemm(), layout="height/1", act_block_h=256, out_subblock="1x4", fp32_acc=False)
    ),
    "dst-capacity": lambda: T.check(
        _gemm(), knobbed(_gemm(), layout="height/1", act_block_h=256, out_subblock="1x8", fp32_acc=True)
    ),
    "subblock-divides": lambda: T.check(
        _gemm(), knobbed(_gemm(), layout="height/1", act_block_h=256, out_subblock="1x3")
    ),
    "subblock-shape": lambda: T.check(
        _gemm(), knobbed(_gemm(), layout="height/1", act_block_h=256, out_subblock="2x2")
    ),
    "l1-paper": lambda: T.check(_PAPER, knobbed(_PAPER, layout="height/7", act_block_h=32, out_subblock="1x8")),
    "l1-capacity": lambda: T.check(_L1, knobbed(_L1, layout="height/1", act_block_h=32, out_subblock="1x1")),
}


def test_code_trips(tripped: tuple[str, set[str]]) -> None:
    """Each code of CODES, tripped by its TRIPS case (the fixture holds the table to CODES)."""
    code, found = tripped
    assert code in found


SMALL = {
    "conv": conv2d(batch=1, in_channels=32, out_channels=32, input_height=8, input_width=8, kernel=3, padding=1),
    "conv-s2": conv2d(batch=2, in_channels=16, out_channels=16, input_height=7, input_width=5, kernel=3, stride=2),
    "bmm": einsum("vmk,vnk->vmn", {"v": 2, "m": 40, "n": 30, "k": 70}, dtype="bf16", weight=1),
}


@pytest.mark.parametrize("name", list(SMALL))
def test_every_point_of_small_spaces_covers_once_and_agrees(name: str) -> None:
    p = SMALL[name]
    space = T.space(p)
    assert space.size <= 1600
    cols = space.columns()
    score = T.score_batch(p, cols)
    lb = T.lower_bound(p).cycles
    seen = {}
    for i in range(space.size):
        point = {k: (v[i].item() if isinstance(v[i], np.generic) else v[i]) for k, v in cols.items()}
        m = T.mapping(p, point)
        key = tuple(sorted(m.knobs.items()))
        if key not in seen:  # identical knobs give identical loop nests
            assert coverage_errors(p, m) == []
            seen[key] = T.check(p, m) == []
        assert bool(score.feasible[i]) == seen[key]
        if seen[key] and i % 7 == 0:
            rep = T.cost(p, m)
            assert rep.seconds == pytest.approx(score.objectives["latency"][i], rel=1e-9)
            assert rep.cycles >= lb


@pytest.mark.parametrize("layout", ["block/10x13", "block/13x10", "width/200", "height/0"])
def test_an_unusable_layout_is_the_only_layout_reason(layout: str) -> None:
    # a grid the part does not have: its shard fields are placeholders, so the checks that read them (a channel split
    # over "1 core column", L1 of a shard that does not exist) are left out until the layout is fixed
    t = get_target("blackhole-p150")
    p = einsum("mk,kn->mn", {"m": 2560, "k": 2560, "n": 2080}, dtype="bf16", weight="B")
    vs = t.check(p, t.mapping(p, {**BASE, "layout": layout}))
    assert [v.code for v in vs] == ["layout"]
    if layout != "height/0":  # a grid the part lacks: the fix names the override (Blackhole's older 13x10 grid)
        assert "override grid_x and grid_y" in vs[0].message and "grid_x=11, grid_y=10" in vs[0].message
        wider = get_target("blackhole-p150", {"grid_x": 13})
        assert wider.check(p, wider.mapping(p, {**BASE, "layout": "block/10x13"})) == []
    # a constraint the layout does not enter is still reported beside it
    vs = t.check(p, t.mapping(p, {**BASE, "layout": layout, "memory": "dram-interleaved", "in0_block_w": 3}))
    assert [v.code for v in vs] == ["layout", "in0-block-w"]
