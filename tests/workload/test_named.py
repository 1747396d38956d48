"""Named workloads: ResNet-50 convs, BERT-base and Llama-7B GEMMs, checked against published dimensions."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from workload import named
from workload.conv2d import Conv2dParams, as_conv2d, conv2d
from workload.errors import ProblemError
from workload.reference import evaluate, random_inputs

# Published dimensions, restated from the papers (not read from the data files).
BERT_H, BERT_HEADS, BERT_FFN, BERT_LAYERS, BERT_VOCAB, BERT_POS = 768, 12, 3072, 12, 30522, 512  # Devlin et al. §3
LLAMA_D, LLAMA_HEADS, LLAMA_FFN, LLAMA_LAYERS, LLAMA_VOCAB = 4096, 32, 11008, 32, 32000  # Touvron et al. Table 2


def _convs(**params: object) -> dict[str, Conv2dParams]:
    out = {}
    for p in named.load("resnet50", **params):
        c = as_conv2d(p)
        assert c is not None, p.label
        out[p.label.removeprefix("resnet50/")] = c
    return out


def test_names_and_describe() -> None:
    assert {"resnet50", "bert-base", "llama7b-prefill", "llama7b-decode"} <= set(named.names())
    text = named.describe("bert-base")
    assert "seq_len" in text and "batch" in text and "dtype" in text and "8 problems" in text


# ---- ResNet-50 ---------------------------------------------------------------------------


def test_resnet50_has_every_conv_layer() -> None:
    convs = _convs()
    assert len(convs) == 53
    # stem + (3 + 4 + 6 + 3) bottlenecks of three convs + a projection shortcut per stage
    assert sum(1 for k in convs if k.endswith("downsample")) == 4
    blocks = {k.rsplit(".", 1)[0] for k in convs if k.startswith("layer")}
    assert [sum(1 for b in blocks if b.startswith(f"layer{i}.")) for i in (1, 2, 3, 4)] == [3, 4, 6, 3]


def test_resnet50_macs_match_the_published_figure() -> None:
    total = named.total_macs(named.load("resnet50"))
    assert total == pytest.approx(4.1e9, rel=0.03)  # ~4.1 GMAC (torchvision: 4.09 GFLOPS incl. the 2 M-MAC fc)
    assert named.total_macs(named.load("resnet50", batch=4)) == 4 * total


def test_resnet50_v1_5_puts_the_stride_in_the_3x3_conv() -> None:
    convs = _convs()
    for stage in (2, 3, 4):
        assert convs[f"layer{stage}.0.conv1"].stride == (1, 1)
        assert convs[f"layer{stage}.0.conv2"].stride == (2, 2) and convs[f"layer{stage}.0.conv2"].kernel == (3, 3)
        assert convs[f"layer{stage}.0.downsample"].stride == (2, 2)


def test_resnet50_shapes_chain() -> None:
    convs = _convs()
    stem = convs["conv1"]
    assert (stem.input_height, stem.in_channels, stem.kernel, stem.stride) == (224, 3, (7, 7), (2, 2))
    assert stem.output_height == stem.output_width == 112
    # 3x3 / 2 max pool with padding 1
    h, c = (stem.output_height + 2 - 3) // 2 + 1, stem.out_channels
    assert h == 56
    blocks = sorted(
        {k.rsplit(".", 1)[0] for k in convs if k.startswith("layer")},
        key=lambda b: tuple(int(x) for x in re.findall(r"\d+", b)),
    )
    for blk in blocks:
        c1, c2, c3 = (convs[f"{blk}.conv{i}"] for i in (1, 2, 3))
        assert (c1.input_height, c1.input_width, c1.in_channels) == (h, h, c), blk
        for prev, nxt in ((c1, c2), (c2, c3)):
            assert (nxt.input_height, nxt.input_width) == (prev.output_height, prev.output_width), blk
            assert nxt.in_channels == prev.out_channels, blk
        assert c3.out_channels == 4 * c2.out_channels
        ds = convs.get(f"{blk}.downsample")
        if ds is not None:
            assert (ds.input_height, ds.in_channels) == (h, c)
            assert (ds.output_height, ds.out_channels) == (c3.output_height, c3.out_channels)
        else:  # identity shortcut: shapes must already match
            assert (h, c) == (c3.output_height, c3.out_channels), blk
        h, c = c3.output_height, c3.out_channels
    assert (h, c) == (7, 2048)


def _check_against_loop(
    loop_conv2d: Callable[..., np.ndarray], c: Conv2dParams, height: int, width: int, seed: int, channel_div: int = 1
) -> None:
    """Layer `c` with its kernel, stride and padding on a smaller input: reference vs the loop conv (exact, i8)."""
    p = conv2d(
        batch=1,
        in_channels=max(1, c.in_channels // channel_div),
        out_channels=max(1, c.out_channels // channel_div),
        input_height=height,
        input_width=width,
        kernel=c.kernel,
        stride=c.stride,
        padding=c.padding,
        dilation=c.dilation,
        groups=c.groups,
        dtype="i8",
    )
    x, w = random_inputs(p, np.random.default_rng(seed))
    got = evaluate(p, [x, w])
    # float64 loops are exact here (integer sums far below 2**53) and much faster than int64 ones
    want = loop_conv2d(x.astype(np.float64), w.astype(np.float64), c.stride, c.padding, c.dilation)
    assert got.dtype == np.int64 and got.shape == want.shape and np.array_equal(got, want), p.summary()


@pytest.mark.slow
def test_every_resnet50_layer_matches_the_loop_conv_on_reduced_spatial_sizes(
    conv2d_by_loops: Callable[..., np.ndarray],
) -> None:
    # Full channels, kernels, strides and padding; input shrunk to 7x6 (odd and even: a stride-2
    # window then skips a trailing row but not a column), 9x8 for the 7x7 stem.
    for i, c in enumerate(_convs().values()):
        height, width = (9, 8) if c.kernel == (7, 7) else (7, 6)
        _check_against_loop(conv2d_by_loops, c, height, width, seed=i)


def test_representative_layers_with_larger_spatial_sizes(conv2d_by_loops: Callable[..., np.ndarray]) -> None:
    convs = _convs()
    for i, label in enumerate(("conv1", "layer2.0.conv2", "layer3.0.downsample", "layer4.1.conv2")):
        _check_against_loop(conv2d_by_loops, convs[label], 16, 15, seed=100 + i, channel_div=8)


# ---- transformers --------------------------------------------------------------------------


def _by_label(problems: list, prefix: str) -> dict:
    return {p.label.removeprefix(prefix): p for p in problems}


@pytest.mark.parametrize(("batch", "seq"), [(1, 128), (2, 384), (3, 512)])
def test_bert_base_macs(batch: int, seq: int) -> None:
    probs = named.load("bert-base", batch=batch, seq_len=seq)
    h, f = BERT_H, BERT_FFN
    projections = 4 * seq * h * h  # Q, K, V, attention output
    attention = 2 * seq * seq * h  # scores and context over all heads (heads * head_dim = H)
    ffn = 2 * seq * h * f
    assert named.total_macs(probs) == batch * (projections + attention + ffn)
    by = _by_label(probs, "bert-base/")
    scores = by["attention.scores"]
    assert scores.shape(scores.output) == (batch, BERT_HEADS, seq, seq)
    assert by["ffn.up"].shape(by["ffn.up"].inputs[1]) == (h, f)


def test_bert_base_weights_match_the_published_parameter_count() -> None:
    # One token through one layer multiplies each weight once: MACs = weight parameters.
    probs = _by_label(named.load("bert-base", seq_len=1), "bert-base/")
    layer_weights = sum(p.macs for k, p in probs.items() if not k.startswith(("attention.scores", "attention.context")))
    embeddings = (BERT_VOCAB + BERT_POS + 2) * BERT_H
    assert BERT_LAYERS * layer_weights + embeddings == pytest.approx(110e6, rel=0.02)  # "BERT-base ... 110M"


def test_llama7b_prefill_macs() -> None:
    s, d, f = 512, LLAMA_D, LLAMA_FFN
    probs = named.load("llama7b-prefill", seq_len=s, batch=2)
    assert named.total_macs(probs) == 2 * (4 * s * d * d + 3 * s * d * f + 2 * s * s * d)
    by = _by_label(probs, "llama7b-prefill/")
    assert by["attn.scores"].shape(by["attn.scores"].output) == (2, LLAMA_HEADS, s, s)
    assert named.total_macs(named.load("llama7b-prefill")) == 4 * 2048 * d * d + 3 * 2048 * d * f + 2 * 2048**2 * d


@pytest.mark.parametrize("context", [1, 2048, 4096])
def test_llama7b_decode_macs(context: int) -> None:
    d, f = LLAMA_D, LLAMA_FFN
    probs = named.load("llama7b-decode", context=context, batch=3)
    assert named.total_macs(probs) == 3 * (4 * d * d + 3 * d * f + 2 * context * d)
    by = _by_label(probs, "llama7b-decode/")
    scores = by["attn.scores"]
    assert scores.shape(scores.inputs[1]) == (3, LLAMA_HEADS, context, d // LLAMA_HEADS)
    assert scores.shape(scores.output) == (3, LLAMA_HEADS, 1, context)


def test_llama7b_weights_match_the_published_parameter_count() -> None:
    probs = _by_label(named.load("llama7b-decode", context=1), "llama7b-decode/")
    layer_weights = sum(p.macs for k, p in probs.items() if not k.startswith(("attn.scores", "attn.context")))
    assert layer_weights == 4 * LLAMA_D**2 + 3 * LLAMA_D * LLAMA_FFN
    total = LLAMA_LAYERS * layer_weights + 2 * LLAMA_VOCAB * LLAMA_D  # + token embedding and output head
    assert total == pytest.approx(6.7e9, rel=0.02)  # "LLaMA-7B: 6.7B parameters" (Table 2)


# ---- parameters and dtypes -------------------------------------------------------------------


def test_dtype_parameters_apply_to_every_problem() -> None:
    for name in named.names():
        for p in named.load(name, dtype="i8", weights_dtype="i4", out_dtype="i32"):
            assert p.weight is not None
            assert p.inputs[p.weight].dtype == "i4"
            assert p.inputs[1 - p.weight].dtype == "i8"
            assert p.output.dtype == "i32" and p.acc_dtype == "i32"
        defaults = named.load(name)
        assert {o.dtype for p in defaults for o in p.operands} == {"bf16"}


def test_unknown_workload_lists_the_choices() -> None:
    with pytest.raises(ProblemError) as e:
        named.load("resnet-50")
    assert e.value.token == "resnet-50"
    for n in named.names():
        assert n in e.value.hint


def test_unknown_parameter_lists_the_valid_ones() -> None:
    with pytest.raises(ProblemError) as e:
        named.load("llama7b-decode", seq_len=10)
    assert e.value.token == "seq_len" and "context" in e.value.hint and "batch" in e.value.hint


@pytest.mark.parametrize(
    ("name", "params", "token"),
    [
        ("resnet50", {"batch": 0}, "batch"),
        ("bert-base", {"seq_len": 513}, "seq_len"),
        ("bert-base", {"seq_len": "long"}, "seq_len='long'"),
        ("llama7b-prefill", {"dtype": "f64"}, "f64"),
        ("resnet50", {"describe": 1}, "describe"),
    ],
)
def test_bad_parameter_values_are_rejected(name: str, params: dict[str, object], token: str) -> None:
    with pytest.raises(ProblemError) as e:
        named.load(name, **params)
    assert e.value.token == token


def test_every_describe_works() -> None:
    for n in named.names():
        assert named.describe(n).startswith(f"{n}: ")
    with pytest.raises(ProblemError):
        named.describe("nope")


def test_block_float_workloads_take_bf16_outputs_unless_told() -> None:
    layers = named.load("resnet50", batch=1, dtype="bfloat8_b", weights_dtype="bfloat4_b")
    assert {(p.inputs[0].dtype, p.inputs[1].dtype, p.output.dtype) for p in layers} == {
        ("bfloat8_b", "bfloat4_b", "bf16")
    }
    assert {p.output.dtype for p in named.load("bert-base", dtype="bfloat8_b", out_dtype="f32")} == {"f32"}
