"""Every malformed einsum or conv spec gets a ProblemError naming the offending token, with a fix."""

from __future__ import annotations

from typing import Any

import pytest

from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.problem import MAX_AXES, MAX_AXIS_SIZE, MAX_COEFF, IndexExpr, Operand, Problem

MM = {"m": 4, "k": 4, "n": 4}
CONV: dict[str, Any] = dict(batch=1, in_channels=4, out_channels=8, input_height=8, input_width=8, kernel=3)


def _einsum_error(expr: Any, sizes: Any = None, **kw: Any) -> ProblemError:
    with pytest.raises(ProblemError) as info:
        einsum(expr, MM if sizes is None else sizes, **kw)
    assert info.value.hint, "every error says how to fix it"
    return info.value


def _conv_error(**kw: Any) -> ProblemError:
    with pytest.raises(ProblemError) as info:
        conv2d(**{**CONV, **kw})
    assert info.value.hint, "every error says how to fix it"
    return info.value


# ---- einsum: axes and sizes -------------------------------------------------------------------
def test_output_axis_in_no_input() -> None:
    e = _einsum_error("mk,kn->mz", {**MM, "z": 2})
    assert e.token == "z"
    assert "no input" in e.message
    # Reported before the missing size of the same axis: that is the real mistake.
    assert _einsum_error("mk,kn->mz").token == "z"


def test_axis_size_missing() -> None:
    e = _einsum_error("mk,kn->mn", {"m": 4, "k": 4})
    assert e.token == "n"


@pytest.mark.parametrize("bad", [0, -3])
def test_axis_size_zero_or_negative(bad: int) -> None:
    e = _einsum_error("mk,kn->mn", {**MM, "k": bad})
    assert e.token == "k"
    assert str(bad) in e.message


def test_axis_size_beyond_documented_limit() -> None:
    assert _einsum_error("mk,kn->mn", {**MM, "m": MAX_AXIS_SIZE + 1}).token == "m"
    einsum("mk,kn->mn", {**MM, "m": MAX_AXIS_SIZE})  # the limit itself is fine


@pytest.mark.parametrize("bad", [4.0, "4", None, True, [4]])
def test_non_integer_size(bad: Any) -> None:
    assert _einsum_error("mk,kn->mn", {**MM, "m": bad}).token == "m"


def test_sizes_not_a_mapping() -> None:
    assert _einsum_error("mk,kn->mn", [4, 4, 4]).token == "sizes"


def test_size_of_an_unused_axis() -> None:
    assert _einsum_error("mk,kn->mn", {**MM, "q": 2}).token == "q"


def test_too_many_axes() -> None:
    letters = "abcdefghijklmnopqrstuvwxyz"[: MAX_AXES + 1]
    e = _einsum_error(f"{letters}->a", dict.fromkeys(letters, 1))
    assert e.token == letters[MAX_AXES]


def test_axis_twice_in_the_output() -> None:
    assert _einsum_error("mk->mm", {"m": 2, "k": 2}).token == "m"


# ---- einsum: dtypes, reduce op, weight, padding -----------------------------------------------
@pytest.mark.parametrize(("kw", "token"), [({"dtype": "i7"}, "i7"), ({"dtype": {"A": "i8", "B": "fp64"}}, "fp64")])
def test_unknown_input_dtype(kw: dict[str, Any], token: str) -> None:
    e = _einsum_error("mk,kn->mn", **kw)
    assert e.token == token
    assert "bf16" in e.hint  # lists the accepted dtypes


def test_unknown_output_dtype() -> None:
    assert _einsum_error("mk,kn->mn", out_dtype="f64").token == "f64"


def test_dtype_missing_or_for_unknown_operand() -> None:
    assert _einsum_error("mk,kn->mn", dtype={"A": "i8"}).token == "B"
    assert _einsum_error("mk,kn->mn", dtype={"A": "i8", "B": "i8", "C": "i8"}).token == "C"


def test_unknown_reduce_op() -> None:
    assert _einsum_error("mk,kn->mn", reduce_op="sum").token == "sum"


def test_reduce_op_with_nothing_to_reduce() -> None:
    e = _einsum_error("ij->ij", {"i": 2, "j": 2}, reduce_op="max")
    assert e.token == "max"


def test_reduce_op_that_padding_would_change() -> None:
    e = _einsum_error("mk,kn->mn", reduce_op="mul", pad={"A": [(1, 0), (0, 0)]})
    assert e.token == "mul"


@pytest.mark.parametrize(("weight", "token"), [("C", "C"), (2, "2"), ("7", "7"), (1.5, "weight"), ([1], "weight")])
def test_bad_weight(weight: Any, token: str) -> None:
    assert _einsum_error("mk,kn->mn", weight=weight).token == token


@pytest.mark.parametrize(
    ("pad", "token"),
    [
        (5, "pad"),
        ({"A": 5}, "A"),
        ({"A": [1, 2]}, "A"),
        ({"A": [(1, 1, 1), (0, 0)]}, "A"),
        ({"A": [("a", 1), (0, 0)]}, "A"),
        ({"A": [(1, 1)]}, "A"),
        ({"Y": [(0, 0), (0, 0)]}, "Y"),
        ({"A": [(-1, 0), (0, 0)]}, "A"),
    ],
)
def test_malformed_padding(pad: Any, token: str) -> None:
    assert _einsum_error("mk,kn->mn", pad=pad).token == token


def test_label_not_a_string() -> None:
    assert _einsum_error("mk,kn->mn", label=5).token == "label"


