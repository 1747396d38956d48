"""``mapper tune --baseline/--write-baseline``: the regression gate of CI jobs (exit code 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from optuna.storages import InMemoryStorage
from typer.testing import CliRunner

import mapper.cache
from app import baseline as bl
from app.cli import app
from mapper.display import fmt

runner = CliRunner()
MATMUL = ["--einsum", "mk,kn->mn", "--size", "m=64", "--size", "k=64", "--size", "n=64", "--weight", "1"]
LAYERS = (
    "- {kind: einsum, expr: 'mk,kn->mn', sizes: {m: 64, k: 64, n: 64}, weight: 1, label: first}\n"
    "- {kind: einsum, expr: 'mk,kn->mn', sizes: {m: 64, k: 128, n: 64}, weight: 1, label: second}\n"
    "- {kind: einsum, expr: 'mk,kn->mn', sizes: {m: 64, k: 64, n: 64}, weight: 1, label: first-again}\n"
)


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapper.cache, "_memory", InMemoryStorage())


def _tamper(path: Path, factor: float, target: str | None = None, label: str | None = None) -> dict[str, Any]:
    """Scale the recorded values (of one target / one label) by `factor`; the tampered entries."""
    data = json.loads(path.read_text())
    changed = {}
    for t, by_hash in data["entries"].items():
        for h, entry in by_hash.items():
            if (target is None or t == target) and (label is None or entry["label"].startswith(label)):
                entry["value"] *= factor
                changed[h] = entry
    path.write_text(json.dumps(data))
    return changed


def test_round_trip_equal_is_0_and_ten_percent_better_baseline_is_6(tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--json", "--write-baseline", str(base)])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    data = json.loads(base.read_text())
    assert data["format"] == bl.FORMAT
    entry = data["entries"]["trn2"][result["problem_hash"]]
    assert entry == {"label": result["problem"], "objective": "latency", "value": result["values"]["latency"]}

    same = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--baseline", str(base)])
    assert same.exit_code == 0, same.output
    assert "1 compared, 0 regressed" in same.stderr

    _tamper(base, 0.9)
    worse = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--baseline", str(base), "--tolerance", "2%"])
    assert worse.exit_code == 6, worse.output
    line = next(x for x in worse.stderr.splitlines() if x.startswith("regression:"))
    v = result["values"]["latency"]
    assert "trn2" in line and "m=64 k=64 n=64" in line and "+11.1%" in line
    assert f"{fmt(v, 's')} > baseline {fmt(v * 0.9, 's')}" in line and fmt(v, "s").endswith(" ns")
    loose = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--baseline", str(base), "--tolerance", "0.2"])
    assert loose.exit_code == 0, loose.output


def test_layers_are_compared_one_by_one_and_the_regressed_one_is_named(tmp_path: Path) -> None:
    f, base = tmp_path / "layers.yaml", tmp_path / "baseline.json"
    f.write_text(LAYERS)
    args = ["tune", "--file", str(f), "--target", "trn2", "--workers", "1"]
    assert runner.invoke(app, [*args, "--write-baseline", str(base)]).exit_code == 0
    entries = json.loads(base.read_text())["entries"]["trn2"]
    assert sorted(e["label"] for e in entries.values()) == ["first, first-again", "second"]  # identical layers once
    assert runner.invoke(app, [*args, "--baseline", str(base)]).exit_code == 0
    _tamper(base, 0.9, label="second")
    res = runner.invoke(app, [*args, "--baseline", str(base), "--json"])
    assert res.exit_code == 6, res.output
    regressions = [x for x in res.stderr.splitlines() if x.startswith("regression:")]
    assert len(regressions) == 1 and "trn2 second:" in regressions[0]
    assert json.loads(res.stdout)["workload"] == "layers.yaml"  # stdout stays the result


def test_comparison_rows_are_compared_per_target_and_missing_entries_are_not_regressions(tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    assert runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--write-baseline", str(base)]).exit_code == 0
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2,rngd", "--baseline", str(base)])
    assert res.exit_code == 0, res.output
    assert "not in baseline: rngd" in res.stderr and "1 compared, 0 regressed" in res.stderr
    assert runner.invoke(app, ["tune", *MATMUL, "--target", "rngd", "--write-baseline", str(base)]).exit_code == 0
    assert set(json.loads(base.read_text())["entries"]) == {"trn2", "rngd"}  # writing merges
    _tamper(base, 0.5, target="rngd")
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2,rngd", "--baseline", str(base)])
    assert res.exit_code == 6, res.output
    assert [x.split(":")[1].split()[0] for x in res.stderr.splitlines() if x.startswith("regression:")] == ["rngd"]


def test_another_objective_is_reported_not_compared(tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    assert runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--write-baseline", str(base)]).exit_code == 0
    _tamper(base, 0.01)
    footprint = ["--objective", "footprint", "--seconds", "2"]  # no floor: the budget ends the search
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", *footprint, "--baseline", str(base)])
    assert res.exit_code == 0, res.output
    assert "not compared" in res.stderr


def test_the_file_is_stable_and_written_the_same_twice(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b, b):
        assert (
            runner.invoke(app, ["tune", *MATMUL, "--target", "trn2,rngd", "--write-baseline", str(path)]).exit_code == 0
        )
    assert a.read_bytes() == b.read_bytes() and a.read_text().endswith("}\n")
    text = a.read_text()
    assert text.index('"entries"') < text.index('"format"') and text.index('"rngd"') < text.index('"trn2"')


def test_a_failure_outranks_a_regression(tmp_path: Path) -> None:
    conv = ["--conv", "batch=1,in=64,out=64,h=8,w=8,k=3,s=1,p=1", "--target", "wormhole-n150"]
    base = tmp_path / "baseline.json"
    assert runner.invoke(app, ["tune", *conv, "--write-baseline", str(base)]).exit_code == 0
    res = runner.invoke(app, ["tune", *conv, "--override", "l1_kib=64,l1_reserved_kib=60", "--baseline", str(base)])
    assert res.exit_code == 3, res.output  # no feasible mapping (3) beats the regression (6) it also is


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "does not exist: record one with --write-baseline"),
        ("not json", "is not a JSON baseline file"),
        ('{"format": "something-else", "entries": {}}', "is not a tensormapper-baseline/1 file"),
        ('{"format": "tensormapper-baseline/1", "entries": {"trn2": {"x": {"value": "fast"}}}}', "no numeric value"),
    ],
)
def test_a_bad_baseline_file_is_one_line_with_code_2(tmp_path: Path, content: str | None, needle: str) -> None:
    base = tmp_path / "baseline.json"
    if content is not None:
        base.write_text(content)
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--json", "--baseline", str(base)])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr and "Traceback" not in res.output


@pytest.mark.parametrize(("text", "value"), [("2%", 0.02), ("0.02", 0.02), ("0", 0.0), ("150%", 1.5), (" 5 % ", 0.05)])
def test_tolerance_takes_a_percentage_or_a_fraction(text: str, value: float) -> None:
    assert bl.parse_tolerance(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["5", "-1%", "fast", "nan", "1"])
def test_tolerance_rejects_what_it_cannot_read_unambiguously(text: str) -> None:
    with pytest.raises(bl.BaselineError):
        bl.parse_tolerance(text)
