"""``mapper ... --server``: the same command against the service, here the app in-process.

`app.cli.common.make_client` is swapped for an `ApiClient` over FastAPI's `TestClient` (an
`httpx.Client`), and a `Worker` runs the jobs in a thread or, where a test wants a job to stay
queued, not at all.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from optuna.storages import InMemoryStorage
from typer.testing import CliRunner

import app.cli
import app.cli.common
import mapper.cache
from app.cli import app as cli
from app.client import ApiClient, parse_sse
from app.jobs.worker import Worker
from app.settings import Settings

runner = CliRunner()
VALIDATE = importlib.import_module("executor.validate")  # the module (the package exports a function of its name)
SERVER = ["--server", "http://testserver"]
MATMUL = ["--einsum", "mk,kn->mn", "--size", "m=64", "--size", "k=64", "--size", "n=64", "--weight", "1"]


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapper.cache, "_memory", InMemoryStorage())


@pytest.fixture
def api(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    """The CLI's --server requests go to the in-process app."""
    monkeypatch.setattr(app.cli.common, "make_client", lambda url, token=None: ApiClient(url, http=client, token=token))
    return client


def _worker(client: TestClient, settings: Settings) -> Worker:
    return Worker(settings, store=client.app.state.store)  # type: ignore[attr-defined]


@pytest.fixture
def worker(api: TestClient, running_worker: Worker) -> Worker:
    """A worker taking the in-process app's jobs while the CLI talks to it."""
    return running_worker


def _job_id(stderr: str) -> str:
    line = next(x for x in stderr.splitlines() if x.startswith("job "))
    return line.split()[1]


def test_tune_on_the_server_prints_what_in_process_prints(worker: Worker) -> None:
    remote = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--json", *SERVER])
    assert remote.exit_code == 0, remote.output
    local = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--json"])
    a, b = json.loads(remote.stdout), json.loads(local.stdout)
    for key in ("problem_hash", "target", "values", "point", "proven_optimal", "validation_passed"):
        assert a[key] == b[key], key
    assert _job_id(remote.stderr)


def test_a_comparison_on_the_server_has_one_row_per_target(worker: Worker) -> None:
    res = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--target", "rngd", "--json", *SERVER])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert [r["target"] for r in rows] == ["trn2", "rngd"] and all(r["result"]["mapping"] for r in rows)
    table = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2,rngd", *SERVER])
    assert table.exit_code == 0 and "│ rngd" in table.output


def test_a_bad_problem_is_the_servers_detail_and_hint_on_one_line(api: TestClient) -> None:
    res = runner.invoke(cli, ["tune", "--einsum", "mk,kn->", "--size", "m=4", "--target", "trn2", *SERVER])
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "(at 'k')" in lines[0] and ": add" in lines[0]
    res = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--objective", "speed", *SERVER])
    assert res.exit_code == 2 and res.output.startswith("error: ")


def test_failed_validation_on_the_server_exits_3(worker: Worker, monkeypatch: pytest.MonkeyPatch) -> None:
    real = VALIDATE.validate

    def failing(*args: Any, **kwargs: Any) -> Any:
        return real(*args, **kwargs).model_copy(update={"passed": False, "status": "failed", "failing_elements": 1})

    monkeypatch.setattr(VALIDATE, "validate", failing)
    res = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--json", *SERVER])
    assert res.exit_code == 3, res.output
    assert json.loads(res.stdout)["validation_passed"] is False and "validation failed" in res.stderr


def test_no_feasible_mapping_on_the_server_exits_3(worker: Worker) -> None:
    conv = ["--conv", "batch=1,in=64,out=64,h=8,w=8,k=3,s=1,p=1", "--target", "wormhole-n150", "--no-validate"]
    res = runner.invoke(cli, ["tune", *conv, "--override", "l1_kib=64,l1_reserved_kib=60", *SERVER])
    assert res.exit_code == 3, res.output
    assert "no feasible mapping" in res.stderr


