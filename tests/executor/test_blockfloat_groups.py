"""Grouped and depthwise convs on block floats: blocks packed where tt-metal packs them, validated fast and small.

tt-metal holds a conv activation channels last, ``[1, 1, N*H*W, C]`` with ``C = g x ci`` (tenstorrent-conv2d.md,
"(N, H, W, C) (channels last)"), and packs a block-float tensor 16 values of a tile row to an exponent
(``blockfloat_common.cpp``), so 16 consecutive channels share an exponent across group boundaries. Its weight
matrix ``[Kh*Kw*Ci, Co]`` is packed along the output channels: a grouped conv's through the zero-padded grouped
layout, a depthwise conv's through the depthwise layout (16 channels of one kernel position;
``prepare_conv2d_weights.cpp``). See workload/block_layout.py.

These tests use only the executor's and the reference's entry points, so each one that claims a change fails
on the code that packed every operand along its last dimension as the problem lays it out.
"""

from __future__ import annotations

import hashlib
import tracemalloc
from typing import Any

import numpy as np
import pytest

from costmodels.registry import get_target
from executor import format_bound, mutations
from executor.validate import _packed, validate, validate_as_run
from tests.costmodels.tenstorrent.points import BASE
from workload import blockfloat
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.reference import random_inputs

SMALL = np.float32(2.0**-10)  # alone in its block it is exact; beside a 1.0 it is far below half a unit: 0


def _depthwise(fmt: str = "bfloat8_b", channels: int = 32, size: int = 14) -> Any:
    return conv2d(
        batch=1,
        in_channels=channels,
        out_channels=channels,
        input_height=size,
        input_width=size,
        kernel=3,
        padding=1,
        groups=channels,
        dtype=fmt,
    )


def _along_channels(x: np.ndarray) -> np.ndarray:
    """The activation ``[n, h, w, g, ci]`` as tt-metal holds it: ``[n, h, w, C]``."""
    return x.reshape(*x.shape[:-2], -1)


@pytest.mark.parametrize("target", ["wormhole-n150", "blackhole-p150"])
@pytest.mark.parametrize("fmt", ["bfloat8_b", "bfloat4_b"])
def test_a_depthwise_block_float_conv_validates_with_its_blocks_along_the_channels(target: str, fmt: str) -> None:
    p = _depthwise(fmt)
    # the activation the run reads: every value a whole number of units of its block of 16 *channels*
    x = _along_channels(random_inputs(p, np.random.default_rng(0))[0])
    units = x.astype(np.float64) / blockfloat.unit(x, fmt)
    np.testing.assert_array_equal(units, np.round(units))
    t = get_target(target, {"fidelities": ["LoFi", "HiFi4"]})
    for point in (BASE, {**BASE, "memory": "dram-interleaved"}, {**BASE, "math_fidelity": "LoFi"}):
        m = t.mapping(p, point)
        assert t.check(p, m) == []
        r = validate_as_run(p, m)
        assert r.status == "passed", r.reason
        assert "format bound" in r.tolerance_reason and "within it" in r.tolerance_reason
        assert "X's along the channels C = g x ci" in r.tolerance_reason


def test_packing_a_depthwise_conv_costs_memory_per_value_not_per_padded_block() -> None:
    """ci = 1 packed per group padded every value to a block of 16: about 1,200 bytes per value packed."""
    p = _depthwise()
    originals = random_inputs(p, np.random.default_rng(0), pack_blocks=False)
    tracemalloc.start()
    try:
        _packed(p, originals)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    values = sum(a.size for a in originals)
    assert peak < 200 * values, f"{peak / values:.0f} bytes per value"


