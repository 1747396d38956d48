"""/v1/models: upload an ONNX model or a layer list; parse it, or create the network's tuning job in one request."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from onnx import helper

from app.api.routes.models import LAYER_LIST_EXAMPLE, LAYER_LIST_YAML
from app.jobs.worker import Worker
from app.main import create_app
from app.settings import Settings
from tests.workload.onnx_models import FLOAT, model

ONNX = {"content-type": "application/onnx"}


def tiny_onnx() -> bytes:
    """conv (stride 2) -> Relu -> MatMul, a dynamic batch."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((4, 10)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["y"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["z"], name="fc"),
    ]
    return model(nodes, [("x", FLOAT, ["N", 3, 8, 8])], [("z", FLOAT, ["N", 8, 4, 10])], {"w": w, "w2": w2})


def test_parse_returns_the_layers_and_the_skipped_operators(client: TestClient) -> None:
    r = client.post("/v1/models/layers?param=N=3&name=mine", content=tiny_onnx(), headers=ONNX)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["name"] == "mine" and body["params"] == {"N": 3} and body["skipped_counts"] == {"Relu": 1}
    conv, fc = body["layers"]
    assert (conv["node"], conv["problem"]["kind"], conv["problem"]["batch"]) == ("conv1", "conv2d", 3)
    assert fc["problem"]["sizes"] == {"b0": 3, "b1": 8, "m": 4, "k": 4, "n": 10}
    # a layer is a problem spec the other routes take as it is
    a = client.post("/v1/problems/analyze", json=conv["problem"])
    assert a.status_code == 200 and a.json()["macs"] == 3 * 4 * 4 * 9 * 3 * 8


@pytest.mark.parametrize("ctype", ["application/json", "application/yaml"])
def test_a_layer_list_in_json_or_yaml_gives_the_same_answer(client: TestClient, ctype: str) -> None:
    data = json.dumps(LAYER_LIST_EXAMPLE) if ctype == "application/json" else LAYER_LIST_YAML
    r = client.post("/v1/models/layers", content=data.encode(), headers={"content-type": ctype})
    assert r.status_code == 200, r.text
    assert r.json()["name"] == "my-net" and [x["node"] for x in r.json()["layers"]] == ["conv2_x", "bmm"]


@pytest.mark.parametrize(
    ("query", "content", "headers", "status", "needle"),
    [
        ("", tiny_onnx(), ONNX, 422, "dynamic dimension 'N' (of input 'x') is not given"),
        ("?param=N", tiny_onnx(), ONNX, 422, "param 'N' is not name=size"),
        ("?param=N=2&param=T=3", tiny_onnx(), ONNX, 422, "no dynamic dimension 'T'"),
        ("?param=N=2", b"\x08\x07not onnx\xff", ONNX, 422, "not an ONNX model"),
        ("", b"name: x\nlayers: [", {"content-type": "application/yaml"}, 422, "not valid JSON or YAML"),
        ("?param=N=2", b"[]", {"content-type": "application/json"}, 422, "param and op go with an ONNX model"),
        ("", b"abc", {"content-type": "text/plain"}, 415, "neither an ONNX model nor a layer list"),
        ("", b"abc", {}, 415, "neither an ONNX model nor a layer list"),
    ],
    ids=["missing-dim", "bad-param", "unknown-dim", "not-onnx", "bad-yaml", "param-on-list", "text", "no-type"],
)
def test_bad_uploads_are_problem_details_naming_what_is_wrong(
    client: TestClient, query: str, content: bytes, headers: dict[str, str], status: int, needle: str
) -> None:
    for route in ("/v1/models/layers", "/v1/models/tunings"):
        sep = "&" if "?" in query else "?"
        url = route + query + (f"{sep}target=trn2" if route.endswith("tunings") else "")
        r = client.post(url, content=content, headers=headers)
        assert r.status_code == status, (route, r.text)
        assert r.headers["content-type"] == "application/problem+json" and needle in r.json()["detail"]
        assert r.json().get("hint")