# ---- einsum: syntax ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("expr", "token"),
    [
        ("mk,kn,kz->mn", "mk,kn,kz"),  # too many inputs
        ("mk,kn->mn->x", "mk,kn->mn->x"),  # two arrows
        ("mk,kn", "mk,kn"),  # no arrow
        ("m1,kn->mn", "1"),  # digit in compact form
        ("mé,kn->mn", "é"),  # non-ASCII axis
        ("mk,->mn", "mk,"),  # empty operand
        ("X[m,k]],W[k,n]->Y[m,n]", "]"),  # unbalanced bracket
        ("X[$(m,k],W[k,n]->Y[m,n]", "X[$(m,k],W[k,n]"),  # unclosed parenthesis
        ("X[m,,k],W[k,n]->Y[m,n]", "X[m,,k]"),  # empty index expression
        ("X[m:,k],W[k,n]->Y[m,n]", "m:"),  # malformed term
        ("X[m:2:3,k],W[k,n]->Y[m,n]", "m:2:3"),  # malformed term
        ("X[m*2,k],W[k,n]->Y[m,n]", "m*2"),  # malformed term
        ("X[m,k]W[k,n]->Y[m,n]", "X[m,k]W[k,n]"),  # missing comma between operands
        ("X[m,k],W[k,n]->m,n", "m,n"),  # output not bracketed
        ("X[m,k],W[k,n]->Y[m],Z[n]", "Y[m],Z[n]"),  # two outputs
        ("X[m,k],X[k,n]->Y[m,n]", "X"),  # duplicate operand name
        ("X[],W[k,n]->Y[n]", "X"),  # input without dimensions
        ("X[m,k],W[k,n]->Y[m:2,n]", "m:2"),  # output indexed by an expression
        ("X[$(),k],W[k,n]->Y[n]", "$()"),  # empty $( )
    ],
)
def test_malformed_syntax(expr: str, token: str) -> None:
    e = _einsum_error(expr, {"m": 4, "k": 4, "n": 4})
    assert e.token == token


@pytest.mark.parametrize("expr", ["", "   ", None, 42])
def test_empty_or_non_string_einsum(expr: Any) -> None:
    _einsum_error(expr)


@pytest.mark.parametrize(("coeff", "ok"), [(0, False), (1, True), (MAX_COEFF, True), (MAX_COEFF + 1, False)])
def test_coefficient_range(coeff: int, ok: bool) -> None:
    expr = f"X[m:{coeff} + k], W[k] -> Y[m]"
    if ok:
        einsum(expr, {"m": 2, "k": 2})
    else:
        assert _einsum_error(expr, {"m": 2, "k": 2}).token == f"m:{coeff}"


def test_window_larger_than_padded_input() -> None:
    e = _einsum_error("X[m + k], W[k] -> Y[m]", {"m": 2, "k": 3}, pad={"X": [(2, 3)]})
    assert e.token == "m + k"


# ---- Problem built directly -------------------------------------------------------------------
def test_direct_problem_validation_raises_problem_error() -> None:
    with pytest.raises(ProblemError) as info:
        Problem(
            axes={"m": 2},
            inputs=(Operand(name="A", dims=(IndexExpr.of("m"),), dtype="bf16"),),
            output=Operand(name="Y", dims=(IndexExpr.of("m"),), dtype="f32"),
            weight=3,
        )
    assert info.value.token == "3"
    assert info.value.hint


# ---- conv2d -----------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["stride", "dilation", "kernel"])
def test_conv_zero_stride_dilation_kernel(field: str) -> None:
    assert _conv_error(**{field: 0}).token == field
    assert _conv_error(**{field: (1, 0)}).token == field


@pytest.mark.parametrize(("field", "value"), [("stride", MAX_COEFF + 1), ("dilation", MAX_COEFF + 1)])
def test_conv_stride_dilation_beyond_limit(field: str, value: int) -> None:
    assert _conv_error(**{field: value}).token == field


def test_conv_kernel_larger_than_padded_input() -> None:
    e = _conv_error(kernel=9)
    assert e.token == "kernel"
    conv2d(**{**CONV, "kernel": 9, "padding": 1})  # padding makes it fit
    assert _conv_error(kernel=3, dilation=4).token == "kernel"  # dilated span 9 > 8


def test_conv_groups_must_divide_channels() -> None:
    assert _conv_error(groups=3).token == "groups"
    assert _conv_error(groups=4, out_channels=6).token == "groups"


@pytest.mark.parametrize("field", ["batch", "in_channels", "out_channels", "input_height", "input_width", "groups"])
@pytest.mark.parametrize("value", [0, -1, 2.0, "8", True, MAX_AXIS_SIZE + 1])
def test_conv_bad_integer_parameter(field: str, value: Any) -> None:
    assert _conv_error(**{field: value}).token == field


def test_conv_negative_or_huge_padding() -> None:
    assert _conv_error(padding=-1).token == "padding"
    assert _conv_error(padding=1 << 30).token == "padding"


@pytest.mark.parametrize("value", [(1, 2, 3), (3,), "3", 2.0, True, [1, "a"]])
def test_conv_malformed_pair(value: Any) -> None:
    assert _conv_error(stride=value).token == "stride"


@pytest.mark.parametrize("field", ["dtype", "weights_dtype", "out_dtype"])
def test_conv_unknown_dtype_names_the_field(field: str) -> None:
    e = _conv_error(**{field: "fp64"})
    assert e.token == field
    assert "fp64" in e.message


def test_conv_label_not_a_string() -> None:
    assert _conv_error(label=7).token == "label"


def test_error_renders_token_and_hint() -> None:
    e = _einsum_error("mk,kn->mz", {**MM, "z": 2})
    assert "'z'" in str(e) and e.hint in str(e)
    assert e.to_dict() == {"message": e.message, "token": "z", "hint": e.hint}
