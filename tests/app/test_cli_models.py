"""``mapper tune --onnx`` and ``--layers``: a network of one's own, tuned and validated like a named workload."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from onnx import helper
from optuna.storages import InMemoryStorage
from typer.testing import CliRunner

import app.cli.common
import mapper.cache
from app.cli import app as cli
from app.client import ApiClient
from app.jobs.worker import Worker
from mapper.display import fmt
from tests.workload.onnx_models import FLOAT, model

runner = CliRunner()


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapper.cache, "_memory", InMemoryStorage())


def _one_error_line(output: str) -> str:
    lines = [x for x in output.strip().splitlines() if x.strip()]
    assert lines and lines[-1].startswith("error: ") and "Traceback" not in output, output
    return lines[-1]


@pytest.fixture
def tiny_onnx(tmp_path: Path) -> Path:
    """conv (stride 2, pads 1) -> Relu -> ReduceMean over H, W -> MatMul, with a dynamic batch."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((8, 10)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["y"], ["r"]),
        helper.make_node("ReduceMean", ["r"], ["p"], axes=[2, 3], keepdims=0),
        helper.make_node("MatMul", ["p", "w2"], ["z"], name="fc"),
    ]
    path = tmp_path / "tiny.onnx"
    path.write_bytes(
        model(nodes, [("x", FLOAT, ["batch", 3, 8, 8])], [("z", FLOAT, ["batch", 10])], {"w": w, "w2": w2})
    )
    return path


