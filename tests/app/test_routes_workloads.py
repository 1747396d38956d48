"""GET /v1/workloads and /v1/workloads/{name}: cross-checked against workload.named."""

from __future__ import annotations

from fastapi.testclient import TestClient

from workload import named
from workload.canonical import content_hash
from workload.spec import problem_from_dict

PROBLEM_JSON = "application/problem+json"


def test_list_matches_the_catalog(client: TestClient) -> None:
    r = client.get("/v1/workloads")
    assert r.status_code == 200
    rows = r.json()
    assert [row["name"] for row in rows] == named.names()
    for row in rows:
        problems = named.load(row["name"])
        assert row["layer_count"] == len(problems)
        assert row["total_macs"] == named.total_macs(problems)
        assert row["description"] and row["source"]
        params = {p["name"]: p for p in row["parameters"]}
        assert params["batch"] == {
            "name": "batch",
            "type": "integer",
            "default": 1,
            "min": 1,
            "max": 65536,
            "description": params["batch"]["description"],
        }
        assert params["dtype"]["default"] == "bf16" and params["dtype"]["type"] == "dtype"
    resnet = next(row for row in rows if row["name"] == "resnet50")
    assert resnet["layer_count"] == 53


def test_layers_are_problem_specs_that_round_trip(client: TestClient) -> None:
    r = client.get("/v1/workloads/resnet50", params={"batch": 16})
    assert r.status_code == 200
    body = r.json()
    problems = named.load("resnet50", batch=16)
    assert body["params"] == {"batch": 16, "dtype": "bf16", "weights_dtype": "bf16", "out_dtype": "bf16"}
    assert body["total_macs"] == named.total_macs(problems)
    assert len(body["layers"]) == len(problems) == 53
    assert body["distinct_layers"] == len({content_hash(q) for q in problems})
    for layer, q in zip(body["layers"], problems, strict=True):
        assert layer["label"] == q.label and layer["macs"] == q.macs
        rebuilt = problem_from_dict(layer["problem"])
        assert rebuilt == q
        assert layer["content_hash"] == content_hash(q) == content_hash(rebuilt)
    # a client can POST a layer straight back
    first = body["layers"][0]
    a = client.post("/v1/problems/analyze", json=first["problem"])
    assert a.status_code == 200
    assert a.json()["content_hash"] == first["content_hash"]
    assert a.json()["macs"] == first["macs"]


def test_workload_specific_and_dtype_parameters(client: TestClient) -> None:
    r = client.get("/v1/workloads/llama7b-decode", params={"context": 1024, "dtype": "fp16", "out_dtype": "f32"})
    assert r.status_code == 200
    body = r.json()
    assert body["params"] == {"batch": 1, "context": 1024, "dtype": "f16", "weights_dtype": "f16", "out_dtype": "f32"}
    problems = named.load("llama7b-decode", context=1024, dtype="f16", out_dtype="f32")
    assert [x["content_hash"] for x in body["layers"]] == [content_hash(q) for q in problems]
    scores = next(x for x in body["layers"] if x["label"].endswith("attn.scores"))
    assert scores["problem"]["sizes"]["t"] == 1024
    assert scores["problem"]["dtype"] == {"A": "f16", "B": "f16"} and scores["problem"]["out_dtype"] == "f32"


def test_unknown_parameter_is_422_naming_it(client: TestClient) -> None:
    r = client.get("/v1/workloads/resnet50", params={"seq_len": 128})
    assert r.status_code == 422
    assert r.headers["content-type"].startswith(PROBLEM_JSON)
    body = r.json()
    assert body["token"] == "seq_len" and "seq_len" in body["detail"]
    assert "batch" in body["hint"]


def test_out_of_range_and_malformed_values_are_422_naming_the_parameter(client: TestClient) -> None:
    r = client.get("/v1/workloads/bert-base", params={"seq_len": 4096})
    assert r.status_code == 422
    assert r.json()["token"] == "seq_len" and "out of range" in r.json()["detail"]
    r = client.get("/v1/workloads/bert-base", params={"batch": "lots"})
    assert r.status_code == 422
    assert r.headers["content-type"].startswith(PROBLEM_JSON)
    assert "batch" in r.json()["detail"]
    r = client.get("/v1/workloads/bert-base", params={"batch": 0})
    assert r.status_code == 422 and "batch" in r.json()["detail"]
    r = client.get("/v1/workloads/bert-base", params={"dtype": "f64"})
    assert r.status_code == 422 and r.json()["token"] == "f64"
    r = client.get("/v1/workloads/bert-base?seq_len=64&seq_len=128")
    assert r.status_code == 422 and r.json()["field"] == "seq_len"
    r = client.get("/v1/workloads/bert-base", params={"context": "x"})
    assert r.status_code == 422 and r.json()["token"] == "context"


def test_unknown_workload_is_404(client: TestClient) -> None:
    r = client.get("/v1/workloads/gpt-5")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith(PROBLEM_JSON)
    assert "gpt-5" in r.json()["detail"] and "resnet50" in r.json()["detail"]
    assert r.json()["known"] == named.names()
