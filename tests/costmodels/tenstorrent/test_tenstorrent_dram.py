"""The DRAM-interleaved placement, the fidelity policy and the value-column scorer of the Tensix targets.

tenstorrent-conv2d.md, "Implementation of Convolution Operation on a Single Tensix Core": operands
live in DRAM as interleaved buffers; a core loads an activation block and the matching weights,
computes one output block, writes it back and moves to the next block along the rows; the blocks
obey the paper's L1 inequality. hardware-facts.md §4.2 step 4: multicast costs one traversal.
Expected DRAM bytes are computed here from those rules, independently of the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from costmodels.registry import get_target
from tests.costmodels.tenstorrent.points import BASE
from workload import dtypes
from workload.conv2d import conv2d
from workload.einsum import einsum

T = get_target("wormhole-n150")
BF16 = 2
DRAM: dict[str, Any] = {
    **BASE,
    "layout": "block/8x8",
    "memory": "dram-interleaved",
    "in0_block_w": 4,
    "act_double_buffer": True,
    "weights_double_buffer": True,
}
BIG = einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, dtype="bf16", weight=1)


def best(target: Any, problem: Any) -> tuple[dict[str, Any], float]:
    cols = target.space(problem).columns()
    lat = target.score_batch(problem, cols).objectives["latency"]
    i = int(np.argmin(lat))
    return {k: (v[i].item() if isinstance(v[i], np.generic) else v[i]) for k, v in cols.items()}, float(lat[i])


@pytest.mark.parametrize(("rank", "row_blocks"), [(0, 1), (1, 2), (2, 4)])
def test_dram_traffic_rereads_weights_per_row_block(rank: int, row_blocks: int) -> None:
    m, k, n = 1024, 512, 768
    p = einsum("mk,kn->mn", {"m": m, "k": k, "n": n}, dtype="bf16", out_dtype="bf16", weight=1)
    mp = T.mapping(p, {**DRAM, "act_block_h_rank": rank})
    assert T.check(p, mp) == []
    rep = T.cost(p, mp)
    # 8x8 cores: 4 row tiles per core; act_block_h = the (rank)-th largest divisor of 4 tiles -> 1, 2 or 4 blocks.
    # Activations: each row once (multicast along the core row); weights: each core column's slice once per
    # row block (multicast down the column); output written once.
    expected = m * k * BF16 + row_blocks * k * n * BF16 + m * n * BF16
    assert rep.offchip_bytes == expected
    assert rep.footprint_bytes < 1464 * 1024


def test_dram_conv_reads_im2col_windows_and_has_no_halo() -> None:
    p = conv2d(batch=1, in_channels=64, out_channels=64, input_height=16, input_width=16, kernel=3, padding=1)
    out = dtypes.info(p.output.dtype).bytes
    mp = T.mapping(p, {**DRAM, "layout": "height/8", "in0_block_w": 2})
    assert T.check(p, mp) == []
    rep = T.cost(p, mp)
    k = 3 * (-(-64 * 3 // 32) * 32)  # Kh blocks of round_up(Cin*Kw, 32) (hardware-facts.md §4.2 step 5)
    rows = 16 * 16
    # step 1 (the transform) reads the input once and writes the activation matrix; the block loop reads the
    # matrix, the weights once and writes the output once
    transform = rows * 64 * BF16 + rows * k * BF16
    assert rep.offchip_bytes == transform + rows * k * BF16 + k * 64 * BF16 + rows * 64 * out
    assert rep.bytes["halo"] == 0 and rep.breakdown["halo"] == 0


def test_dram_l1_fit_counts_blocks_and_trips() -> None:
    p = einsum("mk,kn->mn", {"m": 2048, "k": 2048, "n": 8192}, dtype="bf16", weight=1)
    # per core 8 x 32 tiles: a 16-tile K block double-buffered, the 8x32 output block and partials exceed L1
    bad = T.check(p, T.mapping(p, {**DRAM, "in0_block_w": 16}))
    cap = [v for v in bad if v.code == "l1-capacity"]
    assert cap and "in0_block_w" in cap[0].message
    # a smaller K block or output block fits
    assert T.check(p, T.mapping(p, {**DRAM, "in0_block_w": 2, "act_block_h_rank": 1})) == []


def test_in0_block_w_must_divide_k() -> None:
    p = einsum("mk,kn->mn", {"m": 256, "k": 96, "n": 256}, dtype="bf16", weight=1)  # K = 3 tiles
    m = T.mapping(p, {**DRAM, "layout": "height/8", "in0_block_w": 3})
    assert T.check(p, m) == []
    vs = T.check(p, m.model_copy(update={"knobs": {**m.knobs, "in0_block_w": 2}}))
    assert [v.code for v in vs] == ["in0-block-w"] and "divisor of 3" in vs[0].message


@pytest.mark.parametrize("preset", ["wormhole-n150", "blackhole-p150"])
def test_large_gemm_is_feasible_only_from_dram(preset: str) -> None:
    t = get_target(preset)
    cols = t.space(BIG).columns()
    sc = t.score_batch(BIG, cols)
    assert sc.feasible.any()
    l1 = sc.feasible & (cols["memory"] == "l1-sharded")
    if preset == "wormhole-n150":
        assert not l1.any()  # 1 MiB+ output shards do not fit
    else:  # only the 110-core split whose channel split does not divide K (padded) shrinks the shards enough;
        # width sharding fits no longer: it computes the whole height in one block (ttnn ignores act_block_h
        # under WIDTH_SHARDED, tenstorrent-conv2d.md Conv2dConfig)
        assert {str(x) for x in cols["layout"][l1]} == {"block/10x11"}
    point, seconds = best(t, BIG)
    assert t.check(BIG, t.mapping(BIG, point)) == []
    tflops = 2 * 4096**3 / seconds / 1e12
    # at the default HiFi4 policy: at most the HiFi4 chip peak (hardware-facts.md §4.1, Chip peak: WH 64 cores
    # x 1.024 TFLOPS = 65.5; BH 110 x 1.35 TFLOPS at 1.35 GHz)
    cores, ghz = {"wormhole-n150": (64, 1.0), "blackhole-p150": (110, 1.35)}[preset]
    hifi4_peak = cores * 32**3 / 64 * 2 * ghz / 1e3
    assert 0.5 * hifi4_peak < tflops <= hifi4_peak


def test_large_gemm_at_lofi_stays_near_the_measured_peak() -> None:
    # hardware-facts.md §4.1, Measured GEMM: WH n150 ~190 TFLOPS peak (manual configs), LoFi peak 262
    t = get_target("wormhole-n150", {"fidelities": ["LoFi", "HiFi2", "HiFi4"]})
    point, seconds = best(t, BIG)
    tflops = 2 * 4096**3 / seconds / 1e12
    assert point["math_fidelity"] == "LoFi"
    assert 150 < tflops < 1.3 * 190


@pytest.mark.parametrize(
    "problem",
    [
        conv2d(batch=16, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1),
        conv2d(batch=16, in_channels=128, out_channels=128, input_height=28, input_width=28, kernel=3, padding=1),
    ],
)
def test_sharded_stays_preferred_where_it_fits(problem: Any) -> None:
    """A sharded conv reads each input stick once (halo); the interleaved one reads Kh*Kw windows from DRAM."""
    point, seconds = best(T, problem)
    assert point["memory"] == "l1-sharded"
    cols = T.space(problem).columns()
    sc = T.score_batch(problem, cols)
    dram = sc.objectives["latency"][cols["memory"] == "dram-interleaved"]
    assert np.isfinite(dram).any() and dram.min() > seconds


def test_fidelity_policy_gates_the_space_check_and_bound() -> None:
    p = einsum("mk,kn->mn", {"m": 512, "k": 512, "n": 512}, dtype="bf16", weight=1)
    fids = {str(c) for c in T.space(p).columns()["math_fidelity"]}
    assert fids == {"HiFi4"}
    m = T.mapping(p, {**DRAM, "math_fidelity": "LoFi"})
    vs = T.check(p, m)
    assert [v.code for v in vs] == ["math-fidelity"] and "fidelities" in vs[0].message
    lofi = get_target("wormhole-n150", {"fidelities": ["LoFi"]})
    assert lofi.check(p, m) == []
    assert lofi.lower_bound(p).compute_cycles == pytest.approx(T.lower_bound(p).compute_cycles / 4)  # 16 vs 64
    assert lofi.cost(p, m).cycles >= lofi.lower_bound(p).cycles


def test_table_scorer_matches_general_path_and_unknown_values() -> None:
    p = conv2d(batch=2, in_channels=32, out_channels=64, input_height=20, input_width=20, kernel=3, padding=1)
    t = get_target("blackhole-p150", {"fidelities": ["LoFi", "HiFi4"]})
    cols = t.space(p).columns()
    rng = np.random.default_rng(0)
    idx = rng.choice(len(cols["layout"]), size=300, replace=False)
    sub = {k: v[idx] for k, v in cols.items()}
    sub["layout"] = sub["layout"].astype(object)
    sub["layout"][:5] = "height/3"  # not a choice of the space: priced by the general path
    sub["math_fidelity"] = sub["math_fidelity"].astype(object)
    fast = t.score_batch(p, {k: cols[k][idx] for k in cols})
    mixed = t.score_batch(p, sub)
    for i in range(300):
        point = {k: (v[i].item() if isinstance(v[i], np.generic) else v[i]) for k, v in sub.items()}
        mp = t.mapping(p, point)
        ok = t.check(p, mp) == []
        assert bool(mixed.feasible[i]) == ok
        if ok:
            assert mixed.objectives["latency"][i] == pytest.approx(t.cost(p, mp).seconds, rel=1e-12)
        if i >= 5:
            assert fast.objectives["latency"][i] == mixed.objectives["latency"][i]


def test_score_batch_never_misreads_a_layout_outside_the_space() -> None:
    """A layout string of a choice's width that differs in any one character is priced as what it is."""
    p = conv2d(batch=2, in_channels=32, out_channels=64, input_height=20, input_width=20, kernel=3, padding=1)
    cols = T.space(p).columns()
    sc = T.score_batch(p, cols)
    i = int(np.flatnonzero(sc.feasible & np.char.startswith(cols["layout"], "height/"))[0])
    layout = str(cols["layout"][i])
    fakes = [layout[:j] + "X" + layout[j + 1 :] for j in range(len(layout))]
    batch = {k: np.repeat(v[i : i + 1], len(fakes) + 1) for k, v in cols.items()}
    batch["layout"] = np.array([layout, *fakes], dtype=cols["layout"].dtype)  # same width: the fast string path
    out = T.score_batch(p, batch)
    assert out.feasible.tolist() == [True] + [False] * len(fakes)  # no layout "heXght/8" etc. exists
    assert out.objectives["latency"][0] == sc.objectives["latency"][i]
    assert np.isinf(out.objectives["latency"][1:]).all()


