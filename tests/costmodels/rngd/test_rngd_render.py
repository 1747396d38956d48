"""The renderer reproduces the case-study dumps of contraction-engine-rngd.txt.

Each reference dump is copied here verbatim. Where the model reproduces a line, the text must
match exactly. Three lines of the reference are not self-consistent and are compared by
structure (levels, axes, sizes and padding markers) with the deviation named:

- Batched MatMul, K contraction, TRF line: ``V=5`` while the problem's V is 32 (the V-vectorized
  dump's size leaked in); the model holds V=32 in the TRF.
- Batched MatMul, K contraction, Computation line: omits the ``N/8=3`` loop that its own
  Accumulation line has; the model lists it (time broadcast over N/8 groups).
- Conv case studies, Accumulation line: ``C=32`` while the TRF line holds ``C=24`` (C/8=3 x 8 rows).
"""

from __future__ import annotations

import re

import pytest

from costmodels.protocol import Choice
from costmodels.registry import get_target
from tests.costmodels.rngd.points import BASE as SUITE_BASE
from workload.conv2d import conv2d
from workload.einsum import einsum

T = get_target("rngd")
# the suite's base point with the batch axis in the packet's free slot and on the shard roles
BASE: dict[str, Choice] = {**SUITE_BASE, "packet_free": "b", "cluster_role": "b", "slice_role": "b"}

K_CONTRACTION = """\
// Configuration: input_type = bf16, trf_type = bf16, reduce_op = `Add`
//        Input mapping: [ H: [V=32, M=32, K=32] ] (1)
//          TRF mapping: [ Row: [N=8] | H: [V=5, N/8=3, K=32] ] (1)
//  Computation mapping: [ H: [V=32, M=32] | Row: [N=8] | T: [K=32] ] (1)
// Accumulation mapping: [ H: [V=32, M=32, N/8=3] | T: [N=8] ] (1)"""
V_VECTORIZED = """\
// Configuration: input_type = bf16, trf_type = bf16, reduce_op = `Add`
//        Input mapping: [ H: [M=5, K=32, V=32] ] (1)
//          TRF mapping: [ Row: [N=8] | H: [N/8=3, K=32, V=32] ] (1)
//  Computation mapping: [ H: [M=5, N/8=3, K=32] | Row: [N=8] | T: [V=32] ] (1)
// Accumulation mapping: [ H: [M=5, N=24] | T: [V=32] ] (1)"""
NM_TILED = """\
// Configuration: input_type = bf16, trf_type = bf16, reduce_op = `Add`
//        Input mapping: [ H: [V=5, K=32, M=32] ] (1)
//          TRF mapping: [ Row: [N=8] | H: [V=5, N/8=3, K=32, M=32] ] (1)
//  Computation mapping: [ H: [V=5, N/8=3, K=32] | Row: [N=8] | T: [M=32] ] (1)
// Accumulation mapping: [ H: [V=5, N=24] | T: [M=32] ] (1)"""
CONV_S1 = """\
// Configuration: input_type = bf16, trf_type = bf16, reduce_op = `Add`
//        Input mapping: [ H: [H=30, Fh=3, K=32, $(W=30 + Fw=3)=32] ] (1)
//          TRF mapping: [ Row: [C=8] | H: [K=32, C=24, Fh=3, Fw=3] ] (1)
//  Computation mapping: [ H: [H=30, C/8=3, Fh=3, K=32, Fw=3] | Row: [C=8] | T: [W=30+2#] ] (1)
// Accumulation mapping: [ H: [H=30, C=32] | T: [W=30+2#] ] (1)"""
CONV_S2 = """\
// Configuration: input_type = bf16, trf_type = bf16, reduce_op = `Add`
//        Input mapping: [ H: [H=15, Fh=4, K=32, $(W:2=15 + Fw=4)=32] ] (1)
//          TRF mapping: [ Row: [C=8] | H: [K=32, C=24, Fh=4, Fw=4] ] (1)
//  Computation mapping: [ H: [H=15, C/8=3, Fh=4, K=32, Fw/2=2] | Row: [C=8] | T: [W=15+1#, Fw=2] ] (1)
// Accumulation mapping: [ H: [H=15, C=32] | T: [W=15+1#] ] (1)"""
CONV_S2_FEED3 = """\
// Configuration: feed_flits = 3, input_type = bf16, trf_type = bf16, reduce_op = `Add`
//        Input mapping: [ H: [H=16, Fh=4, K=32, $(W:2=16 + Fw=4)=34] ] (1)
//          TRF mapping: [ Row: [C=8] | H: [K=32, C=24, Fh=4, Fw=4] ] (1)
//  Computation mapping: [ H: [H=16, C/8=3, Fh=4, K=32, Fw/2=2] | Row: [C=8] | T: [W=16, Fw=2] ] (1)
// Accumulation mapping: [ H: [H=16, C=32] | T: [W=16] ] (1)"""
CONV_D2 = """\
// Configuration: input_type = bf16, trf_type = bf16, reduce_op = `Add`
//        Input mapping: [ H: [H=27, Fh=3, K=32, $(W=27 + Fw:2=3)=32] ] (1)
//          TRF mapping: [ Row: [C=8] | H: [K=32, C=24, Fh=3, Fw=3] ] (1)
//  Computation mapping: [ H: [H=27, C/8=3, Fh=3, K=32, Fw=3] | Row: [C=8] | T: [W=27+5#] ] (1)
// Accumulation mapping: [ H: [H=27, C=32] | T: [W=27+5#] ] (1)"""
CONV_S2_D2 = """\
// Configuration: input_type = bf16, trf_type = bf16, reduce_op = `Add`
//        Input mapping: [ H: [H=14, Fh=3, K=32, $(W:2=14 + Fw:2=3)=31+1#] ] (1)
//          TRF mapping: [ Row: [C=8] | H: [K=32, C=24, Fh=3, Fw=3, 1+1z] ] (1)
//  Computation mapping: [ H: [H=14, C/8=3, Fh=3, K=32, Fw=3] | Row: [C=8] | T: [W=14+2#, 1+1z] ] (1)
// Accumulation mapping: [ H: [H=14, C=32] | T: [W=14+2#] ] (1)"""

