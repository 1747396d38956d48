"""The folded stem transformation (workload.conv_fold): exact, tt-metal's layout, and wrong folds show.

Exactness is checked two ways: with integer-valued float32 data every sum is exact in any order, so
the folded conv equals the original bit for bit; with general float32 and bf16 data the two differ
only by the order of the float64 sums, so they agree to the last bit of the output format or within
one unit of it.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workload.conv2d import conv2d
from workload.conv_fold import ConvFold, fold_input, fold_inputs, fold_of, fold_weight, folded_problem
from workload.errors import ProblemError
from workload.problem import Problem
from workload.reference import cast_output, evaluate


def naive_conv(x: np.ndarray, w: np.ndarray, stride: tuple[int, int], padding: tuple[int, int]) -> np.ndarray:
    """An independent direct conv: x [n, h, w, 1, c], w [kh, kw, 1, c, co] -> [n, oh, ow, 1, co] (float64)."""
    (sh, sw), (ph, pw) = stride, padding
    kh, kw = w.shape[:2]
    xp = np.pad(x[:, :, :, 0].astype(np.float64), ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    oh, ow = (xp.shape[1] - kh) // sh + 1, (xp.shape[2] - kw) // sw + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[-1]))
    for i in range(kh):
        for j in range(kw):
            win = xp[:, i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw]
            out += win @ w[i, j, 0].astype(np.float64)
    return out[:, :, :, None, :]


def _ints(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-8, 9, size=shape).astype(np.float32)


def _inputs(p: Problem, rng: np.random.Generator, kind: str) -> list[np.ndarray]:
    shapes = [p.shape(op) for op in p.inputs]
    if kind == "ints":
        return [_ints(rng, s) for s in shapes]
    vals = [rng.uniform(-2, 2, size=s).astype(np.float32) for s in shapes]
    if kind == "bf16":
        vals = [v.astype(ml_dtypes.bfloat16).astype(np.float32) for v in vals]
    return vals


def _fits(a: dict[str, Any]) -> bool:
    """The kernel fits in the padded input."""
    return bool(
        a["input_height"] + 2 * a["padding"][0] >= a["kernel"][0]
        and a["input_width"] + 2 * a["padding"][1] >= a["kernel"][1]
    )


conv_args: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {
        "batch": st.integers(1, 2),
        "in_channels": st.integers(1, 6),
        "out_channels": st.integers(1, 4),
        "input_height": st.integers(1, 13),
        "input_width": st.integers(1, 13),
        "kernel": st.tuples(st.integers(1, 6), st.integers(1, 6)),
        "stride": st.tuples(st.integers(1, 3), st.integers(1, 3)).filter(lambda s: s != (1, 1)),
        "padding": st.tuples(st.integers(0, 3), st.integers(0, 3)),
    }
).filter(_fits)


@settings(max_examples=120, deadline=None)
@given(args=conv_args, seed=st.integers(0, 2**16))
def test_folded_conv_equals_the_original_bit_for_bit_on_exact_data(args: dict, seed: int) -> None:
    p = conv2d(dtype="f32", **args)
    fold = fold_of(p)
    q = folded_problem(p, fold)
    assert q.axes["fh"] == -(-args["kernel"][0] // args["stride"][0]) and q.axes["oh"] == p.axes["oh"]
    x, w = _inputs(p, np.random.default_rng(seed), "ints")
    want = evaluate(p, [x, w])
    got = evaluate(q, fold_inputs(fold, [x, w]))
    assert got.shape == want.shape
    assert np.array_equal(cast_output(q, got), cast_output(p, want))  # f32 outputs, bit for bit
    assert np.array_equal(want, naive_conv(x, w, args["stride"], args["padding"]))


@settings(max_examples=60, deadline=None)
@given(args=conv_args, seed=st.integers(0, 2**16), kind=st.sampled_from(["f32", "bf16"]))
def test_folded_conv_agrees_within_the_output_format_on_random_data(args: dict, seed: int, kind: str) -> None:
    p = conv2d(dtype="bf16" if kind == "bf16" else "f32", out_dtype=kind, **args)
    fold = fold_of(p)
    q = folded_problem(p, fold)
    x, w = _inputs(p, np.random.default_rng(seed), kind)
    want = cast_output(p, evaluate(p, [x, w])).astype(np.float64)
    got = cast_output(q, evaluate(q, fold_inputs(fold, [x, w]))).astype(np.float64)
    # the sums differ only in float64 order: at most one unit of the output format apart
    ulp = 2.0**-23 if kind == "f32" else 2.0**-7
    scale = np.maximum(np.abs(want), np.abs(got))
    assert np.all(np.abs(got - want) <= ulp * scale + 1e-30)


def test_resnet50_stem_folds_as_tt_metal_runs_it() -> None:
    """224x224x3, 7x7/s2/p3 -> 115x115x16, 4x4/s1/p0 (ttnn_functional_resnet50.py: input 115x115, kernel 4x4)."""
    p = conv2d(
        batch=2, in_channels=3, out_channels=64, input_height=224, input_width=224, kernel=7, stride=2, padding=3
    )
    fold = fold_of(p)
    assert (fold.padded_channels, fold.folded_channels) == (4, 16)  # channels 3 -> 4 -> 16
    assert fold.folded_kernel == (4, 4) and fold.folded_hw == (115, 115)
    q = folded_problem(p, fold)
    assert q.axes == {"n": 2, "oh": 112, "ow": 112, "fh": 4, "fw": 4, "g": 1, "ci": 16, "co": 64}
    assert q.inputs[0].pad is None  # stride 1, unpadded: the padding moved into the folded input
    x, w = _inputs(p, np.random.default_rng(0), "ints")
    assert np.array_equal(evaluate(q, fold_inputs(fold, [x, w])), evaluate(p, [x, w]))


def test_channel_order_is_tt_metals_patch_major_order() -> None:
    """Pixel (dh, dw) of a patch lands at channels [(dh*s + dw)*C, ... + C) (start_c = i * C in tt-metal)."""
    p = conv2d(batch=1, in_channels=3, out_channels=1, input_height=4, input_width=4, kernel=2, stride=2)
    fold = fold_of(p)
    x = np.arange(4 * 4 * 3, dtype=np.float32).reshape(1, 4, 4, 1, 3)
    xf = fold_input(fold, x)
    for dh in range(2):
        for dw in range(2):
            i = dh * 2 + dw
            assert np.array_equal(xf[0, 1, 0, 0, i * 4 : i * 4 + 3], x[0, 2 + dh, dw, 0])
            assert np.all(xf[0, 1, 0, 0, i * 4 + 3] == 0)  # the 4th (alignment) channel is zero
    w = np.arange(2 * 2 * 3, dtype=np.float32).reshape(2, 2, 1, 3, 1)
    wf = fold_weight(fold, w)
    assert wf.shape == (1, 1, 1, 16, 1) and np.array_equal(wf[0, 0, 0, 4:7, 0], w[0, 1, 0, :, 0])


def _channel_major(fold: ConvFold, x: np.ndarray) -> np.ndarray:
    """A wrong fold: channels c-major ((c*s*s + i)) instead of patch-major."""
    right = fold_input(fold, x)
    n, h, w, _, cf = right.shape
    s2 = fold.stride[0] * fold.stride[1]
    return right.reshape(n, h, w, 1, s2, cf // s2).swapaxes(-1, -2).reshape(right.shape)


@pytest.mark.parametrize("wrong", ["channel order", "no conv padding", "kernel at the wrong end"])
def test_a_wrong_fold_is_caught(wrong: str) -> None:
    p = conv2d(batch=1, in_channels=3, out_channels=4, input_height=12, input_width=12, kernel=3, stride=2, padding=1)
    fold = fold_of(p)
    q = folded_problem(p, fold)
    x, w = _inputs(p, np.random.default_rng(3), "ints")
    xf, wf = fold_inputs(fold, [x, w])
    if wrong == "channel order":
        xf = _channel_major(fold, x)
    elif wrong == "no conv padding":
        unpadded = ConvFold(fold.params.model_copy(update={"padding": (0, 0)}))
        xf = np.zeros_like(xf)
        part = fold_input(unpadded, x)
        xf[:, : part.shape[1], : part.shape[2]] = part[:, : xf.shape[1], : xf.shape[2]]
    else:
        big = np.zeros((4, 4, 1, 3, 4), dtype=np.float32)
        big[1:, 1:] = w  # padded at the start instead of the end
        wf = fold_weight(ConvFold(fold.params.model_copy(update={"kernel": (4, 4)})), big)
    assert not np.array_equal(evaluate(q, [xf, wf]), evaluate(p, [x, w]))


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"stride": 1}, "stride 1"),
        ({"stride": 2, "dilation": 2}, "dilation"),
        ({"stride": 2, "groups": 2}, "groups=2"),
    ],
)
def test_the_fold_refuses_convs_it_does_not_apply_to(kw: dict, why: str) -> None:
    p = conv2d(batch=1, in_channels=4, out_channels=4, input_height=9, input_width=9, kernel=3, **kw)
    with pytest.raises(ProblemError, match=why):
        fold_of(p)


def test_the_fold_refuses_a_non_conv_problem() -> None:
    from workload.einsum import einsum

    with pytest.raises(ProblemError, match="conv2d problems only"):
        fold_of(einsum("mk,kn->mn", {"m": 4, "k": 4, "n": 4}))