def test_weight_on_the_first_input_is_priced_as_the_weight() -> None:
    """Mixed dtypes with weight=0: the weight's bytes are the weight's, not the activation's."""
    from costmodels.tenstorrent.shape import tt_shape

    a = einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, dtype={"A": "f32", "B": "bf16"}, weight=0)
    b = einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, dtype={"A": "f32", "B": "bf16"}, weight=1)
    assert (tt_shape(a, 32).w_bytes, tt_shape(a, 32).in_bytes) == (4.0, 2.0)
    assert (tt_shape(b, 32).w_bytes, tt_shape(b, 32).in_bytes) == (2.0, 4.0)


@pytest.mark.parametrize("out", ["bf16", "f32"])
@pytest.mark.parametrize("fp32_acc", [True, False])
@pytest.mark.parametrize("in0_block_w", [4, 32])
def test_partials_take_l1_of_their_own_only_beside_an_output_of_another_format(
    out: str, fp32_acc: bool, in0_block_w: int
) -> None:
    # tt-metal keeps the partial sums of several K blocks at partial_dtype = packer_l1_acc ? (fp32_dest_acc_en ?
    # FLOAT32 : BFLOAT16) : the output dtype, over the output's own buffer when the two formats agree and in a CB of
    # their own otherwise (conv2d_op_program_factory_common.cpp `get_cb_info` @003324fc: MATMUL_PARTIALS
    # is_globally_allocated when partial_dtype == output_datatype; the matmul factories' interm0 CB, "Share buffer if
    # same data format"). Per core here: 4 x 4 output tiles, K = 32 tiles in blocks of in0_block_w, single buffers.
    t = get_target("wormhole-n150", {"bf16_accumulation": True})
    p = einsum("mk,kn->mn", {"m": 1024, "k": 1024, "n": 1024}, dtype="bf16", out_dtype=out, weight="B")
    knobs = {**DRAM, "act_block_h": 128, "in0_block_w": in0_block_w, "out_subblock": "1x4", "fp32_acc": fp32_acc,
             "act_double_buffer": False, "weights_double_buffer": False}  # fmt: skip
    knobs.pop("act_block_h_rank", None)
    m = t.mapping(p, knobs)
    assert t.check(p, m) == []
    out_bytes = dtypes.info(out).bytes
    act, weights, output = 128 * in0_block_w * 32 * BF16, in0_block_w * 32 * 128 * BF16, 128 * 128 * out_bytes
    part = 4 if fp32_acc else BF16
    partials = 128 * 128 * part if in0_block_w < 32 and part != out_bytes else 0
    assert t.cost(p, m).footprint_bytes == act + weights + output + partials


