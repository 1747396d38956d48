"""`mapper tune ... --html FILE`: the report written in-process and fetched from a service."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from optuna.storages import InMemoryStorage
from typer.testing import CliRunner

import app.cli.common
import mapper.cache
from app.cli import app as cli
from app.client import ApiClient
from app.jobs.worker import Worker
from tests.report.html_parts import parse, svgs

runner = CliRunner()
MATMUL = ["--einsum", "mk,kn->mn", "--size", "m=64", "--size", "k=64", "--size", "n=64", "--weight", "1"]


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapper.cache, "_memory", InMemoryStorage())


def test_tune_writes_the_report_of_its_result(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    res = runner.invoke(cli, ["tune", *MATMUL, "--target", "wormhole-n150", "--html", str(out), "--json"])
    assert res.exit_code == 0, res.output
    html = out.read_text()
    doc = parse(html)
    assert doc.summary()["target"] == "wormhole-n150 (tenstorrent)"
    assert {"summary", "roofline", "nest", "cores"} <= set(doc.sections)
    assert f"report written to {out}" in res.stderr
    assert res.stdout.lstrip().startswith("{")  # standard output still carries only the result


def test_a_workload_file_of_several_problems_gets_a_workload_report(tmp_path: Path) -> None:
    problems = tmp_path / "layers.yaml"
    problems.write_text(
        "- {kind: einsum, expr: 'mk,kn->mn', sizes: {m: 64, k: 64, n: 64}, label: a}\n"
        "- {kind: einsum, expr: 'mk,kn->mn', sizes: {m: 32, k: 128, n: 64}, label: b}\n"
    )
    out = tmp_path / "w.html"
    res = runner.invoke(
        cli, ["tune", "--file", str(problems), "--target", "trn2", "--workers", "1", "--html", str(out)]
    )
    assert res.exit_code == 0, res.output
    doc = parse(out.read_text())
    assert [row[1] for row in doc.table("layers").rows[1:]] == ["a", "b"]


def test_a_report_path_in_a_missing_folder_is_refused_before_searching(tmp_path: Path) -> None:
    res = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--html", str(tmp_path / "no" / "r.html")])
    assert res.exit_code == 2
    lines = [x for x in res.output.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --html") and "does not exist" in lines[0]


def test_with_a_server_the_report_is_the_services_page(
    client: TestClient, running_worker: Worker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(app.cli.common, "make_client", lambda url, token=None: ApiClient(url, http=client, token=token))
    out = tmp_path / "remote.html"
    res = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--server", "http://testserver", "--html", str(out)])
    assert res.exit_code == 0, res.output
    html = out.read_text()
    job_id = next(x.split()[1] for x in res.stderr.splitlines() if x.startswith("job "))
    assert html == client.get(f"/v1/tunings/{job_id}/report").text
    assert "nest" in svgs(html) and not re.search(r"https?://", html)
