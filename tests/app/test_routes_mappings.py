"""POST /v1/mappings/evaluate and /v1/mappings/validate, cross-checked against the targets and the executor;
every OpenAPI example of the engine routes answers 200."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import validation_run
from app.api.routes import mappings as mappings_route
from app.main import create_app
from app.settings import Settings
from bench.published_configs import tt
from costmodels.ir import Level, Loop, Mapping
from costmodels.registry import get_target
from executor.validate import ValidationTooLarge, validate
from workload.canonical import content_hash
from workload.spec import problem_from_dict

PROBLEM_JSON = "application/problem+json"

BMM = {"kind": "einsum", "expr": "vmk,vnk->vmn", "sizes": {"v": 4, "m": 128, "n": 128, "k": 256}, "weight": 1}
GEMM = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 256, "k": 512, "n": 256}, "weight": 1}
ROWPROD = {"kind": "einsum", "expr": "ij->i", "sizes": {"i": 64, "j": 256}, "dtype": "f32", "reduce_op": "mul"}


def _warm(target: str, spec: dict[str, Any], overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first feasible warm start of `spec` on `target`."""
    t, p = get_target(target, overrides), problem_from_dict(spec)
    return next(dict(w) for w in t.warm_starts(p) if not t.check(p, t.mapping(p, w)))


def _unprocessable(r: Any) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith(PROBLEM_JSON)
    body: dict[str, Any] = r.json()
    assert body["detail"] and "Traceback" not in r.text
    return body


# ---- evaluate ------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["rngd", "trn2", "ascend-910b", "blackhole-p150"])
def test_point_costs_what_the_target_says(client: TestClient, target: str) -> None:
    point = _warm(target, GEMM)
    r = client.post("/v1/mappings/evaluate", json={"problem": GEMM, "target": target, "point": point})
    assert r.status_code == 200, r.text
    body = r.json()
    t, p = get_target(target), problem_from_dict(GEMM)
    m = t.mapping(p, point)
    cost = t.cost(p, m)
    assert body["feasible"] is True and body["violations"] == []
    assert body["point"] == point
    assert Mapping.model_validate(body["mapping"]) == m
    assert body["cost"]["cycles"] == cost.cycles
    assert body["cost"]["seconds"] == pytest.approx(cost.seconds)
    assert body["cost"]["bytes"] == cost.bytes
    assert body["gap"] == pytest.approx(cost.gap)
    assert body["lower_bound"]["cycles"] == t.lower_bound(p).cycles
    assert body["render"] == t.render(p, m)
    assert body["objectives"]["latency"] == pytest.approx(cost.seconds)
    assert body["problem_hash"] == content_hash(p)


def test_the_mapping_it_returns_evaluates_the_same(client: TestClient) -> None:
    point = _warm("trn1", BMM)
    by_point = client.post("/v1/mappings/evaluate", json={"problem": BMM, "target": "trn1", "point": point}).json()
    by_mapping = client.post(
        "/v1/mappings/evaluate", json={"problem": BMM, "target": "trn1", "mapping": by_point["mapping"]}
    )
    assert by_mapping.status_code == 200, by_mapping.text
    assert by_mapping.json()["cost"] == by_point["cost"]
    assert by_mapping.json()["point"] is None


def test_analyze_seconds_use_the_cost_clock(client: TestClient) -> None:
    ev = client.post("/v1/mappings/evaluate", json={"problem": GEMM, "target": "trn2", "point": _warm("trn2", GEMM)})
    bound = next(t for t in client.post("/v1/problems/analyze", json=GEMM).json()["targets"] if t["target"] == "trn2")
    lb = bound["lower_bound"]
    assert lb["seconds"] == pytest.approx(lb["cycles"] / ev.json()["cost"]["clock_hz"])
    assert ev.json()["lower_bound"] == lb