def test_a_failed_job_exits_3_with_its_error(worker: Worker, monkeypatch: pytest.MonkeyPatch) -> None:
    import app.jobs.worker

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("the engine broke")

    monkeypatch.setattr(app.jobs.worker, "execute", broken)
    res = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", *SERVER])
    assert res.exit_code == 3, res.output
    assert "failed: RuntimeError: the engine broke" in res.stderr and "Traceback" not in res.output


def test_detach_status_then_watch_to_the_end(api: TestClient, settings: Settings) -> None:
    sub = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--detach", *SERVER])
    assert sub.exit_code == 0, sub.output
    job_id = sub.stdout.strip()
    st = runner.invoke(cli, ["status", job_id, *SERVER])
    assert st.exit_code == 0 and f"job {job_id}: queued" in st.stdout
    listed = runner.invoke(cli, ["status", "--json", *SERVER])
    assert job_id in {j["id"] for j in json.loads(listed.stdout)["items"]}
    assert _worker(api, settings).run_once() is not None
    res = runner.invoke(cli, ["watch", job_id, "--json", *SERVER])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["target"] == "trn2" and f"job {job_id} succeeded" in res.stderr
    st = runner.invoke(cli, ["status", job_id, "--json", *SERVER])
    assert json.loads(st.stdout)["state"] == "succeeded"


def test_wait_running_out_exits_5_naming_the_job_that_keeps_running(api: TestClient) -> None:
    res = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--wait", "0.3", *SERVER])
    assert res.exit_code == 5, res.output
    job_id = _job_id(res.stderr)
    assert f"job {job_id} is still queued" in res.stderr and "keeps running" in res.stderr
    assert api.get(f"/v1/tunings/{job_id}").json()["state"] == "queued"


def test_cancel_then_watch_exits_4_and_a_second_cancel_is_refused(api: TestClient) -> None:
    job_id = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--detach", *SERVER]).stdout.strip()
    res = runner.invoke(cli, ["cancel", job_id, *SERVER])
    assert res.exit_code == 0 and "cancel requested" in res.stdout, res.output
    watched = runner.invoke(cli, ["watch", job_id, *SERVER])
    assert watched.exit_code == 4, watched.output
    again = runner.invoke(cli, ["cancel", job_id, *SERVER])
    assert again.exit_code == 2 and again.output.startswith("error: ") and len(again.output.splitlines()) == 1


def test_an_unknown_job_is_one_line_with_code_2(api: TestClient) -> None:
    for command in (["status", "nope"], ["watch", "nope"], ["cancel", "nope"]):
        res = runner.invoke(cli, [*command, *SERVER])
        assert res.exit_code == 2 and res.output.startswith("error: ") and len(res.output.splitlines()) == 1
        # the CLI's way to list jobs, not the API's
        assert "list jobs with `mapper status --server http://testserver`" in res.output, res.output
        assert "GET /v1/tunings" not in res.output


