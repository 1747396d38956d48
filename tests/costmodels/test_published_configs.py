"""Configurations the vendors publish, run through the targets: each is legal where the hardware allows it (or refused
for the reason the vendor's own rules give), and the search's answer is proven and at least as good under the same
model. The configurations and their sources: `bench/published_configs.py` (which prints the ratios)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.published_configs import CATLASS, LEGAL, NKI, ONE_CORE, conv, gemm, tt
from costmodels.registry import get_target
from executor.validate import validate_as_run
from mapper.search import tune
from mapper.settings import SearchSettings
from workload.problem import Problem


@pytest.mark.parametrize(
    ("label", "preset", "overrides", "problem", "point"), LEGAL, ids=[f"{c[0]}-{c[1]}" for c in LEGAL]
)
def test_a_published_configuration_is_legal_and_the_search_is_no_worse(
    label: str, preset: str, overrides: dict[str, Any] | None, problem: Problem, point: dict[str, Any]
) -> None:
    target = get_target(preset, overrides)
    mapping = target.mapping(problem, point)
    assert target.check(problem, mapping) == [], label
    published = target.cost(problem, mapping).objective("latency")
    result = tune(problem, target, SearchSettings(max_seconds=30, seed=0), validate=False)
    assert result.proven_optimal, (label, result.stop_reason)
    assert result.values["latency"] <= published * (1 + 1e-9), label


@pytest.mark.parametrize(
    ("preset", "problem", "point"),
    [
        ("trn2", gemm(64, 128, 512), {**NKI, "tile_stat": 64}),
        ("ascend-910b", gemm(256, 1024, 512, "f16", "f16"), {**CATLASS, "core_grid": "1x2x2"}),
    ],
)
def test_a_published_configuration_passes_the_executor(preset: str, problem: Problem, point: dict[str, Any]) -> None:
    target = get_target(preset, ONE_CORE if preset == "trn2" else None)
    report = validate_as_run(problem, target.mapping(problem, point))
    assert report.status == "passed", report.reason


def test_published_configurations_the_hardware_rules_out_are_refused_for_that_reason() -> None:
    wh = get_target("wormhole-n150")
    # GEMM_FLOPS' 2x4 sub-block at fp32 accumulation: the destination register holds 4 tiles then (ttnn shrinks it)
    p = gemm(1024, 1024, 1024)
    assert [v.code for v in wh.check(p, wh.mapping(p, tt("block/8x8", "l1-sharded", 128, 4, "2x4")))] == [
        "dst-capacity"
    ]
    # the stem's act_block_h 256 on 64 cores: 98 tiles per core, which 8 tiles do not divide
    c = conv(16, 64, 16, 115, 4, 1, 0)
    assert "act-block-h" in [v.code for v in wh.check(c, wh.mapping(c, tt("height/64", "l1-sharded", 256, 1, "1x2")))]
