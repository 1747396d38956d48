"""The numpy reference evaluation against independent formulations (loops, a sliding-window conv, torch)."""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workload import dtypes, reference
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.reference import cast_output, evaluate, padded_input, random_inputs

RNG_SEED = 1234


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


# ---- independent formulations ------------------------------------------------------------


def _conv_case(seed: int, dtype: str = "f32", **params: object) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    p = conv2d(dtype=dtype, **params)  # type: ignore[arg-type]
    x, w = random_inputs(p, np.random.default_rng(seed))
    return x, w, evaluate(p, [x, w]), params


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


# ---- einsums against direct loops ------------------------------------------------------


def test_matmul_matches_loops() -> None:
    p = einsum("mk,kn->mn", {"m": 3, "k": 5, "n": 4}, dtype="bf16", weight=1)
    a, b = random_inputs(p, np.random.default_rng(RNG_SEED))
    got = evaluate(p, [a, b])
    assert got.dtype == np.float64 and got.shape == (3, 4)
    for i, j in itertools.product(range(3), range(4)):
        assert got[i, j] == sum(float(a[i, k]) * float(b[k, j]) for k in range(5))


def test_batched_matmul_matches_loops() -> None:
    p = einsum("vmk,vnk->vmn", {"v": 2, "m": 3, "n": 4, "k": 6}, dtype="f16")
    a, b = random_inputs(p, np.random.default_rng(RNG_SEED))
    got = evaluate(p, [a, b])
    for v, m, n in itertools.product(range(2), range(3), range(4)):
        want = sum(float(a[v, m, k]) * float(b[v, n, k]) for k in range(6))
        assert got[v, m, n] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_attention_scores_match_loops() -> None:
    sizes = {"b": 2, "h": 3, "q": 4, "k": 5, "d": 8}
    p = einsum("bhqd,bhkd->bhqk", sizes, dtype="bf16")
    a, b = random_inputs(p, np.random.default_rng(RNG_SEED))
    got = evaluate(p, [a, b])
    assert got.shape == (2, 3, 4, 5)
    for bb, h, q, k in itertools.product(range(2), range(3), range(4), range(5)):
        want = sum(float(a[bb, h, q, d]) * float(b[bb, h, k, d]) for d in range(8))
        assert got[bb, h, q, k] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_output_order_differs_from_input_order() -> None:
    p = einsum("mk,kn->nm", {"m": 3, "k": 4, "n": 2}, dtype="f32")
    a, b = random_inputs(p, np.random.default_rng(RNG_SEED))
    got = evaluate(p, [a, b])
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got, (_f64(a) @ _f64(b)).T, rtol=1e-12)


@pytest.mark.parametrize(
    ("op", "fold"),
    [("add", operator.add), ("mul", operator.mul), ("max", max), ("min", min)],
)
def test_unary_reductions_match_loops(op: str, fold: Callable[[float, float], float]) -> None:
    p = einsum("ij->i", {"i": 4, "j": 7}, dtype="bf16", reduce_op=op)
    (a,) = random_inputs(p, np.random.default_rng(RNG_SEED))
    got = evaluate(p, [a])
    for i in range(4):
        want = functools.reduce(fold, [float(a[i, j]) for j in range(7)])
        assert got[i] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("op", ["mul", "max", "min"])
def test_binary_non_add_reductions_match_loops(op: str) -> None:
    folds: dict[str, Callable[[float, float], float]] = {"mul": operator.mul, "max": max, "min": min}
    fold = folds[op]
    p = einsum("mk,nk->mn", {"m": 3, "n": 2, "k": 5}, dtype="f32", reduce_op=op)
    a, b = random_inputs(p, np.random.default_rng(RNG_SEED))
    got = evaluate(p, [a, b])
    for m, n in itertools.product(range(3), range(2)):
        want = functools.reduce(fold, [float(a[m, k]) * float(b[n, k]) for k in range(5)])
        assert got[m, n] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("op", ["add", "mul", "max", "min"])