def test_baseline_gate_works_against_the_server(worker: Worker, tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    assert runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--write-baseline", str(base)]).exit_code == 0
    res = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--baseline", str(base), *SERVER])
    assert res.exit_code == 0 and "1 compared, 0 regressed" in res.stderr, res.output
    data = json.loads(base.read_text())
    for entry in data["entries"]["trn2"].values():
        entry["value"] *= 0.9
    base.write_text(json.dumps(data))
    res = runner.invoke(cli, ["tune", *MATMUL, "--target", "trn2", "--baseline", str(base), *SERVER])
    assert res.exit_code == 6 and "regression: trn2" in res.stderr, res.output


def test_server_comes_from_tm_server_and_lists_come_from_the_api(api: TestClient) -> None:
    res = runner.invoke(cli, ["targets", "--json"], env={"TM_SERVER": "http://testserver"})
    assert res.exit_code == 0, res.output
    assert "trn2" in res.stdout
    for command in (["targets"], ["workloads"], ["workloads", "--json"]):
        res = runner.invoke(cli, [*command, *SERVER])
        assert res.exit_code == 0, res.output


def test_an_unreachable_server_is_one_line_with_its_url() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    for command in (["tune", *MATMUL, "--target", "trn2"], ["status", "x"], ["targets"]):
        res = runner.invoke(cli, [*command, "--server", url])
        assert res.exit_code == 2, res.output
        assert res.output.startswith(f"error: cannot reach the server at {url}") and len(res.output.splitlines()) == 1


def test_in_process_flags_are_refused_with_a_server() -> None:
    res = runner.invoke(cli, ["tune", *MATMUL, "--storage", "x.log", *SERVER])
    assert res.exit_code == 2 and "--storage and --workers apply in-process" in res.output


def test_serve_and_worker_build_settings_from_the_environment_and_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    import app.jobs.worker
    import app.server

    seen: dict[str, Any] = {}
    monkeypatch.setattr(app.server, "serve", lambda s, open_browser=True: seen.update(s=s, browser=open_browser))
    monkeypatch.setattr(app.jobs.worker, "run_worker", lambda s: seen.update(w=s))
    env = {"TM_HOST": "0.0.0.0", "TM_PORT": "9100", "TM_WORKERS": "3"}
    res = runner.invoke(cli, ["serve", "--port", "9200", "--no-browser"], env=env)
    assert res.exit_code == 0, res.output
    s = seen["s"]
    assert (s.host, s.port, s.workers, seen["browser"]) == ("0.0.0.0", 9200, 3, False)
    res = runner.invoke(cli, ["worker", "--storage", "sqlite:///jobs.db"], env=env)
    assert res.exit_code == 0 and seen["w"].storage == "sqlite:///jobs.db"
    bad = runner.invoke(cli, ["serve", "--workers", "999"])
    assert bad.exit_code == 2 and bad.output.startswith("error: invalid workers")


def test_python_m_app_is_mapper_serve() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "app", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert res.returncode == 0, res.stderr
    assert all(flag in res.stdout for flag in ("--host", "--port", "--no-browser", "--storage", "--workers"))


def test_parse_sse_reads_named_json_events_and_skips_comments() -> None:
    lines = ["event: progress", 'data: {"done": 1}', "", ": keep-alive", "", "event: end", "data: {}", "data: ", ""]
    events = list(parse_sse(iter(lines)))
    assert events[0] == ("progress", {"done": 1}) and events[1][0] == "end" and len(events) == 2


def test_a_service_with_tokens_wants_one_from_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.main import create_app

    settings = Settings(data_dir=tmp_path / "data", api_tokens="s3cret", poll_seconds=0.05)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        monkeypatch.setattr(
            app.cli.common, "make_client", lambda url, token=None: ApiClient(url, http=client, token=token)
        )
        args = ["tune", *MATMUL, "--target", "trn2", "--detach", *SERVER]
        refused = runner.invoke(cli, args)
        assert refused.exit_code == 2 and "bearer token" in refused.output and len(refused.output.splitlines()) == 1
        wrong = runner.invoke(cli, [*args, "--token", "guess"])
        assert wrong.exit_code == 2 and "guess" not in wrong.output
        ok = runner.invoke(cli, args, env={"TM_TOKEN": "s3cret"})
        assert ok.exit_code == 0, ok.output
        assert runner.invoke(cli, ["cancel", ok.stdout.strip(), "--token", "s3cret", *SERVER]).exit_code == 0


def test_a_workload_on_the_server_says_searched_as_in_process_does(worker: Worker) -> None:
    """On a fresh database the workload job's layer jobs search every layer: none is shown cached."""
    args = ["tune", "--workload", "bert-base", "--param", "batch=1", "--param", "seq_len=64", "--target", "trn2"]
    remote = runner.invoke(cli, [*args, "--no-validate", *SERVER])
    assert remote.exit_code == 0, remote.output
    assert "cached" not in remote.stdout and "5 distinct, 5 searched" in remote.stdout, remote.stdout
    assert "; 0.00 s" not in remote.stdout
