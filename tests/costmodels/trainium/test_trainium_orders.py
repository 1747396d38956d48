"""Loop orders (costmodels/trainium/orders.py; issue #12): the six block orders price differently where
they change which operand is reused, and the tile order inside a block is proved never to change the
cost (LoadStationary hidden under every legal instruction)."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.protocol import Choice
from costmodels.registry import get_target
from costmodels.trainium.orders import LOAD_STATIONARY_SPEEDUP, ORDERS, load_stationary_cycles
from costmodels.trainium.target import TrainiumTarget
from workload.einsum import einsum


@pytest.mark.parametrize("preset", ["trn1", "trn2"])
def test_load_stationary_is_hidden_under_every_legal_instruction(preset: str) -> None:
    t = get_target(preset)
    assert isinstance(t, TrainiumTarget)
    hw = t.hardware
    ts = np.arange(1, hw.pe_cols + 1)[:, None]  # every legal stationary free size (nki-nc_matmul.txt)
    tm = np.arange(1, hw.moving_free_max + 1)[None, :]
    mm = np.maximum(np.minimum(hw.matmul_floor_cycles, ts), tm)  # nki-nc_matmul.txt, Estimated instruction cost
    assert np.all(load_stationary_cycles(ts) <= mm)
    assert LOAD_STATIONARY_SPEEDUP == 4  # hardware-facts.md §2.1: "up to 4x faster than a MultiplyMoving"
    # the proof needs the speedup: an unhidden load (speedup 1) would cost more than a short instruction
    assert np.any(ts / 1 > mm)


def test_block_orders_change_which_operand_is_reused() -> None:
    t = get_target("trn1")
    p = einsum("mk,kn->mn", {"m": 1024, "k": 1024, "n": 1024}, dtype="bf16", weight=1)
    base: dict[str, Choice] = {"stationary": "weight", "tile_stat": 128, "tile_mov": 512, "tile_k": 128,
                               "block_stat": 1, "block_mov": 1, "block_k": 1, "acc": "sbuf", "cores": 1,
                               "shard": "m"}  # fmt: skip
    off = {}
    for order in ORDERS:
        m = t.mapping(p, {**base, "order": order})
        assert t.check(p, m) == []
        off[order] = t.cost(p, m).offchip_bytes
    assert off["smk"] == off["msk"]  # k innermost: both blocks fetched at every step whatever the outer order
    assert off["skm"] < off["smk"]  # m innermost under k: the stationary block is reused across the moving blocks
    assert off["mks"] < off["msk"]  # s innermost under k: the moving block is reused across the stationary blocks
    assert len(set(off.values())) >= 3
