"""Activations kept in L1 between layers, spills, and reshards (issue #13, "a network, not isolated layers").

The reshard price comes from hardware-facts.md §4.1, NoC row (Wormhole link 32 B/cycle per NoC,
router hop 9 cycles) and tenstorrent-conv2d.md "Sharding" (height shards are contiguous stick
ranges); the expected figures below are worked out by hand from those rules.
"""

from __future__ import annotations

from typing import Any

import pytest

from costmodels.registry import get_target
from costmodels.tenstorrent.reshard import reshard_cycles, reshard_matrix
from tests.costmodels.tenstorrent.points import BASE
from workload.conv2d import conv2d
from workload.errors import ProblemError

CONV = conv2d(batch=1, in_channels=64, out_channels=64, input_height=16, input_width=16, kernel=3, padding=1)
BF16 = 2
F32 = 4  # the output dtype defaults to the accumulation type, f32 for bf16 inputs (README, Problem format)


def cost(overrides: dict[str, Any], point: dict[str, Any] | None = None) -> Any:
    t = get_target("wormhole-n150", overrides)
    return t.cost(CONV, t.mapping(CONV, point or BASE))


def test_reshard_height2_to_height4_priced_from_the_noc_link() -> None:
    hw = get_target("wormhole-n150").hardware  # type: ignore[attr-defined]
    # 128 sticks x 64 channels bf16. height/2: core 0 holds sticks 0-63, core 1 64-127; height/4: cores 0-3
    # hold 32 each. Core 0 keeps 0-31 and sends 32-63; core 1 sends all 64 of its sticks (none stay):
    # the busiest core moves 64 sticks x 64 ch x 2 B = 8192 B at 32 B/cycle = 256 cycles, plus
    # 9 cycles x (8 + 8) hops = 144: 400 cycles; 96 sticks (12,288 B) cross the NoC.
    cyc, moved = reshard_matrix(128, 64, BF16, ["height/2"], ["height/4"], hw)
    assert float(cyc[0, 0]) == 400.0
    assert float(moved[0, 0]) == 96 * 64 * BF16
    assert reshard_cycles(128, 64, BF16, "height/4", "height/4", hw) == 0.0
    # width/2 -> height/2: each core keeps the quarter both give it and sends/receives the other quarter
    # 64 x 32 x 2 B = 4096 B at 32 B/cycle = 128 cycles + 144
    assert reshard_cycles(128, 64, BF16, "width/2", "height/2", hw) == 128 + 144


def test_blackhole_link_is_twice_as_wide() -> None:
    bh = get_target("blackhole-p150").hardware  # type: ignore[attr-defined]
    # hardware-facts.md §4.1 NoC row: 64 B/cycle on BH; BH grid 11x10 (hops 21 x 9 = 189 cycles)
    expected = 8192 / 64 + 9 * (bh.grid_x + bh.grid_y)
    assert reshard_cycles(128, 64, BF16, "height/2", "height/4", bh) == expected


def test_kept_in_l1_saves_exactly_the_input_and_output_dram_traffic() -> None:
    lone = cost({})
    kept = cost({"input_in_l1": True, "output_in_l1": True})
    in_bytes = 16 * 16 * 64 * BF16
    out_bytes = 256 * 64 * F32  # 256 output sticks (8 tiles) x 64 channels, f32
    assert lone.bytes["dram"] - kept.bytes["dram"] == in_bytes + out_bytes
    assert kept.cycles <= lone.cycles
    assert any("output kept in L1" in n for n in kept.notes)


def test_default_is_dram_in_and_out() -> None:
    lone = cost({})
    explicit = cost({"input_in_l1": False, "output_in_l1": False})
    assert lone.bytes["dram"] == explicit.bytes["dram"]
    assert lone.bytes["dram"] >= 16 * 16 * 64 * BF16 + 256 * 64 * F32


def test_spill_when_l1_is_too_small_pays_dram_both_ways() -> None:
    lone = cost({})
    kept = cost({"input_in_l1": True, "output_in_l1": True})
    # other live tensors fill L1: the layer's input and output cannot stay; each goes to DRAM and back
    full = get_target("wormhole-n150").hardware.l1_free_bytes  # type: ignore[attr-defined]
    spilled = cost({"input_in_l1": True, "output_in_l1": True, "l1_live_bytes": full})
    in_bytes, out_bytes = 16 * 16 * 64 * BF16, 256 * 64 * F32
    assert spilled.bytes["dram"] == lone.bytes["dram"] + in_bytes + out_bytes
    assert spilled.bytes["dram"] > kept.bytes["dram"]
    assert any("spilled" in n for n in spilled.notes)


