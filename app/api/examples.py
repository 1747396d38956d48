"""Named examples of the tuning request, shown in the console's "Try it out" (each runs as it is)."""

from __future__ import annotations

from typing import Any

from workload.spec import CONV2D_EXAMPLES, EINSUM_EXAMPLES

GEMM = {"kind": "einsum", "label": "GEMM 1024^3", "expr": "mk,kn->mn", "sizes": {"m": 1024, "k": 1024, "n": 1024}}

TUNING_EXAMPLES: dict[str, dict[str, Any]] = {
    "conv2d-wormhole": {
        "summary": "A ResNet-50 3x3 conv2d on wormhole-n150",
        "value": {"problem": CONV2D_EXAMPLES[0], "target": "wormhole-n150"},
    },
    "bf8-lofi-wormhole": {
        "summary": "The same conv2d in tt-metal's bfloat8_b block floats at LoFi fidelity on wormhole-n150",
        "value": {
            "problem": {**CONV2D_EXAMPLES[0], "dtype": "bfloat8_b", "label": "resnet50 3x3 conv, bfloat8_b"},
            "target": "wormhole-n150",
            "overrides": {"fidelities": ["LoFi"]},
        },
    },
    "bmm-rngd": {
        "summary": "A batched matmul on rngd",
        "value": {"problem": EINSUM_EXAMPLES[0], "target": "rngd"},
    },
    "attention-trn2": {
        "summary": "Attention scores (Llama-7B prefill) on trn2",
        "value": {
            "problem": {
                "kind": "einsum",
                "label": "attention scores",
                "expr": "Q[b, h, s, d], K[b, h, t, d] -> S[b, h, s, t]",
                "sizes": {"b": 1, "h": 32, "s": 2048, "t": 2048, "d": 128},
                "dtype": {"Q": "bf16", "K": "bf16"},
                "out_dtype": "f32",
                "weight": "K",
            },
            "target": "trn2",
        },
    },
    "rowprod-a5": {
        "summary": "A product reduction (TROWPROD) on ascend-a5",
        "value": {
            "problem": {
                "kind": "einsum",
                "label": "row product",
                "expr": "ij->i",
                "sizes": {"i": 64, "j": 256},
                "dtype": "f16",
                "out_dtype": "f16",
                "reduce_op": "mul",
            },
            "target": "ascend-a5",
        },
    },
    "resnet50-blackhole": {
        "summary": "ResNet-50 at batch 16 on blackhole-p150 (every conv layer)",
        "value": {"workload": "resnet50", "params": {"batch": 16}, "target": "blackhole-p150"},
    },
    "gemm-all-targets": {
        "summary": "One GEMM compared on all seven targets",
        "value": {
            "problem": GEMM,
            "targets": ["rngd", "trn1", "trn2", "ascend-910b", "ascend-a5", "wormhole-n150", "blackhole-p150"],
        },
    },
}
