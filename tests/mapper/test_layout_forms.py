"""Network plans with a folded conv (mapper.layout_forms): the search's form, the fold op priced, DP = brute force.

A stem-like 7x7 stride-2 conv on 3 channels is folded by the search on a 2x2 or 4x2 grid (ttnn pads
its 3 channels to 8, `costmodels.tenstorrent.shape.padded_in_channels`) and kept as given on a 2x1
grid with slow DRAM; small chains so that brute force over every sequence stays cheap.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

import mapper.layout_forms as layout_forms
from costmodels.registry import get_target
from costmodels.tenstorrent.hardware import TensixHardware
from mapper.layout_brute import brute_force
from mapper.layout_chain import Forms, build_chain
from mapper.layout_forms import folded_conv
from mapper.layout_plan import NetworkPlan, plan_layouts
from mapper.search import tune
from mapper.transforms import fold_op_seconds
from workload.conv2d import conv2d
from workload.conv_fold import fold_of
from workload.problem import Problem

PRESET = "wormhole-n150"
H = 16


def stem() -> Problem:
    return conv2d(batch=1, in_channels=3, out_channels=32, input_height=2 * H, input_width=2 * H, kernel=7, stride=2,
                  padding=3, label="stem")  # fmt: skip


def stem_block() -> list[Problem]:
    """stem -> max pool -> a two-conv identity block (its add closes it)."""
    return [
        stem(),
        conv2d(batch=1, in_channels=32, out_channels=32, input_height=H // 2, input_width=H // 2, kernel=1,
               label="b.0.conv1"),
        conv2d(batch=1, in_channels=32, out_channels=32, input_height=H // 2, input_width=H // 2, kernel=3,
               padding=1, label="b.0.conv2"),
    ]  # fmt: skip


def pre_stem() -> list[Problem]:
    """A conv whose output the stem reads (a chain edge into the folded conv), then a conv reading the stem's."""
    return [
        conv2d(batch=1, in_channels=3, out_channels=3, input_height=2 * H, input_width=2 * H, kernel=1, label="pre"),
        stem(),
        conv2d(batch=1, in_channels=32, out_channels=32, input_height=H, input_width=H, kernel=3, padding=1,
               label="next"),
    ]  # fmt: skip


FOLDS = {"grid_x": 2, "grid_y": 2}
FOLDS_FAST = {"grid_x": 4, "grid_y": 2, "dram_gb_per_s": 40.0}
KEEPS = {"grid_x": 2, "grid_y": 1, "dram_gb_per_s": 8.0}
CASES: list[tuple[list[Problem], dict[str, Any], str]] = [
    (stem_block(), FOLDS, "folded"),
    (stem_block(), FOLDS_FAST, "folded"),
    (stem_block(), KEEPS, "as given"),
    (pre_stem(), FOLDS, "folded"),
    (pre_stem(), FOLDS_FAST, "folded"),
]


def forms_of(problems: list[Problem], plan: NetworkPlan, ov: dict[str, Any]) -> Forms:
    """The forms the plan reports, rebuilt for brute force."""
    hw = cast(TensixHardware, get_target(PRESET, ov).hardware)
    rows = {lay.label: lay.form for lay in plan.layers}
    return {
        k: folded_conv(p, fold_of(p), hw) if rows[p.label] == "folded" else None
        for k, p in enumerate(problems)
        if rows.get(p.label)
    }


@pytest.mark.parametrize("case", range(len(CASES)))
def test_dp_equals_brute_force_with_the_folded_conv(case: int) -> None:
    problems, ov, form = CASES[case]
    plan = plan_layouts(problems, PRESET, ov)
    (row,) = [lay for lay in plan.layers if lay.label == "stem"]
    assert row.form == form
    forms = forms_of(problems, plan, ov)
    assert plan.total_seconds == pytest.approx(brute_force(problems, PRESET, ov, forms=forms), rel=1e-12)
    assert sum(lay.seconds for lay in plan.layers) == pytest.approx(plan.total_seconds, rel=1e-12)
    assert plan.total_seconds <= plan.greedy_seconds * (1 + 1e-12)


