"""`mapper mutants`: broken copies of the tuned mapping must each fail validation; one that passes exits 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import executor.mutations
from app.cli import app

runner = CliRunner()


@pytest.fixture
def problem_file(tmp_path: Path) -> Path:
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 64, "k": 96, "n": 32}}))
    return p


def test_every_mutant_of_the_tuned_mapping_is_caught(problem_file: Path) -> None:
    res = runner.invoke(app, ["mutants", str(problem_file), "--target", "trn2", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert {r["mutant"] for r in rows} >= {"drop a tile", "repeat a reduction tile", "bf16 accumulator"}
    assert all(r["caught"] and r["status"] == "failed" for r in rows)


def test_a_mutant_that_is_not_broken_exits_3(problem_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor.mutations, "drop_tile", lambda problem, mapping: mapping)  # "broken" = unchanged
    res = runner.invoke(app, ["mutants", str(problem_file), "--target", "trn2"])
    assert res.exit_code == 3 and "MISSED  drop a tile" in res.stdout