def test_chunked_reduction_equals_single_block(op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    p = einsum("bmk,kn->bmn", {"b": 3, "m": 5, "k": 7, "n": 4}, dtype="f32", reduce_op=op)
    ins = random_inputs(p, np.random.default_rng(RNG_SEED))
    whole = evaluate(p, ins)
    monkeypatch.setattr(reference, "CHUNK_ELEMENTS", 3)  # blocks of a few points: many partial blocks
    np.testing.assert_allclose(evaluate(p, ins), whole, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["i4", "i8"])
def test_integer_problems_are_exact(dtype: str) -> None:
    p = einsum("mk,kn->mn", {"m": 4, "k": 64, "n": 3}, dtype=dtype)
    a, b = random_inputs(p, np.random.default_rng(RNG_SEED))
    assert a.dtype == (ml_dtypes.int4 if dtype == "i4" else np.int8)
    got = evaluate(p, [a, b])
    assert got.dtype == np.int64
    for m, n in itertools.product(range(4), range(3)):
        assert int(got[m, n]) == sum(int(a[m, k]) * int(b[k, n]) for k in range(64))
    out = cast_output(p, got)
    assert out.dtype == np.int32 and np.array_equal(out.astype(np.int64), got)


def test_i32_output_wraps_like_the_accumulator() -> None:
    p = einsum("k,k->", {"k": 3}, dtype="i32")
    a = np.array([1 << 15] * 3, dtype=np.int32)
    b = np.array([1 << 15] * 3, dtype=np.int32)
    exact = 3 * (1 << 30)
    got = evaluate(p, [a, b])
    assert int(got) == exact
    wrapped = (exact + (1 << 31)) % (1 << 32) - (1 << 31)
    assert int(cast_output(p, got)) == wrapped


def test_wide_integer_sums_stay_exact() -> None:
    # (2**31 - 1)**2 + 1 needs 62 bits: float64 accumulation would round it.
    p = einsum("k,k->", {"k": 3}, dtype="i32")
    big = (1 << 31) - 1
    a = np.array([big, 1, -big], dtype=np.int32)
    b = np.array([big, 1, 7], dtype=np.int32)
    exact = big * big + 1 - 7 * big
    assert int(evaluate(p, [a, b])) == exact


def test_integer_mul_reduction_modulo_2_32_is_exact() -> None:
    p = einsum("ij->i", {"i": 2, "j": 40}, dtype="i32", reduce_op="mul")
    a = np.full((2, 40), 3, dtype=np.int32)
    a[1] = -3
    got = cast_output(p, evaluate(p, [a]))
    for i, base in enumerate((3, -3)):
        exact = base**40
        assert int(got[i]) == (exact + (1 << 31)) % (1 << 32) - (1 << 31)


# ---- inputs, padding and casting ----------------------------------------------------------


@pytest.mark.parametrize("dtype", ["i4", "i8", "i32", "f8e4m3", "f8e5m2", "bf16", "f16", "f32"])
def test_random_inputs_are_representable_and_bounded(dtype: str) -> None:
    p = einsum("mk,kn->mn", {"m": 16, "k": 32, "n": 8}, dtype=dtype)
    a, b = random_inputs(p, np.random.default_rng(RNG_SEED))
    info = dtypes.info(dtype)
    for arr, shape in ((a, (16, 32)), (b, (32, 8))):
        assert arr.dtype == info.numpy and arr.shape == shape
        vals = _f64(arr)
        assert np.all(np.isfinite(vals))
        if info.is_int and info.bits <= 8:
            assert vals.min() >= -(2 ** (info.bits - 1)) and vals.max() <= 2 ** (info.bits - 1) - 1
            assert vals.min() <= -(2 ** (info.bits - 3)) and vals.max() >= 2 ** (info.bits - 3)  # spans the range
        elif info.is_int:
            assert np.abs(vals).max() <= 1024
        else:
            assert np.abs(vals).max() <= 2.0
            assert len(np.unique(vals)) > 8  # not degenerate


def test_random_inputs_for_mul_stay_near_one() -> None:
    p = einsum("ij->i", {"i": 8, "j": 64}, dtype="bf16", reduce_op="mul")
    (a,) = random_inputs(p, np.random.default_rng(RNG_SEED))
    vals = _f64(a)
    assert vals.min() >= 0.5 and vals.max() <= 1.5
    assert np.all(np.isfinite(evaluate(p, [a]))) and np.all(evaluate(p, [a]) != 0)


def test_padded_input_pads_and_crops() -> None:
    # stride 2 over 6 rows with a 1-wide kernel and padding 1: reads padded rows 0, 2, 4, 6.
    p = conv2d(batch=1, in_channels=1, out_channels=1, input_height=6, input_width=3, kernel=1, stride=2, padding=1)
    x = np.arange(18, dtype=np.float32).reshape(1, 6, 3, 1, 1) + 1
    xp = padded_input(p, 0, x)
    assert xp.shape == p.padded_shape(p.inputs[0])
    assert xp[0, 0].sum() == 0 and xp[0, :, 0].sum() == 0  # low zero padding
    np.testing.assert_array_equal(xp[0, 1:, 1:4], x[0, : xp.shape[1] - 1])
    with pytest.raises(ProblemError, match="expects"):
        padded_input(p, 0, x[:, :5])


@pytest.mark.parametrize(
    ("out_dtype", "npdt"),
    [("bf16", ml_dtypes.bfloat16), ("f16", np.float16), ("f8e4m3", ml_dtypes.float8_e4m3fn), ("f8e5m2", None)],
)
def test_cast_output_rounds_correctly_from_float64(out_dtype: str, npdt: object) -> None:
    npdt = npdt or ml_dtypes.float8_e5m2
    p = einsum("k,k->", {"k": 2}, dtype="bf16", out_dtype=out_dtype)
    nmant = ml_dtypes.finfo(npdt).nmant
    tie = 1 + 2.0 ** -(nmant + 1)  # halfway between 1 and the next value: rounds to even (1.0)
    above = tie + 2.0**-40  # just above the tie: must round up (float64 -> float32 -> dtype would not)
    assert float(cast_output(p, np.array(tie))) == 1.0
    assert float(cast_output(p, np.array(above))) == 1 + 2.0**-nmant
    assert float(cast_output(p, np.array(-above))) == -(1 + 2.0**-nmant)
    vals = np.random.default_rng(RNG_SEED).uniform(-100, 100, size=2000)
    got = cast_output(p, vals)
    assert got.dtype == npdt
    # within half a unit in the last place of the value's binade (above the subnormal range)
    binade = np.maximum(np.floor(np.log2(np.abs(vals))), ml_dtypes.finfo(npdt).minexp)
    assert np.all(np.abs(_f64(got) - vals) <= 2.0 ** (binade - nmant) / 2)


def test_cast_output_integer_outputs() -> None:
    p = einsum("k,k->k", {"k": 4}, dtype="i8", out_dtype="i8")
    got = cast_output(p, np.array([300, -300, 5, -7], dtype=np.int64))
    assert got.dtype == np.int8 and got.tolist() == [127, -128, 5, -7]
    q = einsum("k,k->k", {"k": 2}, dtype="f32", out_dtype="i32")
    assert cast_output(q, np.array([2.5, -3.6])).tolist() == [2, -4]


def test_wrong_number_of_inputs() -> None:
    p = einsum("mk,kn->mn", {"m": 2, "k": 2, "n": 2})
    with pytest.raises(ProblemError):
        evaluate(p, [np.zeros((2, 2))])


# ---- affine indices: structured einsums and convs ------------------------------------------


def test_dilated_strided_1d_window_with_padding_matches_loops() -> None:
    # y[h] = sum_f x_padded[2h + 3f] * w[f], padding (2, 1) on a 10-long input
    sizes = {"h": 5, "f": 3}
    p = einsum("X[h:2 + f:3], W[f] -> Y[h]", sizes, dtype="f32", pad={"X": [(2, 1)]})
    x, w = random_inputs(p, np.random.default_rng(RNG_SEED))
    assert x.shape == (2 * 4 + 3 * 2 + 1 - 3,)
    xp = np.concatenate([np.zeros(2), _f64(x), np.zeros(1)])
    got = evaluate(p, [x, w])
    for h in range(5):
        assert got[h] == pytest.approx(sum(xp[2 * h + 3 * f] * float(w[f]) for f in range(3)), rel=1e-12)


def test_max_pool_window_matches_loops() -> None:
    sizes = {"oh": 3, "ow": 3, "fh": 2, "fw": 2, "c": 2}
    p = einsum("X[oh:2 + fh, ow:2 + fw, c] -> Y[oh, ow, c]", sizes, dtype="bf16", reduce_op="max")
    (x,) = random_inputs(p, np.random.default_rng(RNG_SEED))
    got = evaluate(p, [x])
    for i, j, c in itertools.product(range(3), range(3), range(2)):
        assert got[i, j, c] == max(float(x[2 * i + a, 2 * j + b, c]) for a in range(2) for b in range(2))


CONV_CASES: list[dict[str, Any]] = [
    {"in_channels": 3, "out_channels": 4, "input_height": 7, "input_width": 6, "kernel": 3},
    {"in_channels": 4, "out_channels": 6, "input_height": 9, "input_width": 8, "kernel": 3, "stride": 2, "padding": 1},
    {"in_channels": 2, "out_channels": 2, "input_height": 9, "input_width": 9, "kernel": 3, "dilation": 2},
    {"in_channels": 6, "out_channels": 4, "input_height": 8, "input_width": 7, "kernel": (3, 2), "groups": 2},
    {"in_channels": 5, "out_channels": 5, "input_height": 6, "input_width": 6, "kernel": 3, "padding": 1, "groups": 5},
    {
        "in_channels": 3,
        "out_channels": 8,
        "input_height": 11,
        "input_width": 10,
        "kernel": 7,
        "stride": 2,
        "padding": 3,
    },
    {"in_channels": 4, "out_channels": 4, "input_height": 6, "input_width": 5, "kernel": 1, "stride": 2},
    {
        "in_channels": 4,
        "out_channels": 8,
        "input_height": 10,
        "input_width": 9,
        "kernel": (2, 3),
        "stride": (2, 1),
        "padding": (1, 2),
        "dilation": (2, 1),
        "groups": 2,
    },
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_loop_conv(case: dict[str, Any], conv2d_by_loops: Callable[..., np.ndarray]) -> None:
    x, w, got, params = _conv_case(7, batch=2, **case)
    want = conv2d_by_loops(
        _f64(x),
        _f64(w),
        _pair(params.get("stride", 1)),
        _pair(params.get("padding", 0)),
        _pair(params.get("dilation", 1)),
    )
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_int8_conv2d_is_exact(conv2d_by_loops: Callable[..., np.ndarray]) -> None:
    case = CONV_CASES[1]
    x, w, got, _ = _conv_case(3, dtype="i8", batch=1, **case)
    want = conv2d_by_loops(x.astype(np.int64), w.astype(np.int64), (2, 2), (1, 1), (1, 1))
    assert got.dtype == np.int64 and np.array_equal(got, want)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_torch(case: dict[str, Any]) -> None:
    torch = pytest.importorskip("torch")
    x, w, got, params = _conv_case(11, batch=2, **case)
    n, h, wd, g, ci = x.shape
    kh, kw, _, _, co = w.shape
    xt = torch.from_numpy(_f64(x).reshape(n, h, wd, g * ci)).permute(0, 3, 1, 2)  # NCHW, C = (g, ci)
    wt = torch.from_numpy(_f64(w)).permute(2, 4, 3, 0, 1).reshape(g * co, ci, kh, kw)  # (g, co) x ci x kh x kw
    yt = torch.nn.functional.conv2d(
        xt,
        wt,
        stride=_pair(params.get("stride", 1)),
        padding=_pair(params.get("padding", 0)),
        dilation=_pair(params.get("dilation", 1)),
        groups=g,
    )
    want = yt.permute(0, 2, 3, 1).reshape(got.shape).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 2),
    g=st.integers(1, 3),
    ci=st.integers(1, 3),
    co=st.integers(1, 3),
    h=st.integers(1, 9),
    w=st.integers(1, 9),
    kh=st.integers(1, 4),
    kw=st.integers(1, 4),
    sh=st.integers(1, 3),
    sw=st.integers(1, 3),
    ph=st.integers(0, 2),
    pw=st.integers(0, 2),
    dh=st.integers(1, 3),
    dw=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_random_conv_params_agree_with_loop_conv(
    n: int, g: int, ci: int, co: int, h: int, w: int, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int,
    dh: int, dw: int, seed: int, conv2d_by_loops: Callable[..., np.ndarray],
) -> None:  # fmt: skip
    try:
        p = conv2d(
            batch=n,
            in_channels=g * ci,
            out_channels=g * co,
            input_height=h,
            input_width=w,
            kernel=(kh, kw),
            stride=(sh, sw),
            padding=(ph, pw),
            dilation=(dh, dw),
            groups=g,
            dtype="i8",
        )
    except ProblemError:
        # only a kernel span larger than the padded input is rejected
        assert dh * (kh - 1) + 1 > h + 2 * ph or dw * (kw - 1) + 1 > w + 2 * pw
        return
    x, wt = random_inputs(p, np.random.default_rng(seed))
    got = evaluate(p, [x, wt])
    want = conv2d_by_loops(x.astype(np.int64), wt.astype(np.int64), (sh, sw), (ph, pw), (dh, dw))
    assert np.array_equal(got, want)