def test_the_activation_shares_one_exponent_across_a_group_boundary() -> None:
    # 2 groups of 8 channels: one block of 16 channels holds both groups
    p = conv2d(
        batch=1, in_channels=16, out_channels=16, input_height=2, input_width=2, kernel=1, groups=2, dtype="bfloat8_b"
    )
    x = np.full(p.shape(p.inputs[0]), SMALL, dtype=np.float32)
    x[..., 0, 0] = 1.0  # group 0's first channel sets the exponent of channels 0-15
    w = np.ones(p.shape(p.inputs[1]), dtype=np.float32)
    px, _ = _packed(p, [x, w])
    assert (px[..., 0, 0] == 1.0).all()
    assert not px[..., 1, :].any()  # group 1's channels 8-15 share group 0's exponent: below half a unit
    assert not px[..., 0, 1:].any()
    # the reference draws its inputs the same way
    drawn = random_inputs(p, np.random.default_rng(3))[0]
    flat = _along_channels(drawn)
    np.testing.assert_array_equal(blockfloat.quantize(flat, "bfloat8_b"), flat)


def test_a_depthwise_weight_shares_one_exponent_across_the_channels_of_a_kernel_position() -> None:
    p = _depthwise(channels=32, size=6)
    x = np.ones(p.shape(p.inputs[0]), dtype=np.float32)
    w = np.full(p.shape(p.inputs[1]), SMALL, dtype=np.float32)  # [fh, fw, g, 1, 1]
    w[1, 2, 16] = 1.0  # channel 16 of kernel position (1, 2): the block of channels 16-31 there
    _, pw = _packed(p, [x, w])
    assert not pw[1, 2, 17:32].any()  # its 15 neighbours share its exponent
    np.testing.assert_array_equal(pw[1, 2, :16], SMALL)  # the block of channels 0-15 keeps its own
    np.testing.assert_array_equal(np.delete(pw.reshape(9, 32), 5, axis=0), SMALL)  # other kernel positions too


def test_a_grouped_weight_packs_its_output_channels_from_the_groups_column() -> None:
    """tt-metal's grouped layout: group 1's 24 output channels are columns 24-47 of its rows, blocks 16-31, 32-47."""
    p = conv2d(
        batch=1, in_channels=4, out_channels=48, input_height=3, input_width=3, kernel=1, groups=2, dtype="bfloat8_b"
    )
    x = np.ones(p.shape(p.inputs[0]), dtype=np.float32)
    w = np.full(p.shape(p.inputs[1]), SMALL, dtype=np.float32)  # [1, 1, g=2, ci=2, co=24]
    w[..., 1, :, 8] = 1.0  # group 1's output channel 8 is column 32: it opens the block of columns 32-47
    _, pw = _packed(p, [x, w])
    np.testing.assert_array_equal(pw[..., 1, :, :8], SMALL)  # columns 24-31: their own block (16-23 are zeros)
    assert not pw[..., 1, :, 9:].any()
    np.testing.assert_array_equal(pw[..., 0, :, :], SMALL)  # group 0 (columns 0-23) untouched


@pytest.mark.parametrize("fmt", ["bfloat8_b", "bfloat4_b"])
def test_a_grouped_conv_validates_and_its_format_bound_uses_the_same_blocks(fmt: str) -> None:
    p = conv2d(
        batch=1,
        in_channels=12,
        out_channels=36,
        input_height=7,
        input_width=7,
        kernel=3,
        padding=1,
        groups=3,
        dtype=fmt,
    )
    # the bound's unit per value is its packed block's (along C): packing moved each value by at most one unit
    originals = random_inputs(p, np.random.default_rng(0), pack_blocks=False)
    packed = _packed(p, originals)
    units = format_bound._units(p, originals)
    np.testing.assert_array_equal(_along_channels(units[0]), blockfloat.unit(_along_channels(originals[0]), fmt))
    for o, q, u in zip(originals, packed, units, strict=True):
        assert (np.abs(q.astype(np.float64) - o) <= u).all()
    t = get_target("wormhole-n150")
    r = validate(p, t.mapping(p, {**BASE, "memory": "dram-interleaved"}))
    assert r.status == "passed", r.reason
    assert "X's along the channels C = g x ci" in r.tolerance_reason
    assert "W's along the output channels g x co of one weight-matrix row" in r.tolerance_reason