def test_dram_interleaved_mapping_cannot_keep_its_output_in_l1() -> None:
    point = {**BASE, "memory": "dram-interleaved", "layout": "block/2x2", "in0_block_w": 1}
    lone = cost({}, point)
    asked = cost({"output_in_l1": True}, point)
    assert asked.bytes["dram"] == lone.bytes["dram"] + 256 * 64 * F32  # written, then read back


def test_input_in_another_layout_adds_the_reshard() -> None:
    same = cost({"input_in_l1": True, "output_in_l1": True})
    other = cost({"input_in_l1": True, "output_in_l1": True, "input_layout": "width/4"})
    hw = get_target("wormhole-n150").hardware  # type: ignore[attr-defined]
    expected = reshard_cycles(256, 64, BF16, "width/4", "height/8", hw)
    assert expected > 0
    assert other.cycles - same.cycles == pytest.approx(expected)
    assert other.breakdown["reshard"] == pytest.approx(expected)
    also_same = cost({"input_in_l1": True, "output_in_l1": True, "input_layout": "height/8"})
    assert also_same.cycles == same.cycles


@pytest.mark.parametrize("layout", ["diagonal/4", "block/9x9", "height/"])
def test_bad_input_layout_is_rejected_with_the_fix(layout: str) -> None:
    with pytest.raises(ProblemError, match="input_layout"):
        get_target("wormhole-n150", {"input_in_l1": True, "input_layout": layout})


@pytest.mark.parametrize(
    "overrides",
    [
        {"input_in_l1": True, "output_in_l1": True},
        {"input_in_l1": True, "output_in_l1": True, "input_layout": "block/2x4"},
        {"input_in_l1": True, "l1_live_bytes": 1_200_000},
    ],
)
def test_the_whole_space_table_agrees_with_cost(overrides: dict[str, Any]) -> None:
    from mapper.search import tune
    from mapper.settings import SearchSettings

    t = get_target("wormhole-n150", overrides)
    r = tune(CONV, t, SearchSettings(), validate=False)
    assert r.cost is not None and r.mapping is not None
    assert r.values["latency"] == pytest.approx(t.cost(CONV, r.mapping).cycles / 1e9, rel=1e-12)


def test_the_roofline_leaves_out_the_tensors_kept_in_l1() -> None:
    """The DRAM floor drops the activation with ``input_in_l1`` and the output with ``output_in_l1``, not the weight."""
    from costmodels.tenstorrent.target import dram_floor_bytes

    hw = get_target("wormhole-n150", {"input_in_l1": True, "output_in_l1": True}).hardware  # type: ignore[attr-defined]
    act = sum(b for i, b in enumerate(CONV.input_bytes) if i != CONV.weight)
    weight = CONV.input_bytes[CONV.weight]  # type: ignore[index]
    assert dram_floor_bytes(CONV, hw) == weight
    plain = get_target("wormhole-n150").hardware  # type: ignore[attr-defined]
    assert dram_floor_bytes(CONV, plain) == CONV.min_bytes == act + weight + CONV.output_bytes


def test_the_roofline_is_below_the_optimum_of_a_layer_kept_in_l1() -> None:
    """A 4x4/s4 patchify in and out of L1: the roofline counted 4.608 us of DRAM bytes above its 2.5 us optimum."""
    from mapper.search import tune_as_given
    from mapper.settings import SearchSettings

    p = conv2d(batch=8, in_channels=4, out_channels=128, input_height=64, input_width=64, kernel=4, stride=4)
    t = get_target("wormhole-n150", {"input_in_l1": True, "output_in_l1": True})
    r = tune_as_given(p, t, SearchSettings(strategy="exhaustive"), validate=False)
    best = r.best_value("latency")
    assert best is not None and r.proven_optimal
    assert t.lower_bound(p).cycles / t.hardware.clock_hz <= best  # type: ignore[attr-defined]
