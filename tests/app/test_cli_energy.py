"""Issue #15 through the CLI: ``--objective energy`` (alone or with latency: a Pareto front) and
dotted energy overrides (a bad one: one line, exit 2)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from app.cli import app
from mapper.display import fmt

runner = CliRunner()
MATMUL = ["--einsum", "mk,kn->mn", "--size", "m=64", "--size", "k=64", "--size", "n=64", "--weight", "1"]


def test_latency_and_energy_give_a_front_and_an_override_changes_the_energy() -> None:
    # two objectives on trn2's 162 M points: no floor on energy bounds a structure out, so the budget ends it
    args = ["tune", *MATMUL, "--target", "trn2", "--objective", "latency", "--objective", "energy", "--seconds", "2"]
    args += ["--json"]
    res = runner.invoke(app, [*args, "--no-validate"])
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["pareto"] and all(set(p["values"]) == {"latency", "energy"} for p in body["pareto"])
    assert body["cost"]["energy_pj"] == body["values"]["energy"]
    assert sum(body["cost"]["energy_breakdown"].values()) == pytest.approx(body["cost"]["energy_pj"], rel=1e-12)
    one = ["tune", *MATMUL, "--target", "trn2", "--objective", "energy", "--seconds", "2", "--json", "--no-validate"]
    cheap = json.loads(runner.invoke(app, one).stdout)["values"]["energy"]
    dear = json.loads(runner.invoke(app, [*one, "--override", "energy.byte_pj.hbm=480"]).stdout)["values"]["energy"]
    assert dear > cheap


def test_a_bad_energy_override_is_one_line_and_exit_2() -> None:
    res = runner.invoke(app, ["tune", *MATMUL, "--target", "trn2", "--override", "energy.byte_pj.hbm=-5"])
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "energy.byte_pj.hbm" in lines[0]


def test_energy_is_shown_in_joules_with_a_prefix() -> None:
    assert fmt(65.77e6, "pJ") == "65.77 uJ" and fmt(2.5e12, "pJ") == "2.5 J" and fmt(12.0, "pJ") == "12 pJ"
    assert fmt(4.2e3, "pJ") == "4.2 nJ" and fmt(3.1e9, "pJ") == "3.1 mJ"
