"""Which steps of a Tensix conv run one after the other, as tenstorrent-conv2d.md describes them (issue #13).

* Sharded path: "Before the part of the operation where the actual convolution is done, several actions
  take place (sharding, padding, haloing, etc.). The input to the convolution micro-op is the output of the
  halo operation" ("Implementation"). The halo is a separate op before the conv: its time adds to the
  kernel's; the document overlaps it with nothing.
* DRAM-interleaved path ("Implementation of Convolution Operation on a Single Tensix Core"): step 1
  "Transform the input tensor into the activation matrix", then steps 2-7 load blocks of that matrix from
  global memory, compute and write each output block. The transform is a step of its own (read the input,
  write the Kh*Kw-expanded matrix to DRAM) and adds; there is no halo. Inside the loop the reader overlaps
  compute only with double buffering (hardware-facts.md §4.2 step 6).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from costmodels.registry import get_target
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.shape import tt_shape
from costmodels.tenstorrent.space import evaluate_point
from tests.costmodels.tenstorrent.points import BASE
from workload.conv2d import conv2d

T = get_target("wormhole-n150")
HW = cast(TensixHardware, T.hardware)
CONV = conv2d(batch=1, in_channels=64, out_channels=64, input_height=16, input_width=16, kernel=3, padding=1,
              dtype="bf16")  # fmt: skip
SERIAL: dict[str, Any] = {**BASE, "act_double_buffer": False, "weights_double_buffer": False}


def _a(problem: Any, point: dict[str, Any]) -> dict[str, float]:
    ev = evaluate_point(tt_shape(problem, HW.tile), HW, point)
    assert bool(ev.feasible[0]), {k: bool(v[0]) for k, v in ev.ok.items()}
    return {k: float(np.asarray(v).reshape(-1)[0]) for k, v in ev.a.items()}


def test_sharded_conv_runs_its_halo_before_the_kernel() -> None:
    a = _a(CONV, {**SERIAL, "layout": "height/4"})
    assert a["t_halo"] > 0 and a["t_im2col"] == 0
    # no double buffering: reader, activation and weight transfers add to compute; then the halo adds
    kernel = max(a["t_comp"] + a["t_reader"] + a["t_act"] + a["t_w"], a["t_out"], a["t_dram"])
    assert a["cycles"] == pytest.approx(kernel + a["t_halo"], rel=1e-12)
    # with double buffering the reader hides under compute, the halo still adds in full
    b = _a(CONV, {**BASE, "layout": "height/4", "act_double_buffer": True})
    assert b["t_halo"] == a["t_halo"] and b["cycles"] - b["t_halo"] < a["cycles"] - a["t_halo"]


def test_dram_conv_transforms_its_input_first_then_streams_blocks() -> None:
    a = _a(CONV, {**SERIAL, "layout": "height/8", "memory": "dram-interleaved", "in0_block_w": 2})
    assert a["t_halo"] == 0
    rows, k = 256, 3 * 192  # 16x16 outputs; K = 3 blocks of round_up(64 * 3, 32)
    transform = (rows * 64 * 2 + rows * k * 2) / HW.dram_bytes_per_cycle  # read input, write the matrix
    assert a["t_im2col"] == pytest.approx(transform, rel=1e-12)
    kernel = max(a["t_comp"] + a["t_act"] + a["t_w"], a["t_out"], a["t_dram"])
    assert a["cycles"] == pytest.approx(kernel + transform, rel=1e-12)
    # the kernel's own DRAM time reads the matrix; the transform's bytes are reported on top, not re-timed
    assert a["dram_bytes"] == pytest.approx(a["t_dram"] * HW.dram_bytes_per_cycle + transform * HW.dram_bytes_per_cycle)


def test_a_matmul_conv_on_the_dram_path_has_no_transform_step() -> None:
    p = conv2d(batch=1, in_channels=64, out_channels=64, input_height=16, input_width=16, kernel=1, dtype="bf16")
    a = _a(p, {**SERIAL, "layout": "height/8", "memory": "dram-interleaved", "in0_block_w": 2})
    assert a["t_im2col"] == 0 and a["t_halo"] == 0


def test_the_report_carries_the_transform_step_and_its_stall_stack_sums() -> None:
    point = {**SERIAL, "layout": "height/8", "memory": "dram-interleaved", "in0_block_w": 2}
    a = _a(CONV, point)
    rep = T.cost(CONV, T.mapping(CONV, point))
    assert rep.cycles == pytest.approx(a["cycles"], rel=1e-12)
    assert sum(rep.stall_stack.values()) == pytest.approx(rep.cycles, rel=1e-9)
    assert rep.stall_stack["dram"] >= a["t_im2col"] > 0 and rep.breakdown["dram"] == a["t_dram"] + a["t_im2col"]
