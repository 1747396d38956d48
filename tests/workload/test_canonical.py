"""Canonical form and content hash: invariant under rewriting, sensitive to every semantic change."""

from __future__ import annotations

import json
from typing import Any

import pytest

from workload.canonical import axis_order, canonical_form, canonical_json, content_hash
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import IndexExpr, Operand, Problem

SIZES = {"v": 2, "m": 3, "n": 5, "k": 7}


def _h(expr: str, sizes: dict[str, int] | None = None, **kw: Any) -> str:
    return content_hash(einsum(expr, SIZES if sizes is None else sizes, **kw))


def test_hash_is_sha256_hex() -> None:
    h = _h("vmk,vnk->vmn")
    assert len(h) == 64 and int(h, 16) >= 0


def test_renaming_axes_spacing_and_notation_keep_the_hash() -> None:
    base = _h("vmk,vnk->vmn")
    assert _h("bik,bjk->bij", {"b": 2, "i": 3, "j": 5, "k": 7}) == base
    assert _h(" v m k , v n k -> v m n ") == base
    assert (
        _h(
            "X[batch, rows, red], W[batch, cols, red] -> Out[batch, rows, cols]",
            {
                "batch": 2,
                "rows": 3,
                "cols": 5,
                "red": 7,
            },
        )
        == base
    )
    # sizes declared in another order
    assert _h("vmk,vnk->vmn", {"k": 7, "n": 5, "m": 3, "v": 2}) == base


def test_label_and_operand_names_are_not_part_of_the_hash() -> None:
    a = _h("P[m, k], Q[k, n] -> R[m, n]", {"m": 2, "k": 3, "n": 4}, label="first")
    b = _h("A[m, k], B[k, n] -> Y[m, n]", {"m": 2, "k": 3, "n": 4}, label="second")
    assert a == b


def test_term_order_and_repeated_terms_inside_an_expression() -> None:
    sizes = {"oh": 4, "fh": 3, "c": 2}
    a = _h("X[oh:2 + fh, c], W[fh, c] -> Y[oh]", sizes)
    assert _h("X[fh + oh:2, c], W[fh, c] -> Y[oh]", sizes) == a
    assert _h("X[oh + oh + fh, c], W[fh, c] -> Y[oh]", sizes) == a


def test_explicit_zero_padding_equals_none() -> None:
    assert _h("mk,kn->mn", {"m": 2, "k": 2, "n": 2}, pad={"A": [(0, 0), (0, 0)]}) == _h(
        "mk,kn->mn", {"m": 2, "k": 2, "n": 2}
    )


def test_dtype_aliases_hash_the_same() -> None:
    assert _h("mk,kn->mn", {"m": 2, "k": 2, "n": 2}, dtype="bfloat16") == _h(
        "mk,kn->mn", {"m": 2, "k": 2, "n": 2}, dtype="bf16"
    )


@pytest.mark.parametrize(
    ("expr", "sizes", "kw"),
    [
        ("vmk,vnk->vmn", {**SIZES, "k": 8}, {}),  # size
        ("vmk,vnk->vmn", {**SIZES, "m": 5, "n": 3}, {}),  # sizes swapped between axes
        ("vmk,vnk->vmn", SIZES, {"dtype": "i8"}),  # input dtype
        ("vmk,vnk->vmn", SIZES, {"dtype": {"A": "bf16", "B": "f8e4m3"}}),  # one input's dtype
        ("vmk,vnk->vmn", SIZES, {"out_dtype": "bf16"}),  # output dtype
        ("vmk,vnk->vmn", SIZES, {"reduce_op": "max"}),  # reduce op
        ("vmk,vnk->vmn", SIZES, {"weight": 1}),  # weight operand
        ("vmk,vnk->vmn", SIZES, {"weight": 0}),
        ("vmk,vnk->vmn", SIZES, {"pad": {"A": [(0, 0), (0, 0), (1, -1)]}}),  # padding
        ("vnk,vmk->vmn", SIZES, {}),  # operand order
        ("vmk,vnk->vnm", SIZES, {}),  # output layout
        ("vkm,vnk->vmn", SIZES, {}),  # input layout
        ("vmk,vnk->vm", SIZES, {}),  # n reduced instead of kept
    ],
)
def test_semantic_changes_change_the_hash(expr: str, sizes: dict[str, int], kw: dict[str, Any]) -> None:
    assert _h(expr, sizes, **kw) != _h("vmk,vnk->vmn")


