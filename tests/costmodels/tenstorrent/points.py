"""The Tenstorrent test suite's base mapping point: height sharding over 8 cores, HiFi4, fp32 accumulation."""

from __future__ import annotations

from typing import Any

BASE: dict[str, Any] = {
    "layout": "height/8",
    "memory": "l1-sharded",
    "act_block_h_rank": 0,
    "act_block_w_div": 1,
    "in0_block_w": 1,
    "subblock_rank": 0,
    "act_double_buffer": False,
    "weights_double_buffer": False,
    "split_reader": False,
    "math_fidelity": "HiFi4",
    "fp32_acc": True,
}