def test_infeasible_point_reports_the_targets_violations(client: TestClient) -> None:
    overrides = {"dm_bytes_per_slice": 4096}
    point = _warm("rngd", BMM)
    r = client.post(
        "/v1/mappings/evaluate", json={"problem": BMM, "target": "rngd", "overrides": overrides, "point": point}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    t, p = get_target("rngd", overrides), problem_from_dict(BMM)
    expected = t.check(p, t.mapping(p, point))
    assert expected  # the override makes this point infeasible
    assert body["feasible"] is False
    assert [v["code"] for v in body["violations"]] == [v.code for v in expected]
    assert all(v["message"] for v in body["violations"])
    assert body["cost"] is None and body["render"] is None and body["gap"] is None
    assert body["lower_bound"]["cycles"] == t.lower_bound(p).cycles


def test_unsupported_problem_reports_supports_violations(client: TestClient) -> None:
    r = client.post("/v1/mappings/evaluate", json={"problem": ROWPROD, "target": "rngd", "point": {}})
    assert r.status_code == 200, r.text
    body = r.json()
    expected = get_target("rngd").supports(problem_from_dict(ROWPROD))
    assert body["feasible"] is False and body["lower_bound"] is None
    assert [v["code"] for v in body["violations"]] == [v.code for v in expected]


def test_point_with_unknown_parameter_lists_the_parameters(client: TestClient) -> None:
    point = {**_warm("trn2", GEMM), "tile_q": 3}
    body = _unprocessable(
        client.post("/v1/mappings/evaluate", json={"problem": GEMM, "target": "trn2", "point": point})
    )
    assert body["field"] == "point.tile_q" and "tile_q" in body["detail"]
    space = get_target("trn2").space(problem_from_dict(GEMM))
    assert body["parameters"] == list(space.names())


@pytest.mark.parametrize("value", [96, "128", 128.0, True, None, [128]])
def test_point_value_outside_the_choices_lists_them(client: TestClient, value: Any) -> None:
    point = {**_warm("trn2", GEMM), "tile_k": value}
    body = _unprocessable(
        client.post("/v1/mappings/evaluate", json={"problem": GEMM, "target": "trn2", "point": point})
    )
    choices = next(q for q in get_target("trn2").space(problem_from_dict(GEMM)).params if q.name == "tile_k").choices
    assert body["field"] == "point.tile_k"
    assert body["choices"] == list(choices)
    assert all(str(c) in body["detail"] for c in choices)


#: tt-metal's GEMM benchmark point on wormhole (tests/ttnn/unit_tests/benchmarks/test_benchmark.py: 1024^3 on an 8x8
#: grid, in0_block_w 4, a published sub-block) in the target's own knobs: act_block_h and out_subblock, where the
#: space offers ranks of them
KNOB_POINT = tt("block/8x8", "l1-sharded", 128, 4, "1x4", db=True)
GEMM_1K = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 1024, "k": 1024, "n": 1024}, "weight": 1}


def test_a_point_of_the_targets_own_knobs_is_priced(client: TestClient) -> None:
    body = {"problem": GEMM_1K, "target": "wormhole-n150", "point": KNOB_POINT}
    r = client.post("/v1/mappings/evaluate", json=body)
    assert r.status_code == 200, r.text
    got = r.json()
    t, p = get_target("wormhole-n150"), problem_from_dict(GEMM_1K)
    m = t.mapping(p, KNOB_POINT)
    assert got["feasible"] and got["point"] is None  # (not a point of the space)
    assert got["mapping"]["knobs"] == m.knobs
    assert got["cost"]["cycles"] == t.cost(p, m).cycles
    # a knob value the hardware rules out is a violation, as for any point
    bad = client.post("/v1/mappings/evaluate", json={**body, "point": {**KNOB_POINT, "act_block_h": 100}}).json()
    assert not bad["feasible"] and "act-block-h" in [v["code"] for v in bad["violations"]]
    # an out_subblock that is not HxW says so once
    odd = client.post("/v1/mappings/evaluate", json={**body, "point": {**KNOB_POINT, "out_subblock": "ab"}}).json()
    assert [v["code"] for v in odd["violations"]] == ["dst-capacity"] and "'1x4'" in odd["violations"][0]["message"]


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"bogus": 1}, "point.bogus", "nor a knob"),
        ({"act_block_h": "128"}, "point.act_block_h", "JSON integer"),
        ({"fp32_acc": "false"}, "point.fp32_acc", "JSON boolean"),
        ({"act_block_h": [128]}, "point.act_block_h", "is a JSON array"),
        ({"layout": None}, "point.layout", "JSON string"),
    ],
)
def test_a_knob_point_that_is_wrong_is_422_naming_the_knob(
    client: TestClient, change: dict[str, Any], field: str, says: str
) -> None:
    point = {**KNOB_POINT, **change}
    body = _unprocessable(
        client.post("/v1/mappings/evaluate", json={"problem": GEMM_1K, "target": "wormhole-n150", "point": point})
    )
    assert body["field"] == field and says in body["detail"], body


