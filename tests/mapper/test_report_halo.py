"""The report validates the best mapping the way it runs: an L1-sharded Tenstorrent conv through its
halo configuration (README, Validation: "Sharded Tenstorrent convolutions run from the halo
configuration"), and names the method; a sharded conv the halo path cannot judge falls back to its
loop nest and says why (issue #13)."""

from __future__ import annotations

from functools import cache

from costmodels import get_target
from costmodels.ir import Mapping
from costmodels.tenstorrent.halo_of import halo_config_of
from executor.validate import validate_as_run
from mapper.report import validation_of
from mapper.search import tune
from mapper.settings import SearchSettings
from workload.conv2d import conv2d
from workload.problem import Problem


@cache
def _conv() -> Problem:
    return conv2d(
        batch=1, in_channels=16, out_channels=16, input_height=8, input_width=8, kernel=(3, 3), stride=(1, 1),
        padding=(1, 1), dilation=(1, 1), groups=1, dtype="bf16",
    )  # fmt: skip


def _mapping(**knobs: object) -> Mapping:
    """The best wormhole mapping of `_conv` with some knobs changed (feasible but for the preset's
    precision policy: LoFi and bf16 accumulation are opt-in overrides)."""
    p, t = _conv(), get_target("wormhole-n150")
    found = tune(p, t, SearchSettings(), validate=False)
    assert found.point is not None
    point = {**found.point, **knobs}
    m = t.mapping(p, point)  # type: ignore[arg-type]
    errs = [v for v in t.check(p, m) if v.code not in ("math-fidelity", "accumulation")]
    assert errs == [], errs
    return m


def test_sharded_conv_is_validated_through_its_halo_configuration() -> None:
    m = _mapping(memory="l1-sharded", layout="height/2")
    config, why = halo_config_of(_conv(), m)
    assert config is not None and config.num_cores == 2, why
    data, passed, note = validation_of(_conv(), m, seed=0)
    assert passed is True and data is not None
    assert data["method"] == "halo" and "halo configuration: 2 cores" in data["reason"]
    assert note == "validation passed through the halo configuration (2 cores, 16 remote sticks) [method: halo]"


def test_dram_interleaved_conv_runs_its_loop_nest_without_a_fallback_note() -> None:
    m = _mapping(memory="dram-interleaved")
    assert halo_config_of(_conv(), m)[0] is None
    data, passed, note = validation_of(_conv(), m, seed=0)
    assert passed is True and data is not None and data["method"] == "full" and note == ""


def test_lofi_sharded_conv_falls_back_to_the_loop_nest_and_says_why() -> None:
    m = _mapping(memory="l1-sharded", layout="height/2", math_fidelity="LoFi")
    data, passed, note = validation_of(_conv(), m, seed=0)
    assert passed is True and data is not None and data["method"] == "full"
    assert "halo path not used: math fidelity LoFi" in note and note.endswith("[method: full]")
    assert "emulated" in data["tolerance_reason"]  # the loop nest did run the LoFi phases


def test_bf16_accumulating_sharded_conv_falls_back_to_the_loop_nest() -> None:
    m = _mapping(memory="l1-sharded", layout="height/2", fp32_acc=False)
    r = validate_as_run(_conv(), m)
    assert r.method == "full" and "accumulates in bf16" in r.notes[0] and "halo path not used" in r.reason


def test_sharded_conv_over_the_cap_falls_back_to_a_proxy_of_the_loop_nest() -> None:
    m = _mapping(memory="l1-sharded", layout="height/2")
    r = validate_as_run(_conv(), m, memory_cap_bytes=64 * 1024)
    assert r.method == "proxy" and "over the 0.0625 MiB cap" in r.notes[0], r.notes


def test_halo_validation_still_fails_a_loop_nest_that_misses_points() -> None:
    m = _mapping(memory="l1-sharded", layout="height/2")
    levels = list(m.levels)
    grid = next(i for i, lvl in enumerate(levels) if lvl.name == "grid")
    levels[grid] = levels[grid].model_copy(update={"loops": ()})  # the row split over 2 cores dropped
    broken = m.model_copy(update={"levels": tuple(levels)})
    r = validate_as_run(_conv(), broken)
    assert r.method == "halo" and r.status == "failed" and r.reason.startswith("coverage:")


def test_the_validated_halo_is_the_one_the_cost_model_charges() -> None:
    """Block sharding: the halo over the layout's R row cores, as `tenstorrent.shape.layout_stats` prices it."""
    from costmodels.tenstorrent.shape import layout_stats, tt_shape

    p = conv2d(
        batch=1, in_channels=128, out_channels=128, input_height=28, input_width=28, kernel=(3, 3), stride=(1, 1),
        padding=(1, 1), dilation=(1, 1), groups=1, dtype="bf16",
    )  # fmt: skip
    t = get_target("wormhole-n150")
    found = tune(p, t, SearchSettings(), validate=False)
    assert found.point is not None
    m = t.mapping(p, {**found.point, "memory": "l1-sharded", "layout": "block/8x4"})
    assert t.check(p, m) == []
    config, _ = halo_config_of(p, m)
    hw = t.hardware  # type: ignore[attr-defined]
    stats = layout_stats(tt_shape(p, hw.tile), hw, "block/8x4")
    assert config is not None and config.num_cores == 8
    assert (config.max_buffer_sticks(), config.max_remote_sticks(), config.total_remote_sticks()) == (
        stats.halo_buffer_sticks,
        stats.halo_max_remote_sticks,
        stats.halo_total_remote_sticks,
    )
    r = validate_as_run(p, m)
    assert r.method == "halo" and r.passed
