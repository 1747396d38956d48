"""GET /v1/targets and /v1/targets/{name}: cross-checked against the registry, the presets and supports()."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from costmodels.presets import preset_family, preset_sources
from costmodels.registry import get_target, target_names
from workload.einsum import einsum
from workload.problem import MAX_AXES, MAX_AXIS_SIZE, MAX_COEFF

PROBLEM_JSON = "application/problem+json"


def test_list_names_families_objectives_and_key_figures(client: TestClient) -> None:
    r = client.get("/v1/targets")
    assert r.status_code == 200
    rows = r.json()
    assert [row["name"] for row in rows] == target_names()
    for row in rows:
        t = get_target(row["name"])
        assert row["family"] == preset_family(row["name"]) == t.family
        assert row["objectives"] == list(t.objectives)
        hw = t.hardware.model_dump()
        numeric = {k: v for k, v in hw.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        assert row["key_figures"] == numeric
        assert row["links"]["self"] == f"/v1/targets/{row['name']}"


def test_supported_dtypes_are_what_supports_accepts(client: TestClient) -> None:
    rows = {row["name"]: row for row in client.get("/v1/targets").json()}
    for name, row in rows.items():
        t = get_target(name)
        for dtype in ("i4", "i8", "i32", "f8e4m3", "f8e5m2", "bf16", "f16", "f32"):
            mm = einsum("mk,kn->mn", {"m": 128, "k": 128, "n": 128}, dtype=dtype, weight=1)
            assert (dtype in row["supported"]["contraction"]["dtypes"]) == (not t.supports(mm)), (name, dtype)
            red = einsum("ij->i", {"i": 64, "j": 256}, dtype=dtype)
            assert (dtype in row["supported"]["reduction"]["dtypes"]) == (not t.supports(red)), (name, dtype)
    # the README's facts, as the probe sees them
    assert "f32" not in rows["rngd"]["supported"]["contraction"]["dtypes"]
    assert "i4" in rows["rngd"]["supported"]["contraction"]["dtypes"]
    assert "f8e4m3" in rows["ascend-a5"]["supported"]["contraction"]["dtypes"]
    assert "f8e4m3" not in rows["ascend-910b"]["supported"]["contraction"]["dtypes"]
    assert "mul" in rows["ascend-a5"]["supported"]["reduction"]["reduce_ops"]
    assert rows["trn2"]["supported"]["reduction"] == {"dtypes": [], "reduce_ops": []}


@pytest.mark.parametrize("name", ["rngd", "trn2", "ascend-a5", "wormhole-n150"])
def test_detail_lists_every_overridable_field_with_its_default(client: TestClient, name: str) -> None:
    r = client.get(f"/v1/targets/{name}")
    assert r.status_code == 200
    body = r.json()
    t = get_target(name)
    hw = t.hardware.model_dump(mode="json")
    assert body["hardware"] == hw
    assert [f["name"] for f in body["overrides"]] == list(type(t.hardware).model_fields)
    for f in body["overrides"]:
        assert f["default"] == hw[f["name"]]
        assert f["type"] and isinstance(f["json_schema"], dict)
    assert body["sources"] == preset_sources(name)
    assert body["limits"]["max_axis_size"] == MAX_AXIS_SIZE
    assert body["limits"]["max_axes"] == MAX_AXES
    assert body["limits"]["max_coefficient"] == MAX_COEFF
    # the listed defaults are accepted back as overrides
    defaults = {f["name"]: f["default"] for f in body["overrides"]}
    assert get_target(name, defaults).hardware == t.hardware


def test_override_types_are_readable(client: TestClient) -> None:
    fields = {f["name"]: f for f in client.get("/v1/targets/rngd").json()["overrides"]}
    assert fields["slices_per_cluster"]["type"] == "integer"
    assert fields["input_dtypes"]["type"] == "array of string"
    assert fields["reducer_latency"]["type"] == "object of integer"
    tt = {f["name"]: f for f in client.get("/v1/targets/wormhole-n150").json()["overrides"]}
    assert "HiFi4" in tt["fidelities"]["type"]
    assert tt["bf16_accumulation"]["description"]


def test_unknown_target_is_404_naming_the_known_ones(client: TestClient) -> None:
    r = client.get("/v1/targets/tpu-v9")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith(PROBLEM_JSON)
    body = r.json()
    assert "tpu-v9" in body["detail"] and "rngd" in body["detail"]
    assert body["known"] == target_names()