def test_a_knob_point_keeps_the_spaces_parameters_to_their_choices(client: TestClient) -> None:
    # only knobs the space does not offer as parameters range freely: a target sizes arrays by its parameters (an
    # rngd point with 2**31 clusters allocated 16 GiB and was killed), and a value outside them was priced as another
    t, p = get_target("rngd"), problem_from_dict(GEMM)
    warm = next(dict(w) for w in t.warm_starts(p) if not t.check(p, t.mapping(p, w)))
    knobs = dict(t.mapping(p, warm).knobs)
    assert set(knobs) - set(warm)  # (derived knobs beside the parameters: the knob path)
    huge = _unprocessable(
        client.post(
            "/v1/mappings/evaluate", json={"problem": GEMM, "target": "rngd", "point": {**knobs, "clusters": 2**40}}
        )
    )
    assert huge["field"] == "point.clusters" and "beyond any part" in huge["detail"]
    off = _unprocessable(
        client.post(
            "/v1/mappings/evaluate", json={"problem": GEMM, "target": "rngd", "point": {**knobs, "clusters": 3}}
        )
    )
    assert off["field"] == "point.clusters" and "not among its choices" in off["detail"]
    derived = next(k for k in knobs if k not in warm and isinstance(knobs[k], str))
    changed = _unprocessable(
        client.post(
            "/v1/mappings/evaluate", json={"problem": GEMM, "target": "rngd", "point": {**knobs, derived: "other"}}
        )
    )
    assert changed["field"] == f"point.{derived}" and "derives" in changed["detail"]
    ok = client.post("/v1/mappings/evaluate", json={"problem": GEMM, "target": "rngd", "point": knobs})
    assert ok.status_code == 200 and ok.json()["feasible"]
    big = {**KNOB_POINT, "act_block_h": 10**40}
    tt = _unprocessable(
        client.post("/v1/mappings/evaluate", json={"problem": GEMM_1K, "target": "wormhole-n150", "point": big})
    )
    assert tt["field"] == "point.act_block_h"


def test_a_knob_point_without_a_knob_names_it(client: TestClient) -> None:
    point = {k: v for k, v in KNOB_POINT.items() if k != "layout"}
    body = _unprocessable(
        client.post("/v1/mappings/evaluate", json={"problem": GEMM_1K, "target": "wormhole-n150", "point": point})
    )
    assert body["field"].startswith("point") and "layout missing" in body["detail"]


def test_point_missing_a_parameter_is_named(client: TestClient) -> None:
    point = _warm("ascend-a5", GEMM)
    del point["core_grid"]
    body = _unprocessable(
        client.post("/v1/mappings/evaluate", json={"problem": GEMM, "target": "ascend-a5", "point": point})
    )
    assert body["field"] == "point.core_grid" and body["missing"] == ["core_grid"]


