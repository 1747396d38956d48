"""A refusal's advice can be followed: the target it sends a one-input reduction to takes it (a random sweep of
held-out problems found rngd advising a ones tensor for a max, which rngd then refuses, and Tenstorrent advising
"another target" for block-float inputs, which no other target takes as they are)."""

from __future__ import annotations

import re

import pytest

from costmodels.registry import get_target
from workload.einsum import einsum


@pytest.mark.parametrize(
    ("preset", "dtype", "op"),
    [("rngd", "bf16", "max"), ("rngd", "i8", "min"), ("rngd", "bf16", "mul"), ("wormhole-n150", "bfloat8_b", "add"),
     ("blackhole-p150", "bfloat4_b", "max")],
)  # fmt: skip
def test_a_one_input_reduction_is_sent_where_it_runs(preset: str, dtype: str, op: str) -> None:
    problem = einsum("ij->i", {"i": 32, "j": 64}, dtype=dtype, out_dtype="bf16", reduce_op=op)
    refused = get_target(preset).supports(problem)
    assert [v.code for v in refused] == ["unary"], refused
    advice = refused[0].message
    named = re.findall(r"ascend-910b|ascend-a5", advice)
    assert named and "f16 or f32" in advice, advice
    for other in named:  # converted as the advice says, the named target takes it
        converted = einsum("ij->i", {"i": 32, "j": 64}, dtype="f16", out_dtype="f16", reduce_op=op)
        assert get_target(other).supports(converted) == [], (other, op)
    if "ones tensor" in advice:  # offered for a sum only, which the target then takes; another op it refuses
        assert "a sum becomes a contraction" in advice
        for reduce_op in ("add", op):
            ones = einsum("ij,j->i", {"i": 32, "j": 64}, dtype="bf16", reduce_op=reduce_op)
            assert (get_target(preset).supports(ones) == []) == (reduce_op == "add")