def test_the_upload_size_has_its_own_limit_declared_or_streamed(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", max_body_bytes=1024, max_model_bytes=4096)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        ok = c.post("/v1/models/layers?param=N=1", content=tiny_onnx(), headers=ONNX)  # over 1024, under 4096
        assert len(tiny_onnx()) > 1024 and ok.status_code == 200, ok.text
        big = c.post("/v1/models/layers", content=b"\0" * 5000, headers=ONNX)
        assert big.status_code == 413 and "TM_MAX_MODEL_BYTES" in big.json()["hint"]

        def chunks() -> Iterator[bytes]:
            yield from (b"\0" * 1000 for _ in range(6))

        streamed = c.post("/v1/models/layers", content=chunks(), headers=ONNX)
        assert streamed.status_code == 413
        other = c.post("/v1/problems/analyze", content=b" " * 2000, headers={"content-type": "application/json"})
        assert other.status_code == 413 and "TM_MAX_BODY_BYTES" in other.json()["hint"]


def test_one_request_from_file_to_a_finished_workload_job(client: TestClient, running_worker: Worker) -> None:
    r = client.post("/v1/models/tunings?target=trn2&param=N=2", content=tiny_onnx(), headers=ONNX)
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["kind"] == "workload" and r.headers["location"] == f"/v1/tunings/{job['id']}"
    assert job["summary"].startswith("tiny on trn2")
    again = client.post("/v1/models/tunings?target=trn2&param=N=2", content=tiny_onnx(), headers=ONNX)
    assert again.status_code == 200 and again.json()["id"] == job["id"]  # identical request: the same job
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = client.get(f"/v1/tunings/{job['id']}").json()["state"]
        if state in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.2)
    assert state == "succeeded"
    result = client.get(f"/v1/tunings/{job['id']}/result").json()
    assert result["workload"] == "tiny" and [x["label"] for x in result["layers"]] == ["tiny/conv1", "tiny/fc"]
    assert all(x["validation_passed"] for x in result["results"].values())
    # and its pictures: the report page of the same job (issue #15's one request from file to answer)
    page = client.get(f"/v1/tunings/{job['id']}/report")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "tiny/conv1" in page.text and "tiny/fc" in page.text and "<svg" in page.text


def test_a_model_a_target_cannot_run_whole_names_the_layer(client: TestClient) -> None:
    nodes = [helper.make_node("ReduceMax", ["x"], ["y"], name="pool", axes=[1], keepdims=0)]
    data = model(nodes, [("x", FLOAT, [4, 16])], [("y", FLOAT, [4])])
    r = client.post("/v1/models/tunings?target=trn2", content=data, headers=ONNX)
    assert r.status_code == 422 and "layer tiny/pool: trn2 cannot run" in r.json()["detail"]
    none = client.post("/v1/models/tunings?target=trn2&op=Conv", content=data, headers=ONNX)
    assert none.status_code == 422 and "no layer to tune (skipped: ReduceMax x1)" in none.json()["detail"]


def test_the_console_examples_answer(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()["paths"]
    target = spec["/v1/models/tunings"]["post"]["parameters"][0]
    assert target["name"] == "target"
    targets = next(iter(target["examples"].values()))["value"]
    for ctype in ("application/json", "application/yaml"):
        for path in ("/v1/models/layers", "/v1/models/tunings"):
            (example,) = spec[path]["post"]["requestBody"]["content"][ctype]["examples"].values()
            value = example["value"]
            data = json.dumps(value) if ctype == "application/json" else value
            r = client.post(path, params={"target": targets} if path.endswith("tunings") else {},
                            content=data.encode(), headers={"content-type": ctype})  # fmt: skip
            assert r.status_code in ((200,) if path.endswith("layers") else (200, 202)), (path, ctype, r.text)


def test_dtype_replaces_the_declared_input_dtypes_or_names_a_bad_one(client: TestClient) -> None:
    r = client.post("/v1/models/layers?param=N=2&dtype=bfloat8_b", content=tiny_onnx(), headers=ONNX)
    assert r.status_code == 200, r.text
    conv, fc = r.json()["layers"]
    assert conv["problem"]["dtype"] == "bfloat8_b" and conv["problem"]["weights_dtype"] is None
    assert fc["problem"]["dtype"] == "bfloat8_b" and fc["problem"]["out_dtype"] is None
    assert any("the model declares f32" in n for n in conv["notes"])
    bad = client.post("/v1/models/layers?param=N=2&dtype=bf17", content=tiny_onnx(), headers=ONNX)
    assert bad.status_code == 422 and "bf17" in bad.text
