"""Bounded validation of mappings with explicit strides (targets whose loop order is not significance order)."""

from __future__ import annotations

import importlib
import tracemalloc

import pytest

from costmodels.ir import Level, Loop, Mapping, coverage_errors
from executor import mutations
from executor.proxy import estimate_bytes, radix_order, reduction_steps
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


def one_by_one(m: int, k: int, n: int, stride: int | None = None) -> Mapping:
    """1x1x1 instruction tiles: every k is a reduction step of its own (the outer loops walk k)."""
    outer = (Loop(axis="m", factor=m), Loop(axis="k", factor=k, stride=stride), Loop(axis="n", factor=n))
    tile = (Loop(axis="m", factor=1), Loop(axis="k", factor=1), Loop(axis="n", factor=1))
    return Mapping(levels=(Level(name="o", loops=outer), Level(name="t", loops=tile)), acc_dtype="f32")


def test_more_reduction_steps_than_the_limit_take_a_shorter_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    validate_mod = importlib.import_module("executor.validate")
    ran: list[int] = []
    real = validate_mod.run_mapping

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(*args, **kwargs)
        ran.append(out.steps)
        return out

    monkeypatch.setattr(validate_mod, "run_mapping", counting)
    p = einsum("mk,kn->mn", {"m": 7, "k": 1000, "n": 3}, dtype="f8e5m2")
    mapping = one_by_one(7, 1000, 3)
    assert reduction_steps(p, mapping) == 1000
    full = validate(p, mapping, max_steps=1000)
    assert full.method == "full" and full.passed and ran == [1000]
    report = validate(p, mapping, max_steps=100)
    assert ran[-1] <= 100  # what ran, not what was planned
    assert report.method == "proxy" and report.passed, report.reason
    assert "over the 100-step limit" in report.reason
    assert report.validated_axes["k"] == 63 and report.checked_fraction == pytest.approx(63 / 1000)
    assert any("1,000 reduction steps, over the 100-step limit" in n and "k@o: 1000->63" in n for n in report.notes)


def test_broken_mappings_still_fail_on_the_shorter_proxy() -> None:
    p = einsum("mk,kn->mn", {"m": 7, "k": 1000, "n": 3}, dtype="f32")
    good = one_by_one(7, 1000, 3)
    names = set()
    for name, broken in mutations.mutants(p, good):
        names.add(name)
        report = validate(p, broken, max_steps=100)
        assert not report.passed and report.status == "failed", (name, report.reason)
        if name == "repeat a reduction tile":  # overlapping strides no proxy may shorten: coverage alone
            assert report.elements_compared == 0 and "numbers not run" in report.reason
        elif name == "bf16 accumulator":  # within its own bf16 bound, outside the problem's f32 one
            assert report.method == "proxy" and "outside the problem's f32-accumulation bound" in report.reason
        else:
            assert report.method == "proxy" and report.failing_elements > 0, (name, report.reason)
    assert len(names) == 4


def test_steps_no_proxy_can_shorten_fail_on_coverage_unrun() -> None:
    p = einsum("mk,kn->mn", {"m": 2, "k": 1000, "n": 2}, dtype="f32")
    gapped = one_by_one(2, 500, 2, stride=2)  # visits every other k: strides no proxy may shrink
    report = validate(p, gapped, max_steps=100)
    assert report.status == "failed" and report.elements_compared == 0 and report.checked_fraction == 0.0
    assert (
        report.reason.startswith("coverage: ") and "500 reduction steps, over 4 x the 100-step limit" in report.reason
    )
