"""Narrow integer outputs: the reference and the executor wrap and saturate at the same places.

An integer problem accumulates in i32, which wraps in two's complement (executor.numerics); an
i8/i4 output then saturates the i32 value. Issue #13: the reference saturated the *exact* value
instead, so an i8 output whose exact value exceeds the i32 range differed from the executor
(exact 2**32 + 5 -> reference 127, executor: wrapped 5 -> 5).
"""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.ir import Level, Loop, Mapping, flat_mapping
from executor.tiled import run_mapping
from workload.einsum import einsum
from workload.reference import cast_output, evaluate


def _inputs() -> list[np.ndarray]:
    # one output element, exact value 65536 * 65536 + 1 * 5 = 2**32 + 5; another, -(2**32) - 3
    a = np.array([[65536, 1], [-65536, 1]], dtype=np.int32)
    b = np.array([[65536], [5]], dtype=np.int32)
    b2 = np.array([[65536], [-3]], dtype=np.int32)
    return [a, np.concatenate([b, b2], axis=1)]


@pytest.mark.parametrize("out", ["i8", "i4", "i32"])
def test_reference_and_executor_agree_past_the_i32_range(out: str) -> None:
    p = einsum("mk,kn->mn", {"m": 2, "k": 2, "n": 2}, dtype="i32", out_dtype=out, weight=1)
    x = _inputs()
    exact = evaluate(p, x)
    assert abs(int(exact[0, 0])) > 2**31  # the case the issue names
    want = cast_output(p, exact)
    for m in (
        flat_mapping(p),
        Mapping(
            levels=(
                Level(name="o", loops=(Loop(axis="k", factor=2),)),
                Level(name="t", loops=(Loop(axis="m", factor=2), Loop(axis="n", factor=2))),
            ),
            acc_dtype="i32",
        ),
    ):
        got = run_mapping(p, m, x).values
        np.testing.assert_array_equal(got.astype(np.int64), want.astype(np.int64))
    wrapped = (exact.astype(np.int64) + 2**31) % 2**32 - 2**31  # the i32 accumulator's value
    if out == "i32":
        np.testing.assert_array_equal(want.astype(np.int64), wrapped)
    else:
        top = 2 ** (int(out[1:]) - 1) - 1
        np.testing.assert_array_equal(want.astype(np.int64), np.clip(wrapped, -top - 1, top))
        assert int(want[0, 0]) == min(5, top)  # wrapped 5, then saturated: not the exact value's 127


def test_saturation_still_applies_within_the_i32_range() -> None:
    p = einsum("mk,kn->mn", {"m": 1, "k": 2, "n": 1}, dtype="i32", out_dtype="i8", weight=1)
    x = [np.array([[1000, 7]], dtype=np.int32), np.array([[3], [1]], dtype=np.int32)]
    assert int(cast_output(p, evaluate(p, x))[0, 0]) == 127
    assert int(run_mapping(p, flat_mapping(p), x).values[0, 0]) == 127
