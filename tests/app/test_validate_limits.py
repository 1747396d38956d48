"""`POST /v1/mappings/validate` is bounded: a size check up front (422), a deadline while it runs (503),
and `mapper validate FILE` runs the same body offline without either."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.api.examples_engine import validate_examples
from app.api.routes import mappings as mappings_route
from app.api.validation_run import executed_points
from app.cli import app as cli
from app.main import create_app
from app.settings import Settings
from costmodels.ir import Level, Loop, Mapping
from executor.validate import validate
from workload.einsum import einsum
from workload.spec import problem_from_dict

PROBLEM_JSON = "application/problem+json"
EXAMPLE: dict[str, Any] = next(iter(validate_examples().values()))["value"]  # a feasible rngd mapping


def test_the_example_validates_within_the_default_limits(client: TestClient) -> None:
    r = client.post("/v1/mappings/validate", json=EXAMPLE)
    assert r.status_code == 200, r.text
    assert r.json()["passed"] is True


def test_a_run_over_the_points_limit_is_refused_up_front_saying_how_to_run_it(settings: Settings) -> None:
    points = 4 * 128 * 128 * 256  # the example's iteration space (no padding)
    tight = settings.model_copy(update={"max_validation_points": points - 1})
    with TestClient(create_app(tight), raise_server_exceptions=False) as c:
        r = c.post("/v1/mappings/validate", json=EXAMPLE)
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith(PROBLEM_JSON)
        body = r.json()
        assert f"{points:,} iteration points" in body["detail"] and f"{points - 1:,}" in body["detail"]
        assert body["limit"] == "max_validation_points" and body["field"] == "mapping"
        assert "mapper validate FILE" in body["hint"] and "TM_MAX_VALIDATION_POINTS" in body["hint"]
    at_limit = settings.model_copy(update={"max_validation_points": points})
    with TestClient(create_app(at_limit), raise_server_exceptions=False) as c:
        assert c.post("/v1/mappings/validate", json=EXAMPLE).status_code == 200


def test_points_are_counted_with_padding_and_on_the_proxy_of_a_problem_over_the_memory_cap() -> None:
    small = einsum("mk,kn->mn", {"m": 100, "k": 64, "n": 64}, dtype="bf16")
    padded = Mapping(  # m visited 128 times (28 padding points)
        levels=(
            Level(name="o", loops=(Loop(axis="m", factor=2),)),
            Level(name="t", loops=(Loop(axis="m", factor=64), Loop(axis="k", factor=64), Loop(axis="n", factor=64))),
        ),
        acc_dtype="f32",
    )
    assert executed_points(small, padded) == (128 * 64 * 64, False)
    big = einsum("mk,kn->mn", {"m": 16384, "k": 16384, "n": 16384}, dtype="bf16")  # 512 MiB per input
    tiled = Mapping(
        levels=(
            Level(name="o", loops=(Loop(axis="m", factor=128), Loop(axis="n", factor=128))),
            Level(
                name="t", loops=(Loop(axis="m", factor=128), Loop(axis="k", factor=16384), Loop(axis="n", factor=128))
            ),
        ),
        acc_dtype="f32",
    )
    points, proxied = executed_points(big, tiled)
    assert proxied and points < big.points // 16


def test_a_run_past_the_deadline_is_a_503_and_keeps_its_slot_until_it_ends(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    ended = threading.Event()

    def slow(*a: Any, **k: Any) -> Any:
        assert release.wait(60)
        try:
            return validate(*a, **k)
        finally:
            ended.set()

    monkeypatch.setattr(mappings_route, "validate", slow)
    short = settings.model_copy(update={"validation_seconds": 0.3, "max_validations": 1})
    with TestClient(create_app(short), raise_server_exceptions=False) as c:
        t0 = time.monotonic()
        late = c.post("/v1/mappings/validate", json=EXAMPLE)
        assert time.monotonic() - t0 < 20
        assert late.status_code == 503, late.text
        assert late.headers["content-type"].startswith(PROBLEM_JSON)
        body = late.json()
        assert "0.3 s" in body["detail"] and "TM_VALIDATION_SECONDS" in body["detail"]
        assert body["limit"] == "validation_seconds" and "mapper validate FILE" in body["hint"]
        assert c.post("/v1/mappings/validate", json=EXAMPLE).status_code == 429  # the late run holds the one slot
        release.set()
        assert ended.wait(60)
        report = validate(problem_from_dict(EXAMPLE["problem"]), Mapping.model_validate(EXAMPLE["mapping"]))
        monkeypatch.setattr(mappings_route, "validate", lambda *_a, **_k: report)  # well within 0.3 s
        for _ in range(200):  # the slot is released right after the run returns
            r = c.post("/v1/mappings/validate", json=EXAMPLE)
            if r.status_code != 429:
                break
            time.sleep(0.05)
        assert r.status_code == 200, r.text


def test_the_timeout_is_documented(settings: Settings) -> None:
    responses = create_app(settings).openapi()["paths"]["/v1/mappings/validate"]["post"]["responses"]
    assert "TM_VALIDATION_SECONDS" in responses["503"]["description"]
    assert "TM_MAX_VALIDATION_POINTS" in responses["422"]["description"]


# ---- mapper validate FILE ------------------------------------------------------------------------

runner = CliRunner()


def test_mapper_validate_runs_the_request_body_offline(tmp_path: Path) -> None:
    f = tmp_path / "body.json"
    f.write_text(json.dumps(EXAMPLE))
    res = runner.invoke(cli, ["validate", str(f)])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("passed:")
    res = runner.invoke(cli, ["validate", str(f), "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["passed"] is True


def test_mapper_validate_takes_yaml_and_exits_3_on_a_failed_validation(tmp_path: Path) -> None:
    import yaml

    bf16_acc = {**EXAMPLE, "mapping": {**EXAMPLE["mapping"], "acc_dtype": "bf16"}}
    f = tmp_path / "body.yaml"
    f.write_text(yaml.safe_dump(bf16_acc))
    res = runner.invoke(cli, ["validate", str(f)])
    assert res.exit_code == 3, res.output
    assert res.stdout.startswith("failed:")


def test_mapper_validate_max_steps_bounds_the_reduction_it_runs(tmp_path: Path) -> None:
    one_by_one = Mapping(  # every k a reduction step of its own: 64 steps
        levels=(
            Level(name="o", loops=(Loop(axis="m", factor=4), Loop(axis="k", factor=64), Loop(axis="n", factor=4))),
            Level(name="t", loops=(Loop(axis="m", factor=1), Loop(axis="k", factor=1), Loop(axis="n", factor=1))),
        ),
        acc_dtype="f32",
    )
    problem = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 4, "k": 64, "n": 4}, "dtype": "f32"}
    f = tmp_path / "body.json"
    f.write_text(json.dumps({"problem": problem, "mapping": one_by_one.model_dump(mode="json"), "seed": 0}))
    for max_steps, method in (("16", "proxy"), ("64", "full")):
        res = runner.invoke(cli, ["validate", str(f), "--json", "--max-steps", max_steps])
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        shortened = any("64 reduction steps, over the 16-step limit" in n for n in out["notes"])
        assert out["method"] == method and out["passed"] and shortened == (method == "proxy")


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("not json", "is not JSON"),
        ("[1, 2]", "holds no object"),
        (json.dumps({"problem": EXAMPLE["problem"]}), "invalid mapping"),
        (json.dumps({**EXAMPLE, "mapping": {**EXAMPLE["mapping"], "levels": []}}), "does not match the problem"),
    ],
)
def test_mapper_validate_says_what_is_wrong_with_the_file(tmp_path: Path, content: str, says: str) -> None:
    f = tmp_path / "body.json"
    f.write_text(content)
    res = runner.invoke(cli, ["validate", str(f)])
    assert res.exit_code == 2, res.output
    assert says in res.output and "Traceback" not in res.output


def test_a_long_reduction_the_executor_shortens_is_validated_not_refused(client: TestClient) -> None:
    """70,000 reduction steps, over the 65,536 a request may run, but the executor walks a proxy of at most its own
    step limit (`executor.proxy.shorten`): the route validates that proxy and says so (it answered 422 before)."""
    k = 70_000
    one_by_one = Mapping(
        levels=(
            Level(name="o", loops=(Loop(axis="m", factor=2), Loop(axis="k", factor=k), Loop(axis="n", factor=2))),
            Level(name="t", loops=(Loop(axis="m", factor=1), Loop(axis="k", factor=1), Loop(axis="n", factor=1))),
        ),
        acc_dtype="f32",
    )
    problem = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 2, "k": k, "n": 2}, "dtype": "f32"}
    r = client.post("/v1/mappings/validate", json={"problem": problem, "mapping": one_by_one.model_dump(mode="json")})
    assert r.status_code == 200, r.text
    report = r.json()["report"]
    assert report["method"] == "proxy" and report["status"] == "passed", report
    assert "step limit" in report["reason"], report["reason"]
