"""The ``mapper`` console command (typer CliRunner), searching the fake target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_mapper_fake_target import fake_target
from typer.testing import CliRunner

import mapper.cache
from mapper.cli import app

runner = CliRunner()
MATMUL = ["--einsum", "mk,kn->mn", "--size", "m=256", "--size", "k=512", "--size", "n=128", "--weight", "1"]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapper.cache, "default_factory", fake_target)


def test_tune_json(fake: None) -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "fake", "--json", "--no-validate"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["proven_optimal"] and data["stop_reason"] == "enumerated" and data["target"] == "fake"
    assert data["mapping"]["levels"][0]["name"] == "dram"


def test_tune_table_shows_facts_and_dump(fake: None) -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "fake", "--no-validate", "--strategy", "tpe"])
    assert res.exit_code == 0, res.output
    assert "proven optimal" in res.output and "gap to bound" in res.output and "dram:" in res.output


def test_tune_from_yaml_file_and_several_objectives(fake: None, tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("kind: einsum\nexpr: mk,kn->mn\nsizes: {m: 128, k: 256, n: 128}\nweight: 1\n")
    args = ["tune", "--file", str(f), "--target", "fake", "--objective", "latency", "--objective", "footprint"]
    res = runner.invoke(app, [*args, "--json", "--no-validate"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["objectives"] == ["latency", "footprint"] and len(data["pareto"]) >= 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--target", "fake", "--objective", "energy"], "no energy model"),
        (["--target", "fake", "--strategy", "magic"], "strategy"),
        (["--target", "fake", "--override", "sram_bytes"], "not name=value"),
    ],
)
def test_errors_are_one_line_with_code_2(fake: None, args: list[str], needle: str) -> None:
    res = runner.invoke(app, ["tune", *MATMUL, *args])
    assert res.exit_code == 2, res.output
    assert needle in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_unknown_target_is_one_line_with_code_2() -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "no-such-target"])
    assert res.exit_code == 2 and "unknown target" in res.output and "Traceback" not in res.output


def test_conv_flags_reach_the_target(fake: None) -> None:
    res = runner.invoke(app, ["tune", "--conv", "batch=1,in=8,out=8,h=8,w=8,k=3,s=1,p=1", "--target", "fake"])
    assert res.exit_code == 2 and "cannot run this problem" in res.output  # the fake runs matmuls only


def test_bad_einsum_and_missing_problem() -> None:
    res = runner.invoke(app, ["tune", "--einsum", "mk,kn->", "--size", "m=4", "--target", "fake"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    res = runner.invoke(app, ["tune", "--target", "fake"])
    assert res.exit_code == 2 and "exactly one of" in res.output


def test_targets_and_workloads_list() -> None:
    res = runner.invoke(app, ["targets", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert {"rngd", "wormhole-n150"} <= {r["target"] for r in rows} and all(r["family"] for r in rows)
    res = runner.invoke(app, ["workloads", "--json"])
    assert res.exit_code == 0, res.output
    assert "resnet50" in {r["workload"] for r in json.loads(res.output)}


def test_patience_flag_reaches_the_settings(fake: None) -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "fake", "--patience", "0", "--json", "--no-validate"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["settings"]["patience"] == 0
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "fake", "--patience", "-1"])
    assert res.exit_code == 2 and "patience" in res.output
