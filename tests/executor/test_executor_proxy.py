"""Bounded validation of mappings with explicit strides (targets whose loop order is not significance order)."""

from __future__ import annotations

import tracemalloc

import pytest

from costmodels.ir import Level, Loop, Mapping, coverage_errors
from executor.proxy import estimate_bytes, radix_order
from executor.validate import DEFAULT_CAP_BYTES, ValidationTooLarge, validate
from workload.einsum import einsum

BIG = einsum("mk,kn->mn", {"m": 4096, "k": 4096, "n": 4096}, dtype="bf16", weight=1)


def permuted_radix_mapping(k_outer_stride: int = 32) -> Mapping:
    """An RNGD-shaped nest: n split over chip/row/time with strides 2048/1/8, k over time/packet."""
    return Mapping(
        target="test",
        levels=(
            Level(name="chip", loops=(Loop(axis="n", factor=2, spatial=True, stride=2048),)),
            Level(name="slice", loops=(Loop(axis="m", factor=4096),)),
            Level(name="row", loops=(Loop(axis="n", factor=8, spatial=True, stride=1),)),
            Level(
                name="time",
                loops=(Loop(axis="n", factor=256, stride=8), Loop(axis="k", factor=128, stride=k_outer_stride)),
            ),
            Level(name="packet", loops=(Loop(axis="k", factor=32, spatial=True, stride=1),)),
        ),
        acc_dtype="f32",
    )


def test_radix_order_recognises_permuted_mixed_radix_only() -> None:
    good = permuted_radix_mapping()
    assert coverage_errors(BIG, good) == []
    loops = good.loops()
    order = radix_order(good, "n")
    assert order is not None
    assert [loops[i][1].factor for i in order] == [8, 256, 2]  # finest stride first
    assert radix_order(permuted_radix_mapping(k_outer_stride=16), "k") is None  # overlapping K tiles


@pytest.mark.slow
def test_large_explicit_stride_mapping_validates_within_the_cap() -> None:
    mapping = permuted_radix_mapping()
    assert estimate_bytes(BIG, mapping) > DEFAULT_CAP_BYTES
    tracemalloc.start()
    try:
        report = validate(BIG, mapping, seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.method == "proxy" and report.passed, report
    assert report.checked_fraction < 0.01
    assert peak < DEFAULT_CAP_BYTES, peak
    assert any("proxy loop factors" in n for n in report.notes)


def test_unshrinkable_mapping_is_refused_not_run() -> None:
    """Irregular strides cannot be shrunk without changing the mapping: validation refuses, never runs out of memory."""
    broken = permuted_radix_mapping(k_outer_stride=16)
    with pytest.raises(ValidationTooLarge, match="raise memory_cap_bytes"):
        validate(BIG, broken, seed=0, memory_cap_bytes=1 << 12)