def test_mapping_of_another_problem_says_what_does_not_match(client: TestClient) -> None:
    point = _warm("trn2", GEMM)
    other = client.post("/v1/mappings/evaluate", json={"problem": GEMM, "target": "trn2", "point": point}).json()
    # axes that do not exist in the batched problem
    renamed = {**GEMM, "expr": "ab,bc->ac", "sizes": {"a": 256, "b": 512, "c": 256}}
    body = _unprocessable(
        client.post("/v1/mappings/evaluate", json={"problem": renamed, "target": "trn2", "mapping": other["mapping"]})
    )
    assert body["field"] == "mapping" and "the problem lacks" in body["detail"]
    # same axes, other sizes: points missed
    bigger = {**GEMM, "sizes": {"m": 512, "k": 512, "n": 256}}
    body = _unprocessable(
        client.post("/v1/mappings/evaluate", json={"problem": bigger, "target": "trn2", "mapping": other["mapping"]})
    )
    assert "never visited" in body["detail"] and "m=" in body["detail"]


def test_unknown_target_and_bad_overrides_are_422(client: TestClient) -> None:
    base = {"problem": GEMM, "point": {}}
    body = _unprocessable(client.post("/v1/mappings/evaluate", json={**base, "target": "../../workload/data/resnet50"}))
    assert body["field"] == "target" and "rngd" in body["detail"]
    body = _unprocessable(
        client.post("/v1/mappings/evaluate", json={**base, "target": "rngd", "overrides": {"slices": 8}})
    )
    assert body["token"] == "slices" and "slices_per_cluster" in body["hint"]
    body = _unprocessable(
        client.post("/v1/mappings/evaluate", json={**base, "target": "trn2", "overrides": {"pe_rows": -1}})
    )
    assert body["token"] == "pe_rows"
    body = _unprocessable(
        client.post("/v1/mappings/evaluate", json={**base, "target": "trn2", "overrides": {"pe_rows": "x"}})
    )
    assert body["token"] == "pe_rows"


def test_point_and_mapping_together_are_refused(client: TestClient) -> None:
    m = Mapping(levels=(Level(name="tile", loops=(Loop(axis="m", factor=256),)),), acc_dtype="f32")
    body = _unprocessable(
        client.post(
            "/v1/mappings/evaluate",
            json={"problem": GEMM, "target": "trn2", "point": {}, "mapping": m.model_dump(mode="json")},
        )
    )
    assert "point or mapping" in body["detail"]


# ---- validate ------------------------------------------------------------------------------------


