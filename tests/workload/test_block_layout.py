"""Where a problem's block-float operands are packed (workload/block_layout.py), against tt-metal's own layouts.

Each packing is checked against an oracle that builds the tensor tt-metal packs and packs it along its last
dimension (``pack_fp32_vec_as_bfp_tiles``: 16 values of a tile row share an exponent):

- the activation ``[N*H*W, C]`` with ``C = g x ci`` (tenstorrent-conv2d.md: "(N, H, W, C) (channels last)");
- a grouped conv's weight matrix ``[Kh*Kw*Ci, Co]`` after ``convert_conv_weight_tensor_to_grouped_layout``
  (tt-metal ``prepare_conv2d_weights.cpp``: zero-padded ``[Co, Ci, Kh, Kw]``, each filter holding only its
  group's input channels);
- a depthwise conv's weight as ``convert_conv_weight_tensor_to_2d_depthwise_layout`` lays it out (16
  consecutive channels of one kernel position in a face row).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workload import block_layout, blockfloat
from workload.block_layout import block_packing, depthwise_layout
from workload.blockfloat import ALONG_LAST, Packing
from workload.conv2d import conv2d
from workload.einsum import einsum

FORMATS = ["bfloat8_b", "bfloat4_b"]


def _grouped_matrix(w: np.ndarray) -> np.ndarray:
    """tt-metal's grouped weight matrix of ``W[fh, fw, g, ci, co]``: rows ``(fh, fw, g*ci_g + ci)``, columns
    ``g*co_g + co``, zero outside each row's group (convert_conv_weight_tensor_to_grouped_layout)."""
    fh, fw, g, ci, co = w.shape
    m = np.zeros((fh, fw, g, ci, g, co), dtype=w.dtype)
    for k in range(g):
        m[:, :, k, :, k, :] = w[:, :, k, :, :]
    return m.reshape(fh * fw * g * ci, g * co)