def test_broken_mappings_of_a_depthwise_block_float_conv_still_fail() -> None:
    p = _depthwise(size=10)
    t = get_target("wormhole-n150", {"fidelities": ["LoFi"]})
    m = t.mapping(p, {**BASE, "memory": "dram-interleaved", "math_fidelity": "LoFi"})
    assert validate(p, m).passed
    found = mutations.mutants(p, m)
    assert len(found) >= 4, [name for name, _ in found]
    for name, broken in found:
        assert validate(p, broken).status == "failed", name
    narrow = validate(p, mutations.narrow_accumulator(m))
    assert narrow.status == "failed" and not narrow.reason.startswith("coverage")


def _digest(arrays: list[np.ndarray]) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


#: (problem, seed) -> digests of random_inputs, the executor's packed inputs and the format bound's units,
#: recorded on the code before grouped convs were packed along their channels: convs without groups and
#: einsums must keep packing bit for bit as they did
UNCHANGED = {
    ("gemm8", 0): ("1ca9b405129cfaf6", "164e889d49e3a3e5"),
    ("gemm8", 7): ("5d187e396e5be687", "5515cd9af8b43740"),
    ("gemm4_odd", 0): ("20a69c481af92b05", "a5ec92201a5abcc6"),
    ("gemm4_odd", 7): ("fc83e24ac2866436", "e36338031ce6a356"),
    ("mixed", 0): ("33be8d6c40f552aa", "398befac737b7601"),
    ("mixed", 7): ("8363a74ac25a6d02", "89d0c9a5e16e4eb0"),
    ("conv8", 0): ("3f8fc0797d2ec5e9", "b137409f09360135"),
    ("conv8", 7): ("c3611164e6ca5522", "0f7154d766ec0199"),
    ("conv4_stem", 0): ("11b4a1109759f236", "e5347009da61181b"),
    ("conv4_stem", 7): ("db995567fd0ed9e9", "0c77a0da8f85d954"),
    ("conv_mixed", 0): ("afe0378a21b8cd5d", "32eac7e87baaf522"),
    ("conv_mixed", 7): ("79fd5af0d608c385", "8ed2b38d2afebb3a"),
}


#: the problems of `UNCHANGED`, by name
UNCHANGED_PROBLEMS = {
    "gemm8": einsum("mk,kn->mn", {"m": 32, "k": 256, "n": 48}, dtype="bfloat8_b", weight=1),
    "gemm4_odd": einsum("mk,kn->mn", {"m": 7, "k": 70, "n": 37}, dtype="bfloat4_b", weight=1),
    "mixed": einsum(
        "bmk,bkn->bmn", {"b": 3, "m": 5, "k": 33, "n": 19}, dtype={"A": "bf16", "B": "bfloat8_b"}, weight=1
    ),
    "conv8": conv2d(
        batch=1, in_channels=32, out_channels=48, input_height=9, input_width=9, kernel=3, padding=1,
        dtype="bfloat8_b",
    ),
    "conv4_stem": conv2d(
        batch=2, in_channels=3, out_channels=20, input_height=11, input_width=11, kernel=7, stride=2, padding=3,
        dtype="bfloat4_b",
    ),
    "conv_mixed": conv2d(
        batch=1, in_channels=24, out_channels=40, input_height=6, input_width=5, kernel=(3, 1), dtype="bf16",
        weights_dtype="bfloat4_b",
    ),
}  # fmt: skip


@pytest.mark.parametrize(("name", "seed"), sorted(UNCHANGED))
def test_convs_without_groups_and_einsums_pack_bit_for_bit_as_before(name: str, seed: int) -> None:
    p = UNCHANGED_PROBLEMS[name]
    packed = random_inputs(p, np.random.default_rng(seed))
    originals = random_inputs(p, np.random.default_rng(seed), pack_blocks=False)
    inputs, units = UNCHANGED[(name, seed)]
    assert _digest(packed) == inputs
    assert _digest(_packed(p, originals)) == inputs  # the executor reads the reference's packed values
    assert _digest([np.asarray(u, dtype=np.float64) for u in format_bound._units(p, originals)]) == units