def test_an_onnx_model_is_tuned_and_validated_layer_by_layer(tiny_onnx: Path) -> None:
    res = runner.invoke(
        cli, ["tune", "--onnx", str(tiny_onnx), "--param", "batch=2", "--target", "ascend-910b", "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["workload"] == "tiny" and out["complete"]
    assert [lay["label"] for lay in out["layers"]] == ["tiny/conv1", "tiny/ReduceMean_2", "tiny/fc"]
    assert all(lay["feasible"] for lay in out["layers"])
    assert all(r["validation_passed"] is True for r in out["results"].values())
    conv = next(r for r in out["results"].values() if r["problem"].startswith("X[n, oh:2 + fh"))
    assert "n=2 oh=4 ow=4" in conv["problem"]  # the batch given at import, the output size of the file's conv
    assert "skipped Relu x1" in res.stderr


def test_a_layer_the_target_cannot_run_is_named_and_op_leaves_it_out(tiny_onnx: Path) -> None:
    base = ["tune", "--onnx", str(tiny_onnx), "--param", "batch=2", "--target", "trn2"]
    res = runner.invoke(cli, base)
    assert res.exit_code == 2
    line = _one_error_line(res.output)
    assert "layer tiny/ReduceMean_2: trn2 cannot run" in line and "--op" in line
    ok = runner.invoke(cli, [*base, "--op", "Conv,MatMul", "--json", "--no-validate"])
    assert ok.exit_code == 0, ok.output
    assert [lay["label"] for lay in json.loads(ok.stdout)["layers"]] == ["tiny/conv1", "tiny/fc"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ([], "dynamic dimension 'batch' (of input 'x') is not given"),
        (["--param", "batch=2", "--param", "seq=3"], "no dynamic dimension 'seq'"),
        (["--param", "batch=two"], "batch='two' is not an integer"),
        (["--param", "batch=2", "--op", "Relu"], "operator 'Relu' is not one the import turns into problems"),
    ],
)
def test_onnx_errors_are_one_line_with_code_2(tiny_onnx: Path, extra: list[str], needle: str) -> None:
    res = runner.invoke(cli, ["tune", "--onnx", str(tiny_onnx), *extra, "--target", "ascend-910b"])
    assert res.exit_code == 2
    assert needle in _one_error_line(res.output)


def test_a_malformed_or_missing_model_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07not a model\xff\xff")
    res = runner.invoke(cli, ["tune", "--onnx", str(bad), "--target", "trn2"])
    assert res.exit_code == 2 and "not an ONNX model" in _one_error_line(res.output)
    res = runner.invoke(cli, ["tune", "--onnx", str(tmp_path / "none.onnx"), "--target", "trn2"])
    assert res.exit_code == 2 and "cannot read" in _one_error_line(res.output)


def test_a_layer_list_gives_the_same_kind_of_answer(tmp_path: Path) -> None:
    path = tmp_path / "net.yaml"
    path.write_text(
        "name: net\nlayers:\n"
        "  - {label: fc1, expr: 'mk,kn->mn', sizes: {m: 16, k: 64, n: 32}, weight: 1}\n"
        "  - {label: fc2, expr: 'mk,kn->mn', sizes: {m: 16, k: 64, n: 32}, weight: 1}\n"
    )
    res = runner.invoke(cli, ["tune", "--layers", str(path), "--target", "trn2", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["workload"] == "net" and [lay["label"] for lay in out["layers"]] == ["net/fc1", "net/fc2"]
    assert out["distinct"] == 1 and out["layers"][1]["duplicate_of"] == 0
    res = runner.invoke(cli, ["tune", "--layers", str(path), "--param", "batch=2", "--target", "trn2"])
    assert res.exit_code == 2 and "--param and --op go with --onnx" in _one_error_line(res.output)


def test_a_network_with_two_objectives_shows_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each layer's second objective at its mapping (the front's first point) and its front size, and the totals."""
    monkeypatch.delenv("COLUMNS", raising=False)  # (the piped width: a row on one line)
    path = tmp_path / "net.yaml"
    path.write_text(
        "name: net\nlayers:\n"
        "  - {label: fc1, expr: 'mk,kn->mn', sizes: {m: 16, k: 64, n: 32}, weight: 1}\n"
        "  - {label: fc2, expr: 'mk,kn->mn', sizes: {m: 48, k: 32, n: 64}, weight: 1}\n"
    )
    args = ["tune", "--layers", str(path), "--target", "trn2", "--objective", "latency", "--objective", "energy"]
    out = json.loads(runner.invoke(cli, [*args, "--json", "--no-validate"]).stdout)
    res = runner.invoke(cli, [*args, "--no-validate"])
    assert res.exit_code == 0, res.output
    rows = [line.replace("│", " ").split() for line in res.stdout.splitlines() if "net/fc" in line]
    header = next(line for line in res.stdout.splitlines() if "latency" in line and "energy" in line and "┃" in line)
    assert [c.strip() for c in header.split("┃")[3:6]] == ["latency", "energy", "front"], header
    results = [out["results"][lay["problem_hash"]] for lay in out["layers"]]
    for row, r in zip(rows, results, strict=True):
        assert fmt(r["values"]["energy"], "pJ").split() == row[4:6] and row[6] == str(len(r["pareto"])), row
    total = sum(r["values"]["energy"] for r in results)
    assert f"energy at those mappings {fmt(total, 'pJ')}" in " ".join(res.stdout.split())


def test_an_onnx_model_on_the_server_is_one_workload_job(
    tiny_onnx: Path, client: TestClient, running_worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app.cli.common, "make_client", lambda url, token=None: ApiClient(url, http=client, token=token))
    args = ["tune", "--onnx", str(tiny_onnx), "--param", "batch=2", "--op", "Conv,MatMul", "--target", "trn2"]
    res = runner.invoke(cli, [*args, "--json", "--server", "http://testserver"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["workload"] == "tiny" and [lay["label"] for lay in out["layers"]] == ["tiny/conv1", "tiny/fc"]
    assert all(r["validation_passed"] for r in out["results"].values()) and out["layer_workers"]


def test_a_problem_file_with_several_problems_is_one_network_job_on_the_server(
    tmp_path: Path, client: TestClient, running_worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app.cli.common, "make_client", lambda url, token=None: ApiClient(url, http=client, token=token))
    path = tmp_path / "two.json"
    two = [{"expr": "mk,kn->mn", "sizes": {"m": 16, "k": 32, "n": n}, "label": f"fc{n}"} for n in (8, 16)]
    path.write_text(json.dumps(two))
    res = runner.invoke(
        cli, ["tune", "--file", str(path), "--target", "trn2", "--json", "--server", "http://testserver"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["workload"] == "two.json" and [lay["label"] for lay in out["layers"]] == ["fc8", "fc16"]


def test_dtype_replaces_every_layers_declared_inputs(tiny_onnx: Path) -> None:
    """An f32 export tuned as bf16: --dtype goes to every layer; without it the file's f32 stays."""
    base = ["tune", "--onnx", str(tiny_onnx), "--param", "batch=2", "--target", "ascend-910b", "--json"]
    base += ["--no-validate", "--op", "Conv", "--op", "MatMul"]
    runs = {}
    for extra in ([], ["--dtype", "bf16"]):
        res = runner.invoke(cli, [*base, *extra])
        assert res.exit_code == 0, res.output
        runs[bool(extra)] = [r["problem"] for r in json.loads(res.stdout)["results"].values()]
    assert len(runs[True]) == len(runs[False]) == 2
    assert all("bf16" in p and "f32[" not in p.split("->")[0] for p in runs[True]), runs[True]
    assert all("f32" in p and "bf16" not in p for p in runs[False]), runs[False]
    # an unknown dtype is a one-line usage error
    res = runner.invoke(cli, [*base, "--dtype", "bf17"])
    assert res.exit_code == 2 and "bf17" in _one_error_line(res.output)