def _from_grouped_matrix(m: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    fh, fw, g, ci, co = shape
    full = m.reshape(fh, fw, g, ci, g, co)
    return np.stack([full[:, :, k, :, k, :] for k in range(g)], axis=2)


def _random(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """float32 values over many binades (so blocks' exponents differ), a few exact zeros."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=shape) * 2.0 ** rng.integers(-12, 3, size=shape)
    x[rng.random(shape) < 0.05] = 0.0
    return x.astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(
    g=st.integers(2, 7),
    ci=st.integers(1, 20),
    co=st.integers(1, 40),
    k=st.sampled_from([1, 3]),
    fmt=st.sampled_from(FORMATS),
    seed=st.integers(0, 2**16),
)
def test_grouped_conv_operands_pack_as_tt_metal_lays_them_out(
    g: int, ci: int, co: int, k: int, fmt: str, seed: int
) -> None:
    p = conv2d(
        batch=2, in_channels=g * ci, out_channels=g * co, input_height=5, input_width=4, kernel=k, groups=g, dtype=fmt
    )
    x = _random(p.shape(p.inputs[0]), seed)
    w = _random(p.shape(p.inputs[1]), seed + 1)
    # the activation: [n, h, w, C] packed along C
    flat = x.reshape(*x.shape[:-2], g * ci)
    qx = blockfloat.quantize(x, fmt, block_packing(p, 0))
    np.testing.assert_array_equal(qx.reshape(flat.shape), blockfloat.quantize(flat, fmt))
    np.testing.assert_array_equal(
        blockfloat.unit(x, fmt, block_packing(p, 0)).reshape(flat.shape), blockfloat.unit(flat, fmt)
    )
    # the weight: the grouped matrix packed along its output channels, unless tt-metal lays it out depthwise
    qw = blockfloat.quantize(w, fmt, block_packing(p, 1))
    uw = blockfloat.unit(w, fmt, block_packing(p, 1))
    if depthwise_layout(p):
        taps = w.reshape(k * k, g)  # [kernel position, channel]
        np.testing.assert_array_equal(qw.reshape(taps.shape), blockfloat.quantize(taps, fmt))
        np.testing.assert_array_equal(uw.reshape(taps.shape), blockfloat.unit(taps, fmt))
    else:
        m = _grouped_matrix(w)
        np.testing.assert_array_equal(qw, _from_grouped_matrix(blockfloat.quantize(m, fmt), w.shape))
        np.testing.assert_array_equal(uw, _from_grouped_matrix(blockfloat.unit(m, fmt), w.shape))
    # packing moves each value by at most one unit of its block
    assert (np.abs(qw.astype(np.float64) - w) <= uw).all()


@pytest.mark.parametrize(
    ("kernel", "height", "width", "expected"),
    [
        ((3, 3), 14, 14, True),  # is_2d_depthwise_conv
        ((1, 3), 5, 7, True),  # a kernel larger than 1x1, neither dimension 1-D
        ((1, 1), 14, 14, False),  # 1x1: not an actual 2-D depthwise conv, the grouped layout
        ((1, 1), 1, 9, True),  # is_1d_depthwise_conv: 1x1 kernel on a 1-high image
        ((1, 3), 1, 9, False),  # 1-D conv with a wider kernel: the grouped layout
        ((3, 1), 9, 1, False),  # 1-D along the width: not the 2-D path, the grouped layout
    ],
)
def test_which_depthwise_convs_take_tt_metals_depthwise_weight_layout(
    kernel: tuple[int, int], height: int, width: int, expected: bool
) -> None:
    p = conv2d(
        batch=1,
        in_channels=32,
        out_channels=32,
        input_height=height,
        input_width=width,
        kernel=kernel,
        groups=32,
        dtype="bfloat8_b",
    )
    assert depthwise_layout(p) is expected
    w = block_packing(p, 1)
    assert w == (Packing(merge=3) if expected else Packing(merge=1, offset_dim=2, offset_step=1))
    assert block_packing(p, 0) == Packing(merge=2)


def test_convs_without_groups_and_einsums_pack_along_the_last_dimension() -> None:
    plain = conv2d(
        batch=1, in_channels=24, out_channels=40, input_height=6, input_width=6, kernel=3, padding=1, dtype="bfloat8_b"
    )
    gemm = einsum("mk,kn->mn", {"m": 8, "k": 40, "n": 24}, dtype="bfloat4_b")
    assert [block_packing(q, i) for q in (plain, gemm) for i in (0, 1)] == [ALONG_LAST] * 4
    assert block_layout.describe(plain, 0) == block_layout.describe(gemm, 1) == "along the last dimension"
    # einsum axes that merely share the names are not a conv: the output must end in (g, co)
    named = einsum("X[n, g, ci], W[g, ci, co] -> Y[n, co]", {"n": 2, "g": 3, "ci": 4, "co": 5}, dtype="bfloat8_b")
    assert block_packing(named, 0) == ALONG_LAST and block_packing(named, 1) == ALONG_LAST


def test_the_onnx_importers_1d_grouped_conv_layout_packs_its_channels_too() -> None:
    """The ONNX importer lowers 1-D convs to ``X[n, ow + fw, g, ci], W[fw, g, ci, co] -> Y[n, ow, g, co]``."""
    sizes = {"n": 1, "ow": 8, "fw": 3, "g": 4, "ci": 6, "co": 5}
    p = einsum("X[n, ow + fw, g, ci], W[fw, g, ci, co] -> Y[n, ow, g, co]", sizes, dtype="bfloat8_b", weight="W")
    assert block_packing(p, 0) == Packing(merge=2)
    assert block_packing(p, 1) == Packing(merge=1, offset_dim=1, offset_step=5)
    dw = einsum(
        "X[n, ow + fw, g, ci], W[fw, g, ci, co] -> Y[n, ow, g, co]",
        {**sizes, "ci": 1, "co": 1, "fw": 1},
        dtype="bfloat8_b",
        weight="W",
    )
    assert depthwise_layout(dw)  # a 1-D conv runs as a 2-D one of height 1: a 1x1 depthwise is the 1-D path
    # 3-D: tt-metal's conv3d zero-pads grouped weights like conv2d's grouped layout and has no depthwise one
    sizes3 = {"n": 1, "od": 3, "oh": 3, "ow": 3, "fd": 3, "fh": 3, "fw": 3, "g": 8, "ci": 1, "co": 1}
    expr3 = "X[n, od + fd, oh + fh, ow + fw, g, ci], W[fd, fh, fw, g, ci, co] -> Y[n, od, oh, ow, g, co]"
    dw3 = einsum(expr3, sizes3, dtype="bfloat8_b", weight="W")
    assert not depthwise_layout(dw3)
    assert block_packing(dw3, 0) == Packing(merge=2)
    assert block_packing(dw3, 1) == Packing(merge=1, offset_dim=3, offset_step=1)


def test_the_reason_names_where_each_operand_is_packed() -> None:
    from executor.tolerance import derive

    p = conv2d(
        batch=1, in_channels=8, out_channels=16, input_height=4, input_width=4, kernel=3, groups=2, dtype="bfloat8_b"
    )
    _, reason = derive(p)
    assert "(X bfloat8_b, W bfloat8_b: one exponent per 16 values, X's along the channels C = g x ci" in reason
    assert "W's along the output channels g x co of one weight-matrix row (tt-metal's grouped weight layout)" in reason
    plain = einsum("mk,kn->mn", {"m": 8, "k": 40, "n": 24}, dtype="bfloat8_b")
    assert (
        "(A bfloat8_b, B bfloat8_b: one exponent per 16 values along the last dimension, mantissas" in derive(plain)[1]
    )


def test_offset_runs_are_slices_of_a_longer_zero_padded_row() -> None:
    small = np.float32(2.0**-10)
    x = np.full((2, 3, 5), small, dtype=np.float32)  # runs of 5 along the last axis, run i from column 7 * i
    x[1, 2, 2] = 1.0  # run 2 covers columns 14-18: its values 0-1 end block [0, 16), 2-4 open block [16, 32)
    packing = Packing(merge=1, offset_dim=1, offset_step=7)
    q = blockfloat.quantize(x, "bfloat8_b", packing)
    assert q[1, 2, 2] == 1.0 and not q[1, 2, 3:].any()  # beside the 1.0: far below half a unit
    np.testing.assert_array_equal(q[1, 2, :2], small)  # their own block (the row's other columns are zeros)
    assert not blockfloat.quantize(x, "bfloat8_b")[1, 2, :2].any()  # packed from column 0 they would not be
    np.testing.assert_array_equal(q[1, :2], small)  # every run is its own row
    np.testing.assert_array_equal(q[0], small)
    assert blockfloat.shared_exponents(x, packing).shape == (6 * 2,)  # 6 runs, 2 blocks each (offset up to 15)
    with pytest.raises(ValueError, match="offset_dim 2"):
        blockfloat.quantize(x, "bfloat8_b", Packing(merge=1, offset_dim=2, offset_step=5))


def test_decoding_in_chunks_gives_the_same_values(monkeypatch: pytest.MonkeyPatch) -> None:
    x = _random((37, 61), 5)
    whole = blockfloat.quantize(x, "bfloat8_b")
    monkeypatch.setattr(blockfloat, "CHUNK_BLOCKS", 3)
    np.testing.assert_array_equal(blockfloat.quantize(x, "bfloat8_b"), whole)
    assert blockfloat.quantize(np.zeros((0, 4)), "bfloat4_b").shape == (0, 4)
