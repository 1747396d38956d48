"""act_block_h sets the activation CB, and a double buffer that does not fit is dropped (issue #13).

tenstorrent-conv2d.md, Conv2dConfig: ``act_block_h_override`` - "smaller values require less memory,
larger values require more memory"; ``enable_act_double_buffer`` helps "if enough memory is
available". hardware-facts.md §4.2 step 3: the CBs must fit the free L1; step 6: with double
buffering the reader overlaps compute, else the times add.
"""

from __future__ import annotations

from typing import Any

from costmodels.registry import get_target
from tests.costmodels.tenstorrent.points import BASE
from workload.conv2d import conv2d

T = get_target("wormhole-n150")
# 3x3 conv, 32 -> 128 channels at 56x56, height sharded over 2 cores: 49 output tiles (1568 rows) per core; its f32
# output shard (784 KiB) holds the partial sums too (f32 accumulation: no partials CB of their own)
CONV = conv2d(batch=1, in_channels=32, out_channels=128, input_height=56, input_width=56, kernel=3, padding=1)
POINT: dict[str, Any] = {**BASE, "layout": "height/2"}
# one act block: act_block_h rows x act_block_w = round_up(Cin * Kw, 32) = 96 columns (one Kh block), bf16
ACT_W, BF16 = 96, 2


def priced(**kw: Any) -> tuple[Any, Any]:
    m = T.mapping(CONV, {**POINT, **kw})
    assert T.check(CONV, m) == []
    return m, T.cost(CONV, m)


def test_whole_height_block_loses_double_buffering() -> None:
    m, db = priced(act_block_h_rank=0, act_double_buffer=True)
    _, single = priced(act_block_h_rank=0, act_double_buffer=False)
    rows = int(m.knobs["act_block_h"])
    assert rows == 1568  # the whole per-core height, ttnn's default
    free = T.hardware.l1_free_bytes  # type: ignore[attr-defined]
    # a second block would not fit beside the other buffers
    assert single.footprint_bytes + rows * ACT_W * BF16 > free
    assert db.cycles == single.cycles  # the overlap is lost, and the cost shows it
    assert db.footprint_bytes == single.footprint_bytes
    assert any("double buffering requested but dropped" in n for n in db.notes)


def test_smaller_act_block_keeps_double_buffering_and_is_faster() -> None:
    m, db = priced(act_block_h_rank=1, act_double_buffer=True)
    _, single = priced(act_block_h_rank=1, act_double_buffer=False)
    rows = int(m.knobs["act_block_h"])
    assert rows < 1568
    assert db.footprint_bytes - single.footprint_bytes == rows * ACT_W * BF16  # the second block
    assert db.cycles < single.cycles
    assert not any("dropped" in n for n in db.notes)
    _, whole = priced(act_block_h_rank=0, act_double_buffer=True)
    assert db.cycles < whole.cycles  # so the smaller act_block_h is the better choice here


def test_a_height_sharded_matmul_reads_its_blocks_in_place() -> None:
    # tt-metal's 1D matmul gives in0's CB the input shard's own memory (in0_CB_tiles = num_blocks * per_core_M *
    # in0_block_w, globally allocated on the shard): L1 holds the shard, the weights, the output and no activation CB
    # beside them (Falcon-7B's attention QK^T V slice: 18176 x 1024 rows over 57 cores, 320 per core)
    from workload.einsum import einsum

    t = get_target("wormhole-n150", {"fidelities": ["HiFi2", "HiFi4"], "bf16_accumulation": True})
    p = einsum("mk,kn->mn", {"m": 18176, "k": 1024, "n": 64}, dtype="bf16", weight="B", out_dtype="bf16")
    point = {**BASE, "layout": "height/57", "act_block_h": 320, "in0_block_w": 32, "out_subblock": "1x2",
             "math_fidelity": "HiFi2", "fp32_acc": False, "act_double_buffer": True}  # fmt: skip
    for rank in ("act_block_h_rank", "subblock_rank"):
        point.pop(rank)
    m = t.mapping(p, point)
    assert t.check(p, m) == []
    shard, weights, output = 320 * 1024 * BF16, 1024 * 64 * BF16, 320 * 64 * BF16
    assert t.cost(p, m).footprint_bytes == shard + weights + output
    # over L1 on fewer cores, the reason names the matmul's input shard (a conv's is its halo buffer)
    over = t.check(p, t.mapping(p, {**point, "layout": "height/8", "act_block_h": 2272}))
    cap = next(v for v in over if v.code == "l1-capacity")
    assert "input shard" in cap.message and "halo" not in cap.message
    # a conv's im2col blocks are built from the halo buffer: its activation CB stays
    _, conv = priced(act_block_h_rank=1, act_double_buffer=False)
    _, conv_db = priced(act_block_h_rank=1, act_double_buffer=True)
    assert conv_db.footprint_bytes > conv.footprint_bytes