def test_a_published_bf16_accumulation_config_fits_l1() -> None:
    # tt-metal's GEMM benchmark (tests/ttnn/unit_tests/benchmarks/test_benchmark.py, 4096^3 from DRAM on an 8x8 grid:
    # per core 16 x 16 output tiles, in0_block_w 4, out_subblock 1x8, HiFi2, fp32_dest_acc_en off, bf16 output): its
    # partials share the output block: the 512 KiB output block and double-buffered 128 KiB activation and weight
    # blocks, 1024 KiB of L1 (refused before at 1408 KiB: a 512 KiB partials CB of its own, one activation block)
    t = get_target("wormhole-n150", {"fidelities": ["HiFi2", "HiFi4"], "bf16_accumulation": True})
    p = einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, dtype="bf16", out_dtype="bf16", weight="B")
    knobs = {**DRAM, "act_block_h": 512, "out_subblock": "1x8", "math_fidelity": "HiFi2", "fp32_acc": False}
    knobs.pop("act_block_h_rank", None)
    m = t.mapping(p, knobs)
    assert t.check(p, m) == []
    assert t.cost(p, m).footprint_bytes == (512 + 2 * 128 + 2 * 128) * 1024


def test_l1_sharded_k_blocks_come_from_the_layout_and_the_report_says_so() -> None:
    # a sharded GEMM runs K in its layout's channel shards: a published sharded config's in0_block_w does not change
    # the price, and the report names the K blocks used (block/8x8 on 1024^3: K = 32 tiles over 8 columns)
    p = einsum("mk,kn->mn", {"m": 1024, "k": 1024, "n": 1024}, dtype="bf16", weight=1)
    costs = []
    for kb in (1, 2, 4):
        m = T.mapping(p, {**BASE, "layout": "block/8x8", "in0_block_w": kb})
        assert T.check(p, m) == []
        rep = T.cost(p, m)
        costs.append(rep.cycles)
        assert any("l1-sharded: K in the layout's 8 blocks of 4 tiles" in n for n in rep.notes), rep.notes
    assert len(set(costs)) == 1
    dram = T.cost(p, T.mapping(p, {**DRAM, "in0_block_w": 4}))
    assert not any(n.startswith("l1-sharded") for n in dram.notes)
