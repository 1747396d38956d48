"""The search may choose the folded stem (mapper.transforms): priced, chosen when cheaper, validated against
the original problem, and shown on the result.

The problems are small enough to enumerate their whole Tenstorrent space in well under a second. A 4x4,
stride-4 patchify conv on 4 channels, with its input arriving and output staying L1-sharded, is cheaper
folded (a 1x1 matmul on 64 channels instead of 4 kernel rows of 16-wide blocks); a 7x7 stride-2 stem
whose output goes to DRAM is not (the fold op adds DRAM traffic to a DRAM-bound conv).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import mapper.transforms as transforms
import workload.conv_fold as conv_fold
from costmodels.ir import Mapping
from costmodels.registry import get_target
from costmodels.tenstorrent.target import TenstorrentTarget
from executor.folded import validate_folded, window_problem
from mapper.display import result_table
from mapper.result import TuneResult
from mapper.search import tune
from mapper.settings import SearchSettings
from workload.conv2d import conv2d
from workload.conv_fold import ConvFold, fold_of, folded_problem
from workload.problem import Problem
from workload.reference import evaluate, random_inputs


def make_target(preset: str, overrides: dict[str, Any]) -> Any:
    target = get_target(preset, overrides)
    assert isinstance(target, TenstorrentTarget)
    return target


PATCHIFY: dict[str, Any] = {
    "batch": 8,
    "in_channels": 4,
    "out_channels": 128,
    "input_height": 64,
    "input_width": 64,
    "kernel": 4,
}
IN_L1: dict[str, Any] = {"input_in_l1": True, "output_in_l1": True}
STEM: dict[str, Any] = {
    "batch": 2,
    "in_channels": 3,
    "out_channels": 32,
    "input_height": 32,
    "input_width": 32,
    "kernel": 7,
}


def patchify(dtype: str = "bf16") -> Problem:
    return conv2d(dtype=dtype, stride=4, **PATCHIFY)


def stem(in_channels: int = 3) -> Problem:
    return conv2d(dtype="bf16", stride=2, padding=3, **{**STEM, "in_channels": in_channels})


def alone(problem: Problem, target: Any, monkeypatch: pytest.MonkeyPatch) -> TuneResult:
    """The problem tuned as given, the fold not offered."""
    with monkeypatch.context() as m:
        m.setattr(transforms, "fold_candidate", lambda *a: None)
        return tune(problem, target, validate=False)


def test_the_search_chooses_the_fold_when_it_is_cheaper(monkeypatch: pytest.MonkeyPatch) -> None:
    p, target = patchify(), make_target("wormhole-n150", IN_L1)
    r = tune(p, target)
    t = r.transform
    assert t is not None and t.chosen and t.name == "fold"
    q = folded_problem(p)
    orig, fold = alone(p, target, monkeypatch), alone(q, target, monkeypatch)
    op = transforms.fold_op_seconds(fold_of(p), p, target.hardware)
    both = transforms.tune_both_forms(p, target).transform  # both forms searched whole
    assert both is not None and both.original_latency == orig.best_value()
    assert t.transformed_latency == both.transformed_latency == fold.best_value()
    # the folded form had the lower bound, was searched first, and the original's bound is above its answer
    assert t.original_latency is None and t.original_bound is not None and t.total_latency is not None
    assert t.original_bound >= t.total_latency and "original not searched" in t.summary()
    o, f = orig.best_value(), fold.best_value()
    assert o is not None and f is not None and f + op < o  # the cheaper answered
    assert r.best_value() == pytest.approx(f + op)  # the answer's latency includes the fold op
    assert r.mapping is not None and r.mapping == fold.mapping  # the folded conv's mapping ...
    assert r.problem == p.summary() and r.key == orig.key  # ... answering the original request
    assert r.validation is not None and r.validation_passed is True
    assert "original (unfolded) conv" in r.validation["reason"]
    assert any("folded chosen" in n for n in r.notes)


def test_the_search_keeps_the_original_when_the_fold_is_dearer(monkeypatch: pytest.MonkeyPatch) -> None:
    """On 8 channels (no alignment padding) the 7x7 stem beats its fold; and the kept original is validated."""
    p, target = stem(8), make_target("wormhole-n150", {})
    r = tune(p, target)
    t = r.transform
    assert t is not None and not t.chosen
    both = transforms.tune_both_forms(p, target).transform
    assert both is not None and both.total_latency is not None and both.original_latency is not None
    assert both.total_latency > both.original_latency and t.original_latency == both.original_latency
    orig = alone(p, target, monkeypatch)
    assert r.point == orig.point and r.best_value() == orig.best_value()
    assert r.mapping is not None and r.mapping == orig.mapping
    assert r.validation is not None and r.validation_passed is True  # validated once chosen
    assert "unfolded" not in str(r.validation.get("reason"))  # the original's own validation


def test_the_3_channel_stem_is_folded_because_ttnn_pads_it_to_8() -> None:
    """Issue #13: a row-major 3-channel conv computes on 8 channels (`shape.padded_in_channels`), so the
    folded 4x4 on 16 channels wins; priced on its real 3 channels it did not."""
    r3 = transforms.tune_both_forms(stem(3), make_target("wormhole-n150", {}))
    r8 = transforms.tune_both_forms(stem(8), make_target("wormhole-n150", {}))
    assert r3.transform is not None and r3.transform.chosen
    assert r8.transform is not None and r3.transform.original_latency == r8.transform.original_latency


def _count_validations(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    import importlib

    validate_mod, folded_mod = importlib.import_module("executor.validate"), importlib.import_module("executor.folded")
    calls = {"original": 0, "folded": 0}
    as_run, folded = validate_mod.validate_as_run, folded_mod.validate_folded

    def count_as_run(*a: Any, **k: Any) -> Any:
        calls["original"] += 1
        return as_run(*a, **k)

    def count_folded(*a: Any, **k: Any) -> Any:
        calls["folded"] += 1
        return folded(*a, **k)

    monkeypatch.setattr(validate_mod, "validate_as_run", count_as_run)
    monkeypatch.setattr(folded_mod, "validate_folded", count_folded)
    return calls


@pytest.mark.parametrize(("case", "expected"), [("folded", {"original": 0, "folded": 1}),
                                                ("original", {"original": 1, "folded": 0})])  # fmt: skip
def test_only_the_chosen_answer_is_validated(
    case: str, expected: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_validations(monkeypatch)
    if case == "folded":
        r = tune(patchify(), make_target("wormhole-n150", IN_L1))
    else:
        r = tune(stem(8), make_target("wormhole-n150", {}))
    assert r.transform is not None and r.transform.chosen == (case == "folded")
    assert calls == expected and r.validation_passed is True
    calls.update(original=0, folded=0)
    tune(patchify(), make_target("wormhole-n150", IN_L1), validate=False)
    assert calls == {"original": 0, "folded": 0}


def test_progress_best_is_the_answers_latency() -> None:
    """While the folded form is searched, `best` is its conv plus the fold op (or the original, if lower)."""
    seen: list[float | None] = []
    r = tune(patchify(), make_target("wormhole-n150", IN_L1), validate=False, progress=lambda d, t, b: seen.append(b))
    final = r.best_value()
    assert r.transform is not None and r.transform.chosen and final is not None
    bests = [b for b in seen if b is not None]
    assert bests and bests[-1] == pytest.approx(final)
    assert min(bests) >= final * (1 - 1e-12)  # no report below the answer (the folded conv alone is)
    assert r.transform.transformed_latency is not None and r.transform.transformed_latency < final
    assert transforms.answer_latency(1.0, 0.5, 1.2) == 1.2 and transforms.answer_latency(1.0, 0.1, None) == 1.1
    assert transforms.answer_latency(None, 0.1, None) is None


@pytest.mark.parametrize(
    ("case", "why"),
    [("trn2", "another family"), ("energy", "another objective"), ("stride1", "nothing to fold")],
)
def test_the_fold_is_not_offered_where_it_is_not_priced(case: str, why: str) -> None:
    p = stem()
    target = get_target("trn2") if case == "trn2" else get_target("wormhole-n150")
    settings = SearchSettings(objectives=("latency", "energy")) if case == "energy" else SearchSettings()
    if case == "stride1":
        p = conv2d(dtype="bf16", padding=3, **STEM)
    assert transforms.fold_candidate(p, target, settings) is None, why
    assert transforms.fold_candidate(stem(), get_target("wormhole-n150"), SearchSettings()) is not None


def test_fold_op_is_priced_from_the_dram_and_l1_figures() -> None:
    """hardware-facts.md §4.1: DRAM 288 GB/s (WH n150) vs 512 GB/s (BH p150); L1 path per core through the port."""
    p = stem()
    fold = fold_of(p)
    wh, bh = make_target("wormhole-n150", {}).hardware, make_target("blackhole-p150", {}).hardware
    # DRAM path: bytes over the chip's DRAM bandwidth, the clock cancels out
    assert transforms.fold_op_seconds(fold, p, wh) / transforms.fold_op_seconds(fold, p, bh) == pytest.approx(512 / 288)
    moved = (fold.input_elements + fold.folded_elements) * 2  # bf16
    assert transforms.fold_op_seconds(fold, p, wh) == pytest.approx(moved / 288e9)
    # L1 path: every core copies its share through its NoC <-> L1 port, far cheaper than DRAM
    l1 = make_target("wormhole-n150", IN_L1).hardware
    assert transforms.fold_op_seconds(fold, p, l1) == pytest.approx(fold.folded_elements * 2 / 64 / 32 / 1e9)
    small = make_target("wormhole-n150", {**IN_L1, "grid_x": 4}).hardware
    assert transforms.fold_op_seconds(fold, p, small) == pytest.approx(2 * transforms.fold_op_seconds(fold, p, l1))


def _folded_mapping(p: Problem, overrides: dict[str, Any]) -> tuple[dict[str, Any], Mapping]:
    q = folded_problem(p)
    r = tune(q, make_target("wormhole-n150", overrides), validate=False)
    assert r.mapping is not None and r.point is not None
    return dict(r.point), r.mapping


@pytest.mark.parametrize("cap", [256 << 20, 3_000_000])
def test_validation_runs_the_folded_mapping_against_the_original(cap: int) -> None:
    p = conv2d(dtype="bf16", stride=2, padding=3, **{**STEM, "batch": 4, "input_height": 40, "input_width": 40})
    point, mapping = _folded_mapping(p, {})
    rep = validate_folded(p, fold_of(p), mapping, memory_cap_bytes=cap)
    assert rep.passed and rep.status == "passed"
    expected = ("halo" if point["memory"] == "l1-sharded" else "full") if cap > 10**8 else "proxy"
    assert rep.method == expected and "original (unfolded) conv" in rep.reason
    assert rep.validated_axes["fh"] == 7 and rep.validated_axes["ci"] == 3  # the ORIGINAL's axes


def test_a_wrong_fold_fails_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proof is about the user's problem: fold the input in the wrong channel order and it fails."""
    p = patchify()
    _, mapping = _folded_mapping(p, IN_L1)
    right = conv_fold.fold_input

    def channel_major(fold: ConvFold, x: np.ndarray) -> np.ndarray:
        out = right(fold, x)
        n, h, w, _, cf = out.shape
        return out.reshape(n, h, w, 1, 16, cf // 16).swapaxes(-1, -2).reshape(out.shape)

    assert validate_folded(p, fold_of(p), mapping).passed
    monkeypatch.setattr(conv_fold, "fold_input", channel_major)
    rep = validate_folded(p, fold_of(p), mapping)
    assert rep.status == "failed" and rep.failing_elements > 0
    r = tune(p, make_target("wormhole-n150", IN_L1))  # the search's own validation fails the same way
    assert r.transform is not None and r.transform.chosen and r.validation_passed is False


def test_lofi_and_block_floats_are_judged_against_the_original() -> None:
    p = patchify("bfloat8_b")
    _, mapping = _folded_mapping(p, {**IN_L1, "fidelities": ["LoFi"]})
    assert mapping.knobs["math_fidelity"] == "LoFi"
    rep = validate_folded(p, fold_of(p), mapping)
    assert rep.passed and "LoFi" in " ".join(rep.notes)


def test_window_problem_is_the_original_restricted_to_an_output_window() -> None:
    p = stem()
    w = window_problem(p, fold_of(p), {"n": 1, "oh": 3, "ow": 5, "co": 8})
    x, wt = random_inputs(p, np.random.default_rng(1))
    full = evaluate(p, [x, wt])
    sub = [x[tuple(slice(0, s) for s in w.shape(w.inputs[0]))], wt[..., :8]]
    assert np.array_equal(evaluate(w, sub), full[:1, :3, :5, :, :8])


def test_the_result_field_survives_json_and_shows_in_the_table() -> None:
    r = tune(patchify(), make_target("wormhole-n150", IN_L1), validate=False)
    back = TuneResult.model_validate_json(r.model_dump_json())
    assert back.transform == r.transform and back.transform is not None and back.transform.chosen
    rows = {str(c) for c in result_table(r).columns[1]._cells}
    assert any(c.startswith("fold: folded chosen") for c in rows)


def test_cli_tune_reports_the_fold() -> None:
    from typer.testing import CliRunner

    from app.cli import app

    conv = "batch=8,in=4,out=128,h=64,w=64,k=4,s=4"
    args = ["tune", "--conv", conv, "--target", "wormhole-n150", "--override", "input_in_l1=true,output_in_l1=true"]
    res = CliRunner().invoke(app, [*args, "--json", "--no-validate"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["transform"]["chosen"] is True and data["transform"]["name"] == "fold"
    table = CliRunner().invoke(app, [*args, "--no-validate"])
    assert "fold: folded chosen" in table.output


def test_the_report_draws_the_folded_conv_it_chose() -> None:
    import report
    from report.tuning import nest_section

    p, target = patchify(), make_target("wormhole-n150", IN_L1)
    r = tune(p, target, validate=False)
    html = report.tune_report(r, p, target)
    assert "fold: folded chosen" in html
    assert nest_section(r, folded_problem(p)) in html and nest_section(r, p) not in html


def test_a_folded_problem_the_target_cannot_run_leaves_the_original(monkeypatch: pytest.MonkeyPatch) -> None:
    from costmodels.protocol import Violation

    p, target = patchify(), make_target("wormhole-n150", IN_L1)
    real = target.supports

    def no_wide_channels(problem: Problem) -> list[Violation]:
        wide = problem.axes["ci"] > 4
        return [Violation(code="test-channels", message="more than 4 input channels")] if wide else real(problem)

    monkeypatch.setattr(target, "supports", no_wide_channels)
    r = tune(p, target, validate=False)
    assert r.transform is None and r.mapping is not None and r.mapping == alone(p, target, monkeypatch).mapping
    assert any(n.startswith("fold not priced") and "more than 4 input channels" in n for n in r.notes)


def test_the_fold_op_price_decides_a_close_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same cheaper-folded conv keeps its original form once the fold op costs more than the fold saves."""
    p, target = patchify(), make_target("wormhole-n150", IN_L1)
    saved = transforms.tune_both_forms(p, target).transform
    assert saved is not None and saved.chosen and saved.original_latency and saved.transformed_latency
    gain = saved.original_latency - saved.transformed_latency
    for op, chosen in ((0.99 * gain, True), (1.01 * gain, False)):
        monkeypatch.setattr(transforms, "fold_op_seconds", lambda *a, op=op: op)
        t = tune(p, target, validate=False).transform
        assert t is not None and t.chosen is chosen and t.transform_latency == op


def strided(ci: int, co: int, k: int) -> Problem:
    """A stride-2 conv of a bottleneck (3x3 padded, or the 1x1 projection)."""
    return conv2d(batch=2, in_channels=ci, out_channels=co, input_height=28, input_width=28, kernel=k, stride=2,
                  padding=k // 2, dtype="bf16")  # fmt: skip


BOUND_CASES: list[tuple[str, Problem, dict[str, Any]]] = [
    ("wormhole-n150", stem(3), {}),
    ("wormhole-n150", stem(8), {}),
    ("wormhole-n150", stem(3), IN_L1),
    ("wormhole-n150", stem(3), {"fidelities": ["LoFi"]}),
    ("wormhole-n150", patchify(), IN_L1),
    ("wormhole-n150", patchify(), {}),
    ("blackhole-p150", stem(3), {}),
    ("wormhole-n150", strided(32, 64, 3), {}),
    ("wormhole-n150", strided(64, 128, 1), IN_L1),
]


def test_bounding_the_second_form_gives_the_full_comparisons_answer() -> None:
    """The search bounded by the first form's answer (`transforms.tune_with_fold`) against both forms searched
    whole: the same form chosen, the same latency and point; each skipped form's bound is at least the answer;
    and both directions occur (a folded form bounded out, an original bounded out)."""
    skipped = {"original": 0, "folded": 0}
    for preset, p, ov in BOUND_CASES:
        target = make_target(preset, ov)
        r, full = tune(p, target, validate=False), transforms.tune_both_forms(p, target)
        t, u = r.transform, full.transform
        assert t is not None and u is not None and u.original_latency is not None and u.transformed_latency
        assert t.chosen == u.chosen and r.best_value() == full.best_value() and r.point == full.point
        answer = r.best_value()
        assert answer is not None
        if t.original_latency is None:
            skipped["original"] += 1
            assert t.chosen and t.original_bound is not None and t.original_bound * (1 + 1e-9) >= answer
        if t.transformed_latency is None:
            skipped["folded"] += 1
            assert not t.chosen and t.transformed_bound is not None
            assert (t.transformed_bound + t.transform_latency) * (1 + 1e-9) >= answer
        assert t.original_latency is not None or t.transformed_latency is not None  # one form is always searched
        # the bounds hold against the forms' optima (searched whole)
        assert t.original_bound is not None and t.original_bound <= u.original_latency * (1 + 1e-9)
        assert t.transformed_bound is not None and t.transformed_bound <= u.transformed_latency * (1 + 1e-9)
    assert skipped["original"] >= 1 and skipped["folded"] >= 1


def test_a_bound_tripped_by_hand_changes_which_form_is_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    """A zero bound (nothing provable) makes the search price both forms, as before the bounding."""
    p, target = stem(3), make_target("wormhole-n150", {})
    monkeypatch.setattr(transforms, "form_bound_seconds", lambda *a: 0.0)
    t = tune(p, target, validate=False).transform
    assert t is not None and t.original_latency is not None and t.transformed_latency is not None
