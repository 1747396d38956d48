"""conv2d front-end: output sizes against the standard formula, layout, round trip through as_conv2d."""

from __future__ import annotations

import pytest

from workload.conv2d import CONV_AXES, as_conv2d, conv2d
from workload.einsum import einsum


def _standard_out(size: int, pad: int, dil: int, k: int, stride: int) -> int:
    """floor((in + 2p - d(k-1) - 1) / s) + 1, as in PyTorch's Conv2d documentation (written independently)."""
    span = dil * (k - 1) + 1
    return (size + 2 * pad - span) // stride + 1


# (in_h, in_w, kernel, stride, padding, dilation, groups, cin, cout)
#: (input h, input w, kernel, stride, padding, dilation, groups, in channels, out channels)
Case = tuple[int, int, tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int], int, int, int]
CASES: list[Case] = [
    (8, 8, (3, 3), (1, 1), (0, 0), (1, 1), 1, 4, 8),
    (224, 224, (7, 7), (2, 2), (3, 3), (1, 1), 1, 3, 64),  # ResNet-50 conv1
    (56, 56, (1, 1), (1, 1), (0, 0), (1, 1), 1, 64, 256),  # 1x1 bottleneck
    (56, 56, (3, 3), (2, 2), (1, 1), (1, 1), 1, 128, 128),  # strided 3x3
    (9, 7, (3, 2), (2, 3), (1, 0), (1, 1), 1, 2, 2),  # odd sizes, asymmetric
    (16, 16, (3, 3), (1, 1), (2, 2), (2, 2), 1, 4, 4),  # dilated
    (15, 15, (3, 3), (2, 2), (0, 0), (2, 2), 1, 4, 4),  # stride and dilation
    (112, 112, (3, 3), (2, 2), (1, 1), (1, 1), 32, 32, 32),  # depthwise
    (14, 14, (3, 3), (1, 1), (1, 1), (1, 1), 4, 16, 32),  # grouped
    (8, 8, (3, 3), (9, 9), (0, 0), (1, 1), 1, 1, 1),  # stride past the input
    (5, 5, (5, 5), (1, 1), (0, 0), (1, 1), 1, 2, 2),  # kernel = input
    (4, 4, (3, 3), (1, 1), (3, 3), (1, 1), 1, 1, 1),  # padding beyond the kernel
]


def _params(case: Case, batch: int) -> dict[str, object]:
    """conv2d keyword arguments of one case."""
    ih, iw, k, s, p, d, g, ci, co = case
    return dict(
        batch=batch,
        in_channels=ci,
        out_channels=co,
        input_height=ih,
        input_width=iw,
        kernel=k,
        stride=s,
        padding=p,
        dilation=d,
        groups=g,
    )


