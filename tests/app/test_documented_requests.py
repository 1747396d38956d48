"""The OpenAPI document says what a request may hold as far as JSON Schema can, and the service agrees with it.

A fuzzer (schemathesis' `positive_data_acceptance`) sends schema-valid requests and expects them accepted: the names
of targets, objectives and workloads are the document's enums, output dtypes leave out the block floats, and the
rules across a tuning's fields (one source, one of target and targets, params with a workload, ...) are in the
schema. Each rule here is tried both ways: the document and the service accept or reject the same body.
A problem may leave out ``kind`` where its fields tell it, on every route, as the CLI's problem files may.
"""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from costmodels.registry import get_target, target_names
from mapper.settings import OBJECTIVES
from workload import dtypes, named
from workload.spec import spec_from_dict

GEMM = {"expr": "mk,kn->mn", "sizes": {"m": 64, "k": 64, "n": 64}}  # (no kind: the expr tells it)
CONV = {"in_channels": 8, "out_channels": 8, "input_height": 8, "input_width": 8, "kernel": 3}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return create_app(Settings()).openapi()


def validator(document: dict[str, Any], name: str) -> jsonschema_rs.Draft202012Validator:
    """A validator of the document's component schema `name` (its references resolved in the document; the
    validator schemathesis itself uses)."""
    return jsonschema_rs.Draft202012Validator(
        {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    )


def test_names_are_the_documents_enums(document: dict[str, Any]) -> None:
    props = document["components"]["schemas"]["TuningRequest"]["properties"]
    assert props["target"]["anyOf"][0]["enum"] == list(target_names())
    assert props["targets"]["anyOf"][0]["items"]["enum"] == list(target_names())
    assert props["targets"]["uniqueItems"] is True
    assert props["objectives"]["items"]["enum"] == list(OBJECTIVES) and props["objectives"]["uniqueItems"] is True
    assert props["workload"]["anyOf"][0]["enum"] == named.names()
    assert document["components"]["schemas"]["EvaluateRequest"]["properties"]["target"]["enum"] == list(target_names())
    query = {p["name"]: p["schema"] for p in document["paths"]["/v1/models/tunings"]["post"]["parameters"]}
    assert query["target"]["items"]["enum"] == list(target_names())
    assert query["objective"]["items"]["enum"] == list(OBJECTIVES)


def test_dtypes_are_documented_and_outputs_leave_out_block_floats(document: dict[str, Any]) -> None:
    einsum = document["components"]["schemas"]["EinsumSpec"]["properties"]
    conv = document["components"]["schemas"]["Conv2dSpec"]["properties"]
    inputs, outputs = set(conv["dtype"]["enum"]), set(conv["out_dtype"]["anyOf"][0]["enum"])
    assert inputs == set(dtypes.ALIASES) and {"bfloat8_b", "bfloat4_b", "fp16", "bf16"} <= inputs
    assert outputs == {a for a in inputs if not dtypes.is_block(a)} and {"bfloat8_b", "bfloat4_b"}.isdisjoint(outputs)
    assert set(einsum["out_dtype"]["anyOf"][0]["enum"]) == outputs
    assert set(einsum["dtype"]["anyOf"][0]["enum"]) == inputs
    assert set(einsum["dtype"]["anyOf"][1]["additionalProperties"]["enum"]) == inputs
    assert einsum["expr"]["minLength"] == 1
    workload_query = {p["name"]: p["schema"] for p in document["paths"]["/v1/workloads/{name}"]["get"]["parameters"]}
    assert "bfloat4_b" in workload_query["dtype"]["enum"] and "bfloat4_b" not in workload_query["out_dtype"]["enum"]


#: tuning bodies and whether they are valid: each rule across fields, kept and broken
TUNINGS: list[tuple[str, dict[str, Any], bool]] = [
    ("a problem on a target", {"problem": GEMM, "target": "trn2"}, True),
    ("a workload on two targets", {"workload": "resnet50", "targets": ["trn2", "rngd"]}, True),
    ("layers with a name", {"layers": [GEMM, CONV], "name": "mine", "target": "rngd"}, True),
    (
        "a workload's layer and params",
        {"workload": "resnet50", "layer": 3, "params": {"batch": 2}, "target": "trn1"},
        True,
    ),
    ("null counts as left out", {"problem": GEMM, "workload": None, "target": "trn2", "targets": None}, True),
    ("study workers", {"problem": GEMM, "target": "trn2", "study_workers": 2, "strategy": "tpe"}, True),
    ("a problem and a workload", {"problem": GEMM, "workload": "resnet50", "target": "trn2"}, False),
    ("no source", {"target": "trn2"}, False),
    ("target and targets", {"problem": GEMM, "target": "trn2", "targets": ["trn2"]}, False),
    ("no target", {"problem": GEMM}, False),
    ("params without a workload", {"problem": GEMM, "target": "trn2", "params": {"batch": 2}}, False),
    ("a name without layers", {"problem": GEMM, "target": "trn2", "name": "mine"}, False),
    ("a layer of one problem", {"problem": GEMM, "target": "trn2", "layer": 0}, False),
    ("study workers with auto", {"problem": GEMM, "target": "trn2", "study_workers": 2}, False),
    (
        "study workers on a workload",
        {"workload": "resnet50", "target": "trn2", "study_workers": 2, "strategy": "tpe"},
        False,
    ),
    (
        "study workers, two objectives",
        {
            "problem": GEMM,
            "target": "trn2",
            "study_workers": 2,
            "strategy": "tpe",
            "objectives": ["latency", "energy"],
        },
        False,
    ),
    ("a target twice", {"problem": GEMM, "targets": ["trn2", "trn2"]}, False),
    ("an objective twice", {"problem": GEMM, "target": "trn2", "objectives": ["latency", "latency"]}, False),
    ("an unknown target", {"problem": GEMM, "target": "tpu"}, False),
    ("an unknown objective", {"problem": GEMM, "target": "trn2", "objectives": ["power"]}, False),
    ("an unknown workload", {"workload": "vgg", "target": "trn2"}, False),
    (
        "a block-float output",
        {"problem": {**GEMM, "dtype": "bfloat8_b", "out_dtype": "bfloat8_b"}, "target": "trn2"},
        False,
    ),
]


@pytest.mark.parametrize(("case", "body", "valid"), TUNINGS, ids=[c for c, _, _ in TUNINGS])
def test_the_document_and_the_service_agree_on_a_tuning(
    document: dict[str, Any], client: TestClient, case: str, body: dict[str, Any], valid: bool
) -> None:
    errors = list(validator(document, "TuningRequest").iter_errors(body))
    assert (not errors) == valid, f"{case}: {[e.message for e in errors]}"
    r = client.post("/v1/tunings", json={**body, "seconds": 1, "validate": False})
    assert (r.status_code in (200, 201, 202)) == valid, f"{case}: {r.status_code} {r.text[:300]}"
    if not valid:
        assert r.status_code == 422 and r.json()["detail"]


@pytest.mark.parametrize(
    ("given", "valid"),
    [(("point",), True), (("mapping",), True), (("point", "mapping"), False), ((), False), (("nulls",), False)],
)
def test_the_document_says_exactly_one_of_point_and_mapping(
    document: dict[str, Any], client: TestClient, given: tuple[str, ...], valid: bool
) -> None:
    problem = spec_from_dict(GEMM).to_problem()
    point = get_target("trn2").warm_starts(problem)[0]
    mapping = client.post("/v1/mappings/evaluate", json={"problem": GEMM, "target": "trn2", "point": point}).json()
    parts = {"point": point, "mapping": mapping["mapping"], "nulls": None}
    body = {"problem": GEMM, "target": "trn2", **{k: parts[k] for k in given if k != "nulls"}}
    if "nulls" in given:
        body |= {"point": None, "mapping": None}
    assert validator(document, "EvaluateRequest").is_valid(body) == valid
    r = client.post("/v1/mappings/evaluate", json=body)
    if valid:
        assert r.status_code == 200 and r.json()["feasible"], r.text
    else:
        assert r.status_code == 422 and "exactly one of point or mapping" in r.json()["detail"]


@pytest.mark.parametrize("spec", [GEMM, CONV], ids=["einsum", "conv2d"])
def test_a_problem_without_kind_is_read_by_its_fields_on_every_route(client: TestClient, spec: dict[str, Any]) -> None:
    analyzed = client.post("/v1/problems/analyze", json=spec)
    assert analyzed.status_code == 200, analyzed.text
    assert analyzed.json()["kind"] == ("einsum" if "expr" in spec else "conv2d")
    evaluated = client.post("/v1/mappings/evaluate", json={"problem": spec, "target": "trn2", "point": {}})
    assert evaluated.status_code == 422 and "point" in evaluated.json()["detail"]  # the problem read; the point not
    for body in ({"problem": spec, "target": "trn2"}, {"layers": [spec, GEMM], "target": "trn2"}):
        r = client.post("/v1/tunings", json={**body, "seconds": 1})
        assert r.status_code == 202, r.text


@pytest.mark.parametrize("spec", [{"kind": "matmul", **GEMM}, {"sizes": {"m": 4}}, {"kind": 3}], ids=str)
def test_a_problem_whose_kind_cannot_be_told_is_a_422_that_says_how(client: TestClient, spec: dict[str, Any]) -> None:
    for path, body in (("/v1/problems/analyze", spec), ("/v1/tunings", {"problem": spec, "target": "trn2"})):
        r = client.post(path, json=body)
        assert r.status_code == 422, r.text
        assert "kind must be 'einsum' or 'conv2d'" in r.json()["detail"]
        assert r.json()["hint"] == "set kind to 'einsum' or 'conv2d'"
