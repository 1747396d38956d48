"""The einsum front-end: both notations, derived facts (MACs, bytes, accumulation type)."""

from __future__ import annotations

import math

import pytest

from workload import dtypes
from workload.einsum import einsum, parse_einsum
from workload.problem import IndexExpr


def test_compact_batched_matmul_structure() -> None:
    p = einsum("vmk,vnk->vmn", {"v": 2, "m": 3, "n": 5, "k": 7}, weight=1)
    assert [o.name for o in p.operands] == ["A", "B", "Y"]
    assert p.free_axes == ("v", "m", "n")
    assert p.reduction_axes == ("k",)
    assert p.shape(p.inputs[0]) == (2, 3, 7)
    assert p.shape(p.inputs[1]) == (2, 5, 7)
    assert p.shape(p.output) == (2, 3, 5)
    assert p.weight_operand() is p.inputs[1]


def test_spaces_are_ignored_in_both_forms() -> None:
    sizes = {"m": 4, "k": 8, "n": 2}
    assert einsum(" m k , k n -> m n ", sizes) == einsum("mk,kn->mn", sizes)
    a = einsum("X[ m , k ], W[k,n]->Y[m,  n]", sizes)
    b = einsum("X[m,k],W[k,n]->Y[m,n]", sizes)
    assert a == b


def test_structured_form_with_multi_letter_axes_and_coefficients() -> None:
    p = einsum(
        "X[n, oh:2 + fh, ow:2 + fw:3, c], Wt[fh, fw, c, k] -> Out[n, oh, ow, k]",
        {"n": 1, "oh": 4, "ow": 5, "fh": 3, "fw": 2, "c": 8, "k": 16},
        weight="Wt",
    )
    x = p.inputs[0]
    assert x.dims[1] == IndexExpr.of(("oh", 2), "fh")
    assert x.dims[2] == IndexExpr.of(("ow", 2), ("fw", 3))
    # extent = sum coeff*(size-1) + 1
    assert p.padded_shape(x) == (1, 2 * 3 + 2 + 1, 2 * 4 + 3 * 1 + 1, 8)
    assert p.weight == 1
    assert p.output.name == "Out"


def test_reference_dollar_notation_parses() -> None:
    # contraction-engine-rngd.txt, "2D Convolution": $(W:2 + Fw) style sliding windows.
    p = einsum("[H, $(W:2 + Fw:2)], [Fw, C] -> [H, W, C]", {"H": 2, "W": 15, "Fw": 3, "C": 4})
    assert p.inputs[0].dims[1] == IndexExpr.of(("W", 2), ("Fw", 2))
    assert [o.name for o in p.operands] == ["A", "B", "Y"]


def test_unary_reduction_and_reduce_ops() -> None:
    for op in ("add", "mul", "max", "min"):
        p = einsum("ij->i", {"i": 3, "j": 4}, reduce_op=op, dtype="f32")
        assert not p.is_binary
        assert p.reduce_op == op
        assert p.reduction_axes == ("j",)


def test_parse_returns_names_and_dims() -> None:
    ins, out = parse_einsum("Q[b, s, d], K[b, t, d] -> S[b, s, t]")
    assert [n for n, _ in ins] == ["Q", "K"]
    assert out[0] == "S"
    assert [str(d) for d in out[1]] == ["b", "s", "t"]


def test_per_operand_dtypes_and_default_output_is_accumulator() -> None:
    p = einsum("mk,kn->mn", {"m": 2, "k": 2, "n": 2}, dtype={"A": "int8", "B": "i4"})
    assert [o.dtype for o in p.inputs] == ["i8", "i4"]
    assert p.output.dtype == "i32"
    q = einsum("mk,kn->mn", {"m": 2, "k": 2, "n": 2}, dtype="bf16", out_dtype="bf16")
    assert q.output.dtype == "bf16"


@pytest.mark.parametrize(
    ("a", "b", "acc"),
    [
        # contraction-engine-rngd.txt, "Constraints" (Data type support):
        # "Output types are widened automatically (i4/i8 -> i32, f8/bf16 -> f32)".
        ("i4", "i4", "i32"),
        ("i8", "i8", "i32"),
        ("i4", "i8", "i32"),
        ("f8e4m3", "f8e4m3", "f32"),
        ("f8e5m2", "f8e4m3", "f32"),
        ("bf16", "bf16", "f32"),
        # nki-nc_matmul.txt: "The matmul accumulation and results are always in float32" (f16 inputs too).
        ("f16", "f16", "f32"),
        ("f32", "f32", "f32"),
        ("i8", "bf16", "f32"),
    ],
)
def test_accumulation_dtype_follows_the_references(a: str, b: str, acc: str) -> None:
    p = einsum("mk,kn->mn", {"m": 2, "k": 2, "n": 2}, dtype={"A": a, "B": b})
    assert p.acc_dtype == acc


def test_mac_count_is_the_iteration_space() -> None:
    p = einsum("vmk,vnk->vmn", {"v": 3, "m": 5, "n": 7, "k": 11})
    assert p.macs == 3 * 5 * 7 * 11
    conv = einsum(
        "X[oh:2 + fh, c], W[fh, c, k] -> Y[oh, k]",
        {"oh": 6, "fh": 3, "c": 4, "k": 5},
    )
    assert conv.macs == 6 * 3 * 4 * 5


def test_operand_bytes_i4_is_half_a_byte() -> None:
    p = einsum("mk,kn->mn", {"m": 8, "k": 16, "n": 4}, dtype={"A": "i4", "B": "i8"}, out_dtype="i32")
    assert p.input_bytes == (8 * 16 * 0.5, 16 * 4 * 1)
    assert p.output_bytes == 8 * 4 * 4
    assert p.min_bytes == 64 + 64 + 128


def test_operand_bytes_of_each_dtype() -> None:
    expected = {"i4": 0.5, "i8": 1, "f8e4m3": 1, "f8e5m2": 1, "bf16": 2, "f16": 2, "f32": 4, "i32": 4}
    for dt, per in expected.items():
        p = einsum("ij->i", {"i": 3, "j": 6}, dtype=dt)
        assert p.input_bytes == (18 * per,)
        assert dtypes.info(dt).bytes == per


def test_sliding_window_bytes_count_real_data_not_reads() -> None:
    # A stride-1 window reads overlapping rows: the tensor holds oh+fh-1 rows, not oh*fh.
    p = einsum("X[oh + fh, c], W[fh, c, k] -> Y[oh, k]", {"oh": 10, "fh": 3, "c": 4, "k": 2}, dtype="bf16")
    assert p.shape(p.inputs[0]) == (12, 4)
    assert p.input_bytes[0] == 12 * 4 * 2
    assert p.min_bytes == 12 * 4 * 2 + 3 * 4 * 2 * 2 + 10 * 2 * 4
    assert p.min_bytes < p.macs * 2  # far below one read per MAC


def test_padding_is_excluded_from_bytes() -> None:
    p = einsum(
        "X[oh + fh], W[fh] -> Y[oh]",
        {"oh": 8, "fh": 3},
        pad={"X": [(1, 1)]},
        dtype="f32",
    )
    assert p.padded_shape(p.inputs[0]) == (10,)
    assert p.shape(p.inputs[0]) == (8,)
    assert p.input_bytes[0] == 8 * 4


def test_diagonal_and_full_reduction_are_valid() -> None:
    d = einsum("ii->i", {"i": 4}, dtype="f32")
    assert d.shape(d.inputs[0]) == (4, 4)
    s = einsum("mk->", {"m": 3, "k": 2})
    assert s.free_axes == ()
    assert math.prod(s.shape(s.output)) == 1