@pytest.mark.parametrize("case", CASES)
def test_output_size_matches_standard_formula(case: Case) -> None:
    ih, iw, k, s, p, d, g, ci, co = case
    prob = conv2d(**_params(case, batch=2))  # type: ignore[arg-type]
    assert prob.axes["oh"] == _standard_out(ih, p[0], d[0], k[0], s[0])
    assert prob.axes["ow"] == _standard_out(iw, p[1], d[1], k[1], s[1])
    assert prob.axes["g"] == g
    assert prob.axes["ci"] * g == ci
    assert prob.axes["co"] * g == co
    x, w = prob.inputs
    # The real activation tensor keeps exactly the input's shape, whatever the stride leaves unread.
    assert prob.shape(x) == (2, ih, iw, g, ci // g)
    assert prob.shape(w) == (k[0], k[1], g, ci // g, co // g)
    assert prob.shape(prob.output) == (2, prob.axes["oh"], prob.axes["ow"], g, co // g)
    # MACs: N * Ho * Wo * Cout * Kh * Kw * Cin / groups.
    assert prob.macs == 2 * prob.axes["oh"] * prob.axes["ow"] * co * k[0] * k[1] * ci // g


@pytest.mark.parametrize("case", CASES)
def test_as_conv2d_round_trips_the_parameters(case: Case) -> None:
    params = _params(case, batch=3)
    back = as_conv2d(conv2d(**params))  # type: ignore[arg-type]
    assert back is not None
    assert back.model_dump() == params


def test_layout_and_weight() -> None:
    p = conv2d(batch=1, in_channels=4, out_channels=8, input_height=8, input_width=8, kernel=3, stride=2, padding=1)
    assert tuple(p.axes) == CONV_AXES
    assert p.weight == 1
    assert [o.name for o in p.operands] == ["X", "W", "Y"]
    assert str(p.inputs[0].dims[1]) == "oh:2 + fh"
    assert p.reduction_axes == ("fh", "fw", "ci")
    assert p.inputs[0].pads()[1][0] == 1


def test_padding_stays_explicit_and_trailing_rows_are_kept() -> None:
    # 8 rows, kernel 3, stride 2, pad 1: 4 windows read padded rows 0..8, so the last zero row of the
    # padding is never read and only the low padding row remains explicit.
    p = conv2d(batch=1, in_channels=1, out_channels=1, input_height=8, input_width=8, kernel=3, stride=2, padding=1)
    x = p.inputs[0]
    assert x.pads()[1] == (1, 0)
    assert p.padded_shape(x)[1] == 9
    assert p.shape(x)[1] == 8
    # stride 9 over 8 rows with kernel 3: one window, rows 3..7 unread -> negative high padding.
    q = conv2d(batch=1, in_channels=1, out_channels=1, input_height=8, input_width=8, kernel=3, stride=9)
    assert q.inputs[0].pads()[1] == (0, -5)


def test_dtypes_default_and_override() -> None:
    p = conv2d(batch=1, in_channels=2, out_channels=2, input_height=4, input_width=4, kernel=1, dtype="i8")
    assert [o.dtype for o in p.operands] == ["i8", "i8", "i32"]
    q = conv2d(
        batch=1,
        in_channels=2,
        out_channels=2,
        input_height=4,
        input_width=4,
        kernel=1,
        dtype="bf16",
        weights_dtype="f8e4m3",
        out_dtype="bf16",
    )
    assert [o.dtype for o in q.operands] == ["bf16", "f8e4m3", "bf16"]
    assert q.acc_dtype == "f32"


def test_matmul_detection() -> None:
    # tenstorrent-conv2d.md, Introduction: a window of size 1 is a matrix multiplication.
    one = conv2d(batch=1, in_channels=8, out_channels=8, input_height=4, input_width=4, kernel=1)
    three = conv2d(batch=1, in_channels=8, out_channels=8, input_height=4, input_width=4, kernel=3, padding=1)
    assert as_conv2d(one).is_matmul()  # type: ignore[union-attr]
    assert not as_conv2d(three).is_matmul()  # type: ignore[union-attr]


def test_as_conv2d_rejects_other_problems() -> None:
    assert as_conv2d(einsum("mk,kn->mn", {"m": 2, "k": 2, "n": 2})) is None
    # Conv axis names, but the height padding is not one conv2d produces (2 low, 0 high).
    odd = einsum(
        "X[n, oh + fh, ow + fw, g, ci], W[fh, fw, g, ci, co] -> Y[n, oh, ow, g, co]",
        {"n": 1, "oh": 4, "ow": 4, "fh": 3, "fw": 3, "g": 1, "ci": 2, "co": 2},
        weight=1,
        pad={"X": [(0, 0), (2, 0), (1, 1), (0, 0), (0, 0)]},
    )
    assert as_conv2d(odd) is None
    # The same conv written as an einsum (axes declared in another order, terms swapped) is recognised.
    same = einsum(
        "X[n, fh + oh:2, ow + fw, g, ci], W[fh, fw, g, ci, co] -> Y[n, oh, ow, g, co]",
        {"n": 1, "oh": 4, "ow": 4, "fh": 3, "fw": 3, "g": 1, "ci": 2, "co": 2},
        weight=1,
        pad={"X": [(0, 0), (1, 1), (1, 1), (0, 0), (0, 0)]},
    )
    back = as_conv2d(same)
    assert back is not None
    assert (back.input_height, back.padding, back.kernel, back.stride) == (
        7,
        (1, 1),
        (3, 3),
        (2, 1),
    )  # 9 padded rows - 2
