"""Validation says exactly what it checked: a three-valued verdict, coverage, the mapping's accumulator.

Issue #13: a mapping that visits a reduction tile twice, or zero-pads, a max reduction used to
come back ``passed=True`` (max is idempotent and the padding loses to positive products, so the
numbers cannot show it) with only a note; a mapping that accumulates in bf16 was judged against
the problem's f32 bound, so the report did not say what the numbers were checked against; an
unchecked validation had no way to say so.
"""

from __future__ import annotations

import pytest

from costmodels.ir import Level, Loop, Mapping, coverage_errors
from executor import mutations
from executor.validate import ValidationReport, validate
from mapper.report import validation_of
from workload.einsum import einsum


def _mapping(acc: str, outer: list[Loop], tile: list[Loop], fill: dict[str, dict[str, str]] | None = None) -> Mapping:
    return Mapping(
        target="hand",
        levels=(Level(name="outer", loops=tuple(outer)), Level(name="tile", loops=tuple(tile))),
        acc_dtype=acc,
        fill=fill or {},  # type: ignore[arg-type]
    )


def _tile(**sizes: int) -> list[Loop]:
    return [Loop(axis=a, factor=f) for a, f in sizes.items()]


def test_a_reduction_tile_visited_twice_fails_a_max_reduction() -> None:
    p = einsum("mk,kn->mn", {"m": 8, "k": 16, "n": 8}, dtype="bf16", reduce_op="max", weight=1)
    # k tiles of 8 at offsets 0, 4, 8: points 4..11 are reduced twice; max(x, x) == x hides it
    m = _mapping("f32", [Loop(axis="k", factor=3, stride=4)], _tile(m=8, n=8, k=8))
    assert [e.kind for e in coverage_errors(p, m)] == ["repeated"]
    r = validate(p, m)
    assert r.failing_elements == 0  # the numbers agree ...
    assert not r.passed and r.status == "failed"  # ... and the verdict still fails
    assert r.reason.startswith("coverage: point k=4 is visited 2 times")


def test_zero_padding_in_a_max_reduction_fails() -> None:
    p = einsum("mk,kn->mn", {"m": 8, "k": 15, "n": 8}, dtype="bf16", reduce_op="max", weight=1)
    zero = {"A": {"k": "zero"}, "B": {"k": "zero"}}
    m = _mapping("f32", [Loop(axis="k", factor=2)], _tile(m=8, n=8, k=8), fill=zero)
    assert [e.kind for e in coverage_errors(p, m)] == ["dummy-in-reduction"]
    r = validate(p, m)
    assert r.failing_elements == 0  # a zero product loses to the positive maxima of these inputs
    assert not r.passed and r.status == "failed" and "padding point k=15" in r.reason


def _long_bf16_gemm() -> tuple[object, Mapping]:
    p = einsum("mk,kn->mn", {"m": 32, "k": 4096, "n": 32}, dtype="bf16", out_dtype="f32", weight=1)
    m = _mapping("bf16", [Loop(axis="k", factor=32)], _tile(m=32, n=32, k=128))
    return p, m


def test_a_bf16_accumulator_is_judged_against_a_bf16_bound_and_the_report_says_so() -> None:
    p, m = _long_bf16_gemm()
    r = validate(p, m)  # type: ignore[arg-type]
    assert "u_acc(bf16" in r.tolerance_reason and "the mapping accumulates in bf16" in r.tolerance_reason
    assert r.failing_elements == 0 and r.max_abs_error > 0  # a correct bf16 accumulation: within its bound
    # ... but not within the bound of the f32 accumulation the problem declares: failed, and named as such
    assert not r.passed and r.status == "failed"
    assert r.reason.startswith("the mapping accumulates in bf16, the problem declares f32: all 1024 compared")
    assert "outside the problem's f32-accumulation bound" in r.reason


def test_a_narrower_accumulator_within_the_problems_bound_passes_and_says_so() -> None:
    # a row product in one f16 instruction (like Ascend's TROWPROD, which accumulates in its input
    # type): its one rounding to f16 is the output's own rounding, so it meets the f32 bound too
    p = einsum("ij->i", {"i": 64, "j": 256}, dtype="f16", out_dtype="f16", reduce_op="mul")
    m = _mapping("f16", [], [Loop(axis="i", factor=64), Loop(axis="j", factor=256)])
    r = validate(p, m)
    assert "u=0.000488: the mapping accumulates in f16, the problem declares f32" in r.tolerance_reason
    assert r.passed and r.status == "passed"
    assert r.reason.startswith("the mapping accumulates in f16, the problem declares f32: all 64 compared elements")
    assert r.reason.endswith("and of the problem's f32-accumulation bound")


def test_a_wrong_bf16_mapping_still_shows_outside_the_bf16_bound() -> None:
    p, m = _long_bf16_gemm()
    broken = mutations.dummy_in_reduction(p, m)  # type: ignore[arg-type]
    assert broken is not None
    r = validate(p, broken)  # type: ignore[arg-type]
    assert r.status == "failed" and r.failing_elements > 0


def test_f32_accumulation_of_the_same_problem_passes_with_the_problems_bound() -> None:
    p, m = _long_bf16_gemm()
    r = validate(p, m.model_copy(update={"acc_dtype": "f32"}))  # type: ignore[arg-type]
    assert r.passed and r.status == "passed" and "u_acc(f32" in r.tolerance_reason and "mapping" not in r.reason


def test_passed_is_true_only_for_the_passed_status() -> None:
    p = einsum("mk,kn->mn", {"m": 16, "k": 16, "n": 16}, dtype="bf16", weight=1)
    good = validate(p, _mapping("f32", [], _tile(m=16, n=16, k=16)))
    assert good.passed and good.status == "passed" and "within the tolerance" in good.reason
    data = good.model_dump()
    for status in ("failed", "not-checked"):
        with pytest.raises(ValueError, match="contradicts"):
            ValidationReport(**{**data, "status": status})
    with pytest.raises(ValueError, match="contradicts"):
        ValidationReport(**{**data, "passed": False})


def test_tune_result_is_none_for_not_checked_and_false_for_failed() -> None:
    p = einsum("mk,kn->mn", {"m": 16, "k": 32, "n": 16}, dtype="f32", weight=1)
    tile = [Loop(axis="m", factor=16), Loop(axis="n", factor=16), Loop(axis="k", factor=32)]
    lofi = _mapping("f32", [], tile).model_copy(update={"knobs": {"math_fidelity": "LoFi"}})
    data, passed, note = validation_of(p, lofi, seed=0)
    assert passed is None and data is not None and data["status"] == "not-checked" and data["passed"] is False
    assert note.startswith("validation not checked: LoFi not emulated")
    p_bf16 = einsum("mk,kn->mn", {"m": 32, "k": 4096, "n": 32}, dtype="bf16", out_dtype="f32", weight=1)
    _, m = _long_bf16_gemm()
    data, passed, note = validation_of(p_bf16, m, seed=0)
    assert passed is False and data is not None and data["status"] == "failed"
    assert note.startswith("validation failed: the mapping accumulates in bf16")