def _gemm_mapping(acc_dtype: str, outer_k: int = 64, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = spec or GEMM
    sizes = spec["sizes"]
    inner_k = sizes["k"] // outer_k
    m = Mapping(
        target="hand-written",
        levels=(
            Level(name="outer", loops=(Loop(axis="k", factor=outer_k),)),
            Level(
                name="tile",
                loops=(
                    Loop(axis="m", factor=sizes["m"]),
                    Loop(axis="n", factor=sizes["n"]),
                    Loop(axis="k", factor=inner_k),
                ),
            ),
        ),
        acc_dtype=acc_dtype,
    )
    return m.model_dump(mode="json")


def test_validate_reports_what_the_executor_reports(client: TestClient) -> None:
    mapping = _gemm_mapping("f32")
    r = client.post("/v1/mappings/validate", json={"problem": GEMM, "mapping": mapping, "seed": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    expected = validate(problem_from_dict(GEMM), Mapping.model_validate(mapping), seed=3)
    assert body["passed"] is True and body["note"] == ""
    assert body["report"]["passed"] is True
    assert body["report"]["status"] == expected.status == "passed" and body["report"]["reason"] == expected.reason
    assert body["report"]["reason"]  # the README's ValidationReport: a verdict and why
    assert body["report"]["elements_compared"] == expected.elements_compared
    assert body["report"]["max_abs_error"] == expected.max_abs_error
    assert body["report"]["tolerance"] == expected.tolerance.model_dump()
    assert body["report"]["method"] == "full" and body["report"]["checked_fraction"] == 1.0


def test_a_covering_but_wrong_mapping_fails_with_200(client: TestClient) -> None:
    # a bf16 accumulator over a long reduction loses what the problem's f32 accumulation keeps
    long_k = {**GEMM, "sizes": {"m": 16, "k": 16384, "n": 16}, "dtype": "bf16"}
    r = client.post("/v1/mappings/validate", json={"problem": long_k, "mapping": _gemm_mapping("bf16", 1024, long_k)})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["passed"] is False and body["report"]["passed"] is False
    assert body["report"]["status"] == "failed" and body["report"]["reason"]


def test_the_validate_report_documents_status_and_reason(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    report = schemas["ValidationReportOut"]
    assert {"status", "reason"} <= set(report["required"])
    assert report["properties"]["status"]["enum"] == ["passed", "failed", "not-checked"]
    assert "halo" in report["properties"]["method"]["enum"]  # the executor's sharded-conv method too


def test_a_mapping_the_executor_does_not_emulate_is_not_checked(client: TestClient) -> None:
    f32 = {**GEMM, "sizes": {"m": 16, "k": 32, "n": 16}, "dtype": "f32"}
    mapping = {**_gemm_mapping("f32", 1, f32), "knobs": {"math_fidelity": "LoFi"}}
    r = client.post("/v1/mappings/validate", json={"problem": f32, "mapping": mapping})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["report"]["status"] == "not-checked" and body["report"]["passed"] is False
    assert body["passed"] is None and body["note"] == body["report"]["reason"] and "LoFi" in body["note"]


def test_validate_refuses_a_mapping_of_another_problem(client: TestClient) -> None:
    mapping = _gemm_mapping("f32")
    bigger = {**GEMM, "sizes": {"m": 256, "k": 1024, "n": 256}}
    body = _unprocessable(client.post("/v1/mappings/validate", json={"problem": bigger, "mapping": mapping}))
    assert body["field"] == "mapping" and "k=" in body["detail"]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"factor": 10**12}, "visit"),
        ({"axis": "q"}, "lacks"),
        ({"stride": 0}, "visited"),
    ],
    ids=["huge-factor", "unknown-axis", "repeated"],
)
def test_validate_refuses_broken_mappings_cheaply(client: TestClient, change: dict[str, Any], says: str) -> None:
    mapping = _gemm_mapping("f32")
    mapping["levels"][0]["loops"][0].update(change)
    body = _unprocessable(client.post("/v1/mappings/validate", json={"problem": GEMM, "mapping": mapping}))
    assert says in body["detail"]


