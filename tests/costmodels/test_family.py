"""The pieces every family shares (costmodels/family.py), held against every registered preset."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.family import KNOBS, RULE_CODES, FamilyTarget, ProblemRules, point_of, zero_fill
from costmodels.ir import Level, Loop, Mapping
from costmodels.protocol import Target
from costmodels.registry import FAMILIES, get_target, target_names
from workload.einsum import einsum

GEMM = einsum("mk,kn->mn", {"m": 64, "k": 96, "n": 32}, dtype="bf16", weight=1)
UNARY = einsum("ij->i", {"i": 8, "j": 8}, dtype="bf16")


@pytest.fixture(scope="module", params=target_names())
def target(request: pytest.FixtureRequest) -> Target:
    return get_target(request.param)


def test_every_family_target_is_a_family_target(target: Target) -> None:
    assert isinstance(target, FamilyTarget) and target.family in FAMILIES


def test_a_mapping_without_knobs_gets_the_one_knobs_violation(target: Target) -> None:
    space = target.space(GEMM)
    mapping = target.mapping(GEMM, {p.name: p.choices[0] for p in space.params})
    found = target.check(GEMM, mapping.model_copy(update={"knobs": {}}))
    assert [v.code for v in found] == [KNOBS] and "target.mapping" in found[0].message


def test_unsupported_problems_score_infeasible_by_code_and_value(target: Target) -> None:
    p = UNARY if target.supports(UNARY) else einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 8}, dtype="i4", weight=1)
    assert target.supports(p)
    columns = {"any": np.zeros(3, dtype=np.intp)}  # never read: the guard answers first
    for score in (target.score_batch(p, columns), target.score_codes(p, columns)):
        assert np.asarray(score.feasible).shape == (3,) and not np.asarray(score.feasible).any()
        assert all(np.isinf(np.asarray(score.objectives[o])).all() for o in target.objectives)


def test_problem_rules_say_each_reason_once() -> None:
    rules = ProblemRules(unary="one input", reduce_op="{op} is not a sum", dtype="{name} is {dtype}, not {allowed}")
    assert [v.code for v in rules.violations(UNARY, ("bf16",))] == ["unary"]
    both = ProblemRules(rules.unary, rules.reduce_op, rules.dtype, unary_only=False)
    assert [v.code for v in both.violations(UNARY, ("f32",))] == ["unary", "dtype"]
    mx = einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 8}, dtype="i8", weight=1, reduce_op="max")
    found = rules.violations(mx, ("bf16", "f32"))
    assert [v.code for v in found] == ["reduce-op", "dtype", "dtype"] and set(RULE_CODES) >= {v.code for v in found}
    assert found[0].message == "max is not a sum" and found[1].message.endswith("is i8, not bf16, f32")


def test_point_of_needs_every_knob() -> None:
    m = Mapping(levels=(), acc_dtype="f32", knobs={"a": 1, "b": "x"})
    assert point_of(m, ("a", "b")) == {"a": 1, "b": "x"}
    assert point_of(m, ("a", "c")) is None


def test_zero_fill_only_where_the_nest_pads_a_reduced_axis() -> None:
    exact = (Level(name="t", loops=(Loop(axis="m", factor=64), Loop(axis="k", factor=96), Loop(axis="n", factor=32))),)
    padded = (
        Level(name="t", loops=(Loop(axis="m", factor=64), Loop(axis="k", factor=128), Loop(axis="n", factor=32))),
    )
    assert zero_fill(GEMM, exact, ("k",)) == {}
    both = {op.name: {"k": "zero"} for op in GEMM.inputs}
    assert zero_fill(GEMM, padded, ("k",)) == both
    assert zero_fill(GEMM, exact, ("k",), padded_only=False) == both
    weight = GEMM.inputs[1].name
    assert zero_fill(GEMM, padded, ("k",), operands=lambda name: name == weight) == {weight: {"k": "zero"}}


def test_asking_whether_a_target_runs_a_problem_prepares_nothing() -> None:
    """`supports` answers without building the space and tables (a workload checks every layer before
    any search, and a cancelled workload job assembles its result through the same check: rngd's
    preparation of 23 ResNet-50 layers took 7.3 s there before)."""
    for name in target_names():
        fresh = get_target(name)
        big = einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, dtype="bf16", weight=1)
        assert fresh.supports(big) == [] and len(fresh._memo) in (0, 1)  # type: ignore[attr-defined]
        assert fresh.supports(UNARY) == fresh.supports(UNARY)
        if fresh.family in ("rngd", "trainium"):  # the families that prepare eagerly
            assert len(fresh._memo) == 0  # type: ignore[attr-defined]
        kept = fresh.space(big)  # prepared once now; supports then reads the kept verdict
        assert kept is fresh.space(big) and fresh.supports(big) == []


def test_problem_memo_peek_never_builds() -> None:
    from costmodels.problem_memo import ProblemMemo

    built: list[int] = []
    memo: ProblemMemo[int] = ProblemMemo(lambda p: built.append(1) or len(built), size=2)
    assert memo.peek(GEMM) is None and built == []
    assert memo.get(GEMM) == 1 and memo.peek(GEMM) == 1
    twin = einsum("mk,kn->mn", {"m": 64, "k": 96, "n": 32}, dtype="bf16", weight=1)
    assert twin is not GEMM and memo.peek(twin) == 1 and built == [1]