@pytest.mark.parametrize("case", [0, 2])
def test_the_plan_takes_the_form_the_search_chooses(case: int) -> None:
    """The stem keeps no other tensor alive: the plan's form is `mapper.search.tune`'s, and so is its price alone."""
    problems, ov, form = CASES[case]
    plan = plan_layouts(problems, PRESET, ov)
    (row,) = [lay for lay in plan.layers if lay.label == "stem"]
    r = tune(problems[0], get_target(PRESET, ov), validate=False)
    assert r.transform is not None and r.transform.chosen == (form == "folded")
    assert row.alone_seconds == pytest.approx(r.best_value(), rel=1e-12)


def test_a_folded_conv_reads_dram_and_pays_the_fold_op() -> None:
    problems, ov, _ = CASES[4]
    plan = plan_layouts(problems, PRESET, ov)
    hw = cast(TensixHardware, get_target(PRESET, ov).hardware)
    stem_row, pre_row = plan.layers[1], plan.layers[0]
    assert stem_row.form == "folded" and stem_row.input == "dram, folded" and pre_row.output == "dram"
    op = fold_op_seconds(fold_of(problems[1]), problems[1], hw)  # the DRAM path: input_in_l1 is off
    assert stem_row.fold_seconds == pytest.approx(op) and op > 0
    assert stem_row.alone_seconds > op and stem_row.point["layout"] == stem_row.layout
    steps = build_chain(problems, True, forms_of(problems, plan, ov))
    assert steps[1].chained and not steps[1].in_l1 and not steps[0].out_l1  # the edge exists but goes via DRAM
    assert plan.spilled_edges == 0  # a forced DRAM edge is not counted as spilled
    # the folded stem's output is an ordinary chain edge: here it stays in L1 for the next conv
    assert stem_row.output == "l1" and plan.layers[2].input == "l1"


def test_the_form_is_the_searchs_not_the_chains_best() -> None:
    """Documented limit: the plan takes the search's form; with the stem's input on a chain edge, keeping it
    as given (its input stays in L1) is cheaper in this chain than the folded form the search chose alone."""
    problems, ov, _ = CASES[4]
    plan = plan_layouts(problems, PRESET, ov)
    as_given = brute_force(problems, PRESET, ov, forms={1: None})
    assert plan.folded() == ["stem"] and as_given < plan.total_seconds


def test_the_folded_table_is_skipped_when_its_bound_rules_it_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A folded form whose bound plus the fold op is not below the optimum as given is never enumerated; with
    nothing provable (bound 0) it is enumerated and the plan is the same."""
    problems, ov, _ = CASES[2]
    built: list[str] = []
    real = layout_forms.layer_table

    def counting(problem: Problem, *a: Any, **k: Any) -> Any:
        built.append(problem.label)
        return real(problem, *a, **k)

    monkeypatch.setattr(layout_forms, "layer_table", counting)
    bounded = plan_layouts(problems, PRESET, ov)
    assert built == []  # the folded stem's bound rules it out on this target
    monkeypatch.setattr(layout_forms, "form_bound_seconds", lambda *a: 0.0)
    full = plan_layouts(problems, PRESET, ov)
    assert built == ["stem (folded)"]
    assert full.total_seconds == bounded.total_seconds and full.folded() == bounded.folded() == []


def test_the_cli_table_shows_the_form() -> None:
    from rich.console import Console

    from mapper.display import show_workload
    from mapper.settings import SearchSettings
    from mapper.workloads import tune_layers

    problems, ov, _ = CASES[0]
    w = tune_layers(problems, PRESET, SearchSettings(), overrides=ov, workers=1, validate=False)
    assert w.network is not None and w.network.folded() == ["stem"]
    convs_alone = sum(lay.alone_seconds for lay in w.network.layers if lay.kind == "conv")
    assert convs_alone == pytest.approx(w.total_value, rel=1e-12)  # the mapper's per-layer optima, fold op in both
    console = Console(record=True, width=240)
    show_workload(console, w)
    text = console.export_text()
    assert "form" in text and "folded" in text