def test_validate_refuses_an_unknown_accumulator_and_too_many_steps(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = _unprocessable(client.post("/v1/mappings/validate", json={"problem": GEMM, "mapping": _gemm_mapping("f64")}))
    assert "acc_dtype" in body["detail"]
    many = {**GEMM, "sizes": {"m": 1, "k": 1 << 20, "n": 1}}
    request = {"problem": many, "mapping": _gemm_mapping("f32", 1 << 20, many)}
    r = client.post("/v1/mappings/validate", json=request)  # 2^20 steps: the executor walks a 4,096-step proxy
    assert r.status_code == 200 and r.json()["report"]["method"] == "proxy", r.text
    monkeypatch.setattr(validation_run, "MAX_VALIDATION_STEPS", 1000)  # below even the proxy's steps: refused
    body = _unprocessable(client.post("/v1/mappings/validate", json=request))
    assert "4096 sequential reduction steps" in body["detail"]


def test_a_mapping_too_large_to_validate_is_not_a_verdict(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    def too_large(*_a: Any, **_k: Any) -> Any:
        raise ValidationTooLarge("even the smallest proxy needs 9,000 MiB")

    monkeypatch.setattr(mappings_route, "validate", too_large)
    r = client.post("/v1/mappings/validate", json={"problem": GEMM, "mapping": _gemm_mapping("f32")})
    assert r.status_code == 200, r.text
    assert r.json()["passed"] is None and r.json()["report"] is None
    assert r.json()["note"].startswith("not validated: even the smallest proxy")


def test_validations_beyond_the_slots_get_429_and_a_slot_frees_when_a_run_ends(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TM_MAX_VALIDATIONS runs at once: one more is a 429 problem with Retry-After, naming the setting;
    a run that ends (even by raising) gives its slot back."""
    started, release = threading.Event(), threading.Event()

    def slow(*a: Any, **k: Any) -> Any:
        started.set()
        assert release.wait(30)
        return validate(*a, **k)

    monkeypatch.setattr(mappings_route, "validate", slow)
    body = {"problem": GEMM, "mapping": _gemm_mapping("f32")}
    with TestClient(create_app(settings.model_copy(update={"max_validations": 1})), raise_server_exceptions=False) as c:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(c.post, "/v1/mappings/validate", json=body)
            assert started.wait(30)
            busy = c.post("/v1/mappings/validate", json=body)
            release.set()
            assert first.result(60).status_code == 200
        assert busy.status_code == 429, busy.text
        assert busy.headers["content-type"].startswith(PROBLEM_JSON)
        assert int(busy.headers["retry-after"]) > 0
        assert "TM_MAX_VALIDATIONS" in busy.json()["hint"] and busy.json()["limit"] == "max_validations"

        def boom(*_a: Any, **_k: Any) -> Any:
            raise RuntimeError("executor fault")

        monkeypatch.setattr(mappings_route, "validate", boom)
        assert c.post("/v1/mappings/validate", json=body).json()["passed"] is False
        monkeypatch.setattr(mappings_route, "validate", validate)
        after = c.post("/v1/mappings/validate", json=body)
        assert after.status_code == 200 and after.json()["passed"] is True, after.text


# ---- the OpenAPI examples ------------------------------------------------------------------------


def test_every_example_of_the_engine_routes_answers_200(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    seen = 0
    for path in ("/v1/problems/analyze", "/v1/mappings/evaluate", "/v1/mappings/validate"):
        examples = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["examples"]
        assert len(examples) >= 4, path
        for name, example in examples.items():
            r = client.post(path, json=example["value"])
            assert r.status_code == 200, (path, name, r.text)
            seen += 1
            if path.endswith("validate"):
                assert r.json()["passed"] is True, (name, r.json())
            if path.endswith("evaluate"):
                assert r.json()["feasible"] == (not name.endswith("infeasible")), name
    assert seen >= 14
    targets = {
        e["value"]["target"]
        for e in spec["paths"]["/v1/mappings/evaluate"]["post"]["requestBody"]["content"]["application/json"][
            "examples"
        ].values()
    }
    assert {"rngd", "trn2", "wormhole-n150", "ascend-a5"} <= targets
    params = {p["name"]: p for p in spec["paths"]["/v1/workloads/{name}"]["get"]["parameters"]}
    batch = next(iter(params["batch"]["examples"].values()))["value"]
    for example in params["name"]["examples"].values():
        assert client.get(f"/v1/workloads/{example['value']}", params={"batch": batch}).status_code == 200


def test_problems_over_the_services_mac_limit_are_not_mapped(settings: Settings) -> None:
    with TestClient(create_app(settings.model_copy(update={"max_macs": 1e6})), raise_server_exceptions=False) as c:
        for path, extra in (
            ("/v1/mappings/evaluate", {"target": "trn2", "point": {}}),
            ("/v1/mappings/validate", {"mapping": _gemm_mapping("f32")}),
        ):
            body = _unprocessable(c.post(path, json={"problem": GEMM, **extra}))
            assert body["limit"] == "tm_max_macs" and "TM_MAX_MACS" in body["hint"]
        assert c.get("/v1/targets/trn2").json()["limits"]["max_macs"] == 1e6
        assert c.post("/v1/problems/analyze", json=GEMM).status_code == 200  # a bound costs nothing