BMM = "vmk,vnk->vmn"
CONV_POINT = {**BASE, "packet_k": 1, "packet_free": "m", "inner": "k", "shift": True}
CASES = {
    "k-contraction": (einsum(BMM, {"v": 32, "m": 32, "k": 32, "n": 24}, weight=1), BASE, K_CONTRACTION),
    "v-vectorized": (
        einsum(BMM, {"v": 32, "m": 5, "k": 32, "n": 24}, weight=1),
        {**BASE, "packet_k": 1, "inner": "k"},
        V_VECTORIZED,
    ),
    "nm-tiled": (
        einsum(BMM, {"v": 5, "m": 32, "k": 32, "n": 24}, weight=1),
        {**BASE, "packet_k": 1, "packet_free": "m", "inner": "k"},
        NM_TILED,
    ),
    "conv-stride1": (
        conv2d(batch=1, in_channels=32, out_channels=24, input_height=32, input_width=32, kernel=3),
        CONV_POINT,
        CONV_S1,
    ),
    "conv-stride2": (
        conv2d(batch=1, in_channels=32, out_channels=24, input_height=32, input_width=32, kernel=4, stride=2),
        CONV_POINT,
        CONV_S2,
    ),
    "conv-stride2-feed3": (
        conv2d(batch=1, in_channels=32, out_channels=24, input_height=34, input_width=34, kernel=4, stride=2),
        {**CONV_POINT, "feed_flits": 3},
        CONV_S2_FEED3,
    ),
    "conv-dilation2": (
        conv2d(batch=1, in_channels=32, out_channels=24, input_height=31, input_width=31, kernel=3, dilation=2),
        CONV_POINT,
        CONV_D2,
    ),
    "conv-stride2-dilation2": (
        conv2d(
            batch=1, in_channels=32, out_channels=24, input_height=32, input_width=32, kernel=3, stride=2, dilation=2
        ),
        CONV_POINT,
        CONV_S2_D2,
    ),
}
#: (case, line index) -> why the reference line is not reproduced verbatim (see the module docstring)
DEVIATIONS = {
    ("k-contraction", 2): "reference TRF line says V=5 for a V=32 problem",
    ("k-contraction", 3): "reference Computation line omits N/8=3",
    **{(c, 4): "reference Accumulation line says C=32 for C=24" for c in CASES if c.startswith("conv")},
}


def _structure(line: str) -> list[tuple[str, list[str]]]:
    """(level, [axis names with padding markers]) of a mapping line."""
    out = []
    for level, body in re.findall(r"(\w+): \[([^\]]*)\]", line.split(":", 1)[1]):
        items = [re.sub(r"=\d+", "", it.strip()) for it in body.split(", ") if it.strip()]
        out.append((level, items))
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_case_study_dump(case: str) -> None:
    problem, point, reference = CASES[case]
    mapping = T.mapping(problem, point)
    assert T.check(problem, mapping) == []
    got = T.render(problem, mapping).splitlines()
    ref = reference.splitlines()
    assert len(got) == len(ref) == 5
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        if (case, i) in DEVIATIONS:
            assert g != r
            gs, rs = _structure(g), _structure(r)
            assert [lvl for lvl, _ in gs] == [lvl for lvl, _ in rs]
            for (_, gi), (_, ri) in zip(gs, rs, strict=True):
                assert set(ri) <= set(gi), (case, i, ri, gi)
        else:
            assert g == r, f"{case} line {i}:\n got {g}\n ref {r}"


def test_deviation_lines_differ_only_in_the_named_sizes() -> None:
    problem, point, _ = CASES["k-contraction"]
    got = T.render(problem, T.mapping(problem, point)).splitlines()
    assert got[2] == "//          TRF mapping: [ Row: [N=8] | H: [V=32, N/8=3, K=32] ] (1)"
    assert got[3] == "//  Computation mapping: [ H: [V=32, M=32, N/8=3] | Row: [N=8] | T: [K=32] ] (1)"


def test_sharding_and_padding_markers_in_a_generic_dump() -> None:
    p = einsum("mk,nk->mn", {"m": 64, "k": 20, "n": 16}, weight=1)
    pt = {**BASE, "packet_free": "m", "cluster_role": "m", "slice_role": "m", "slice_grid": 4}
    text = T.render(p, T.mapping(p, pt))
    assert "T: [K=20+12z]" in text  # K padding is zero-filled in the TRF
    assert "Sharding: [ M/16=4 ]" in text
