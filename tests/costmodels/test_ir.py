"""Smoke tests of the core types (the foundation issue's full suite lives in test_problem*.py)."""

from costmodels.ir import Level, Loop, Mapping, coverage_errors, flat_mapping
from workload.einsum import einsum


def test_flat_mapping_covers_batched_matmul() -> None:
    p = einsum("vmk,vnk->vmn", {"v": 4, "m": 8, "n": 8, "k": 16}, weight=1)
    assert coverage_errors(p, flat_mapping(p)) == []


def test_overlapping_k_tiles_are_reported() -> None:
    p = einsum("mk,kn->mn", {"m": 4, "n": 4, "k": 32})
    m = Mapping(
        levels=(
            Level(name="outer", loops=(Loop(axis="k", factor=2, stride=8),)),
            Level(name="tile", loops=(Loop(axis="m", factor=4), Loop(axis="n", factor=4), Loop(axis="k", factor=16))),
        ),
        acc_dtype="f32",
    )
    errs = coverage_errors(p, m)
    assert [(e.axis, e.kind, e.point) for e in errs] == [("k", "missed", 24)]