def test_coefficient_changes_change_the_hash() -> None:
    sizes = {"oh": 4, "fh": 3, "c": 2}
    base = _h("X[oh:2 + fh, c], W[fh, c] -> Y[oh]", sizes)
    assert _h("X[oh + fh, c], W[fh, c] -> Y[oh]", sizes) != base  # stride
    assert _h("X[oh:2 + fh:2, c], W[fh, c] -> Y[oh]", sizes) != base  # dilation


def test_conv_parameters_change_the_hash() -> None:
    base: dict[str, Any] = dict(batch=1, in_channels=8, out_channels=8, input_height=9, input_width=9, kernel=3)
    h = content_hash(conv2d(**base))
    for change in ({"stride": 2}, {"padding": 1}, {"dilation": 2}, {"groups": 2}, {"weights_dtype": "i8"}):
        assert content_hash(conv2d(**base, **change)) != h, change
    assert content_hash(conv2d(**base, label="x")) == h


def test_conv_equals_the_same_einsum() -> None:
    c = conv2d(batch=1, in_channels=2, out_channels=4, input_height=6, input_width=6, kernel=3, padding=1)
    e = einsum(
        "In[b, y + r, x + s, grp, ic], F[r, s, grp, ic, oc] -> Out[b, y, x, grp, oc]",
        {"b": 1, "y": 6, "x": 6, "r": 3, "s": 3, "grp": 1, "ic": 2, "oc": 4},
        weight=1,
        pad={"In": [(0, 0), (1, 1), (1, 1), (0, 0), (0, 0)]},
    )
    assert content_hash(c) == content_hash(e)


def test_axis_order_puts_output_axes_first() -> None:
    p = einsum("X[k, m], W[k, n] -> Y[n, m]", {"m": 2, "k": 3, "n": 4})
    assert axis_order(p) == {"n": 0, "m": 1, "k": 2}


def test_interchangeable_axes_give_one_form() -> None:
    # a and b appear in exactly the same places: their relative order cannot matter.
    p = einsum("X[a + b, c] -> Y[c]", {"a": 3, "b": 3, "c": 2})
    q = einsum("X[b + a, c] -> Y[c]", {"a": 3, "b": 3, "c": 2})
    assert canonical_form(p) == canonical_form(q)
    # with different sizes they are told apart by size, whatever their names
    r = einsum("X[a + b, c] -> Y[c]", {"a": 2, "b": 3, "c": 2})
    s = einsum("X[a + b, c] -> Y[c]", {"a": 3, "b": 2, "c": 2})
    assert content_hash(r) == content_hash(s)


def test_canonical_form_content() -> None:
    p = einsum("X[m:2 + k], W[k] -> Y[m]", {"m": 4, "k": 3}, dtype="i8", weight="W", pad={"X": [(1, 0)]})
    form = canonical_form(p)
    assert form["sizes"] == [4, 3]
    assert form["inputs"][0] == {"dims": [[[0, 2], [1, 1]]], "dtype": "i8", "pad": [[1, 0]]}
    assert form["inputs"][1]["dims"] == [[[1, 1]]]
    assert form["output"] == {"dims": [[[0, 1]]], "dtype": "i32", "pad": [[0, 0]]}
    assert form["weight"] == 1 and form["reduce_op"] == "add"
    assert json.loads(canonical_json(p)) == form
    assert "label" not in canonical_json(p)


def test_direct_problem_with_alias_dtype_matches_front_end() -> None:
    direct = Problem(
        axes={"i": 3, "j": 4},
        inputs=(Operand(name="T", dims=(IndexExpr.of("i"), IndexExpr.of("j")), dtype="float32"),),
        output=Operand(name="O", dims=(IndexExpr.of("i"),), dtype="fp32"),
        reduce_op="mul",
    )
    assert content_hash(direct) == _h("ij->i", {"i": 3, "j": 4}, dtype="f32", reduce_op="mul")
