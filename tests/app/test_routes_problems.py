"""POST /v1/problems/analyze: facts and roofline bounds cross-checked against the engine; bad input is a 4xx."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from costmodels.registry import get_target, target_names
from workload.canonical import canonical_form, content_hash
from workload.problem import MAX_AXIS_SIZE
from workload.spec import problem_from_dict

PROBLEM_JSON = "application/problem+json"

BMM = {"kind": "einsum", "expr": "vmk,vnk->vmn", "sizes": {"v": 4, "m": 64, "n": 48, "k": 96}, "weight": 1}
CONV = {
    "kind": "conv2d",
    "batch": 1,
    "in_channels": 32,
    "out_channels": 64,
    "input_height": 28,
    "input_width": 28,
    "kernel": 3,
    "stride": 2,
    "padding": 1,
    "dtype": "i8",
}
ROWPROD = {"kind": "einsum", "expr": "ij->i", "sizes": {"i": 64, "j": 256}, "dtype": "f32", "reduce_op": "mul"}


def _analyze(client: TestClient, body: Any) -> dict[str, Any]:
    r = client.post("/v1/problems/analyze", json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.mark.parametrize("spec", [BMM, CONV, ROWPROD], ids=["bmm", "conv", "rowprod"])
def test_facts_match_the_engine(client: TestClient, spec: dict[str, Any]) -> None:
    body = _analyze(client, spec)
    p = problem_from_dict(spec)
    assert body["kind"] == spec["kind"]
    assert body["content_hash"] == content_hash(p)
    assert body["canonical"] == canonical_form(p)
    assert body["macs"] == p.macs
    assert body["summary"] == p.summary()
    assert body["min_bytes"] == p.min_bytes
    assert [(a["name"], a["size"]) for a in body["axes"]] == list(p.axes.items())
    assert {a["name"] for a in body["axes"] if a["role"] == "reduced"} == set(p.reduction_axes)
    assert [o["name"] for o in body["operands"]] == [o.name for o in p.operands]
    for o, op in zip(body["operands"], p.operands, strict=True):
        assert o["bytes"] == p.operand_bytes(op)
        assert o["dtype"] == op.dtype
        assert o["shape"] == list(p.shape(op))
    assert body["operands"][-1]["role"] == "output"
    # the structured einsum form builds the same problem
    assert content_hash(problem_from_dict(body["einsum"])) == body["content_hash"]


@pytest.mark.parametrize("spec", [BMM, CONV, ROWPROD], ids=["bmm", "conv", "rowprod"])
def test_bounds_on_every_target_equal_lower_bound_or_supports(client: TestClient, spec: dict[str, Any]) -> None:
    body = _analyze(client, spec)
    p = problem_from_dict(spec)
    assert [t["target"] for t in body["targets"]] == target_names()
    for row in body["targets"]:
        t = get_target(row["target"])
        violations = t.supports(p)
        assert row["supported"] == (not violations)
        assert [v["code"] for v in row["violations"]] == [v.code for v in violations]
        if violations:
            assert row["lower_bound"] is None
            continue
        lb = t.lower_bound(p)
        got = row["lower_bound"]
        assert got["cycles"] == lb.cycles
        assert got["compute_cycles"] == lb.compute_cycles
        assert got["memory_cycles"] == lb.memory_cycles
        assert got["reason"] == lb.reason
        assert got["seconds"] > 0


def test_rowprod_runs_on_ascend_only(client: TestClient) -> None:
    rows = {r["target"]: r for r in _analyze(client, ROWPROD)["targets"]}
    assert rows["ascend-a5"]["supported"] and rows["ascend-910b"]["supported"]
    assert not rows["rngd"]["supported"] and rows["rngd"]["violations"]


def test_equivalent_problems_share_the_hash(client: TestClient) -> None:
    renamed = {
        "kind": "einsum",
        "expr": "L[batch, row, red], R[batch, col, red] -> O[batch, row, col]",
        "sizes": {"batch": 4, "row": 64, "col": 48, "red": 96},
        "weight": "R",
        "label": "same thing",
    }
    assert _analyze(client, renamed)["content_hash"] == _analyze(client, BMM)["content_hash"]


def _problem_detail(r: Any) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith(PROBLEM_JSON)
    body: dict[str, Any] = r.json()
    assert body["detail"] and "Traceback" not in r.text
    return body


def test_bad_einsum_token_is_named(client: TestClient) -> None:
    body = _problem_detail(client.post("/v1/problems/analyze", json={**BMM, "expr": "vmk,vn1->vmn"}))
    assert body["token"] == "1"
    assert body["hint"]


def test_axis_over_the_limit_is_rejected_with_the_limit(client: TestClient) -> None:
    spec = {**BMM, "sizes": {**BMM["sizes"], "k": MAX_AXIS_SIZE + 1}}
    body = _problem_detail(client.post("/v1/problems/analyze", json=spec))
    assert str(MAX_AXIS_SIZE) in body["detail"] and body["token"] == "k"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({**BMM, "sizes": {"v": 4, "m": "64", "n": 48, "k": 96}}, "sizes"),
        ({**BMM, "kind": "matmul"}, "kind"),
        ({**BMM, "colour": "red"}, "colour"),
        ({k: v for k, v in CONV.items() if k != "in_channels"}, "in_channels"),
        ({**BMM, "dtype": "f64"}, "f64"),
        ([1, 2, 3], "body"),
    ],
    ids=["string-size", "unknown-kind", "unknown-field", "missing-field", "unknown-dtype", "not-an-object"],
)
def test_malformed_problems_name_the_field(client: TestClient, body: Any, named: str) -> None:
    out = _problem_detail(client.post("/v1/problems/analyze", json=body))
    assert named in out["detail"] or named == out.get("token") or named == out.get("field")


def test_malformed_json_is_a_problem_detail(client: TestClient) -> None:
    r = client.post(
        "/v1/problems/analyze", content=b'{"kind": "einsum", "expr": ', headers={"content-type": "application/json"}
    )
    out = _problem_detail(r)
    assert "JSON" in out["detail"] or "json" in out["hint"]


def test_the_services_own_limits_apply_and_are_listed(settings: Settings) -> None:
    tight = settings.model_copy(update={"max_axis_size": 64, "max_axes": 3})
    with TestClient(create_app(tight), raise_server_exceptions=False) as c:
        body = _problem_detail(c.post("/v1/problems/analyze", json=BMM))
        assert body["limit"] == "tm_max_axes" and "TM_MAX_AXES" in body["hint"]
        gemm = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 64, "k": 96, "n": 8}}
        body = _problem_detail(c.post("/v1/problems/analyze", json=gemm))
        assert body["limit"] == "tm_max_axis_size" and body["field"] == "problem.sizes.k"
        limits = c.get("/v1/targets/trn2").json()["limits"]
        assert limits["max_axis_size"] == 64 and limits["max_axes"] == 3


BF8_CONV = {**CONV, "dtype": "bfloat8_b", "weights_dtype": "bfloat4_b"}


def test_block_float_inputs_run_on_tenstorrent_only(client: TestClient) -> None:
    body = _analyze(client, BF8_CONV)
    assert [o["dtype"] for o in body["operands"]] == ["bfloat8_b", "bfloat4_b", "f32"]
    p = problem_from_dict(BF8_CONV)
    assert body["operands"][0]["bytes"] == p.operand_bytes(p.inputs[0]) == 28 * 28 * 32 * 1088 / 1024
    rows = {r["target"]: r for r in body["targets"]}
    assert rows["wormhole-n150"]["supported"] and rows["blackhole-p150"]["supported"]
    refused = rows["trn2"]["violations"]
    assert refused and all("wormhole-n150" in v["message"] for v in refused)
    targets = {r["name"]: r for r in client.get("/v1/targets").json()}
    assert "bfloat8_b" in targets["wormhole-n150"]["supported"]["contraction"]["dtypes"]
    assert "bfloat8_b" not in targets["trn2"]["supported"]["contraction"]["dtypes"]


def test_a_block_float_output_is_a_422_with_a_fix(client: TestClient) -> None:
    body = _problem_detail(client.post("/v1/problems/analyze", json={**BF8_CONV, "out_dtype": "bfloat8_b"}))
    assert "block-float" in body["detail"] and "bf16" in body["hint"]
