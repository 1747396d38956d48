"""Block-float inputs on Tenstorrent: tile bytes in DRAM, NoC and L1, the scorer agreeing, other targets refusing.

Tile sizes: tt-metal ``tt_metal/api/tt-metalium/constants.hpp``: ``BFLOAT8_B_TILE_HW = TILE_HW + 64`` (1088
bytes: 1024 one-byte data plus the 64-byte exponent section), ``BFLOAT4_B_TILE_HW = TILE_HW / 2 + 64`` (576).
"""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.registry import get_target, target_names
from tests.costmodels.tenstorrent.points import BASE
from workload.einsum import einsum

TILE_BYTES = {"bf16": 2048, "bfloat8_b": 1088, "bfloat4_b": 576}
M, K, N = 1024, 512, 256


def _problem(dtype: str) -> object:
    return einsum("mk,kn->mn", {"m": M, "k": K, "n": N}, dtype=dtype, out_dtype="bf16", weight=1)


@pytest.mark.parametrize("memory", ["l1-sharded", "dram-interleaved"])
@pytest.mark.parametrize("dtype", sorted(TILE_BYTES))
def test_dram_and_noc_bytes_count_whole_tiles_of_the_format(dtype: str, memory: str) -> None:
    t = get_target("wormhole-n150")
    p = _problem(dtype)
    m = t.mapping(p, {**BASE, "memory": memory})
    assert t.check(p, m) == []
    c = t.cost(p, m)
    in_tiles, w_tiles, out_tiles = (M // 32) * (K // 32), (K // 32) * (N // 32), (M // 32) * (N // 32)
    # every operand read once and the bf16 output written once
    assert c.bytes["dram"] == (in_tiles + w_tiles) * TILE_BYTES[dtype] + out_tiles * 2048
    # the weights reach every one of the 8 cores over the NoC: in the format's tiles
    assert c.bytes["noc_weights"] == 8 * w_tiles * TILE_BYTES[dtype]
    assert c.offchip_bytes == c.bytes["dram"]


def test_block_floats_shrink_the_l1_footprint_and_the_scorer_agrees() -> None:
    t = get_target("wormhole-n150", {"fidelities": ["LoFi", "HiFi4"]})
    footprints = []
    for dtype in ("bf16", "bfloat8_b", "bfloat4_b"):
        p = _problem(dtype)
        point = {**BASE, "math_fidelity": "LoFi"}
        c = t.cost(p, t.mapping(p, point))
        footprints.append(c.footprint_bytes)
        s = t.score_batch(p, {k: np.array([v]) for k, v in point.items()})
        assert bool(s.feasible[0])
        assert s.objectives["latency"][0] == pytest.approx(c.cycles / c.clock_hz, rel=1e-12)
        assert s.objectives["offchip_bytes"][0] == pytest.approx(c.offchip_bytes, rel=1e-12)
        assert s.objectives["footprint"][0] == pytest.approx(c.footprint_bytes, rel=1e-12)
    assert footprints[0] > footprints[1] > footprints[2]


@pytest.mark.parametrize("dtype", ["bfloat8_b", "bfloat4_b"])
def test_other_targets_refuse_block_floats_naming_the_targets_that_take_them(dtype: str) -> None:
    gemm = einsum("mk,kn->mn", {"m": 64, "k": 64, "n": 64}, dtype=dtype, weight=1)
    rowsum = einsum("ij->i", {"i": 64, "j": 256}, dtype=dtype)
    takers = [n for n in target_names() if get_target(n).family == "tenstorrent"]
    assert takers == ["blackhole-p150", "wormhole-n150"]
    for name in target_names():
        t = get_target(name)
        if name in takers:
            assert t.supports(gemm) == []
            continue
        for p in (gemm, rowsum):
            texts = [v.message for v in t.supports(p) if dtype in v.message]
            if p is rowsum and not texts:  # a family that refuses every unary problem first
                assert t.supports(p)
                continue
            assert texts, (name, p)
            assert all("blackhole-p150, wormhole-n150" in m and "bf16" in m for m in texts), texts
