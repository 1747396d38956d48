"""Odd inputs found by fuzzing and by hand (2026-11-25): each was a 500, an undocumented status or an
unhelpful message, and is now a problem detail that says what is wrong and how to fix it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.api.errors import Unprocessable
from app.api.json_body import check_json_text, is_json_type
from app.main import create_app
from app.settings import Settings

PROBLEM_JSON = "application/problem+json"
GEMM = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 64, "k": 64, "n": 64}, "dtype": "bf16"}
TUNING = {"problem": GEMM, "target": "trn2"}
JSON_ROUTES = ["/v1/problems/analyze", "/v1/mappings/evaluate", "/v1/mappings/validate", "/v1/tunings"]


def problem(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM_JSON)
    body: dict[str, Any] = r.json()
    assert body["status"] == status and body["detail"]
    return body


def send(c: TestClient, path: str, body: bytes, content_type: str | None = "application/json") -> httpx.Response:
    headers = {"content-type": content_type} if content_type is not None else {}
    return c.post(path, content=body, headers=headers)


def no_jobs(c: TestClient) -> bool:
    return c.get("/v1/tunings").json()["items"] == []


# ---- lone surrogates: were a 500 (the problem detail echoing them could not be encoded) -----------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"problem": %s, "target": "\\ud800"}' % json.dumps(GEMM).encode(), "target"),
        (b'{"problem": %s, "target": "trn2"}' % json.dumps({**GEMM, "label": "x\\udc00"}).encode(), "problem.label"),
        (b'{"problem": %s, "target": "trn2", "\\udfff": 1}' % json.dumps(GEMM).encode(), "<key>"),
    ],
)
def test_a_lone_surrogate_is_a_422_naming_where_and_nothing_is_stored(
    client: TestClient, body: bytes, field: str
) -> None:
    got = problem(send(client, "/v1/tunings", body.replace(b"\\\\u", b"\\u")), 422)
    assert got["field"] == field and "surrogate" in got["detail"] and "Unicode" in got["hint"]
    assert no_jobs(client)


def test_a_surrogate_pair_is_a_character_and_passes(client: TestClient) -> None:
    body = json.dumps({"problem": {**GEMM, "label": "\U0001f600 matmul"}, "target": "trn2"}).encode()  # ascii escapes
    assert b"\\ud83d\\ude00" in body
    r = send(client, "/v1/tunings", body)
    assert r.status_code == 202, r.text
    assert r.json()["summary"].startswith("\U0001f600 matmul")


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
@pytest.mark.parametrize("path", ["/v1/models/layers", "/v1/models/tunings?target=trn2"])
def test_a_layer_list_with_a_lone_surrogate_is_a_422(client: TestClient, path: str, content_type: str) -> None:
    """The YAML "\\ud800" escape decodes to a lone surrogate too (it was a 500 on both routes)."""
    layer = '{"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 64, "k": 64, "n": 64}, "label": "\\ud800"}'
    got = problem(send(client, path, f'{{"name": "n", "layers": [{layer}]}}'.encode(), content_type), 422)
    assert "surrogate" in got["detail"]
    assert no_jobs(client)


# ---- NaN and Infinity: JSON has neither; Infinity in an override was accepted as a job ------------


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
@pytest.mark.parametrize("path", JSON_ROUTES)
def test_nan_and_infinity_are_a_422_saying_json_has_no_such_number(
    client: TestClient, path: str, literal: bytes
) -> None:
    body = b'{"problem": %s, "target": "trn2", "overrides": {"te_clock_hz": %s}}' % (json.dumps(GEMM).encode(), literal)
    got = problem(send(client, path, body), 422)
    assert literal.lstrip(b"-").decode() in got["detail"] and "finite" in got["hint"]
    assert no_jobs(client)


def test_the_word_nan_inside_a_string_is_not_a_number(client: TestClient) -> None:
    r = client.post("/v1/tunings", json={"problem": {**GEMM, "label": "NaN and Infinity"}, "target": "trn2"})
    assert r.status_code == 202, r.text


def test_check_json_text_passes_what_is_not_json_to_the_parser() -> None:
    check_json_text(b'{"a": "\\ud800"')  # unparsable: the route's own parser reports it with its position
    check_json_text(b'{"a": "\\ud83d\\ude00"}')  # a pair
    with pytest.raises(Unprocessable) as caught:
        check_json_text(b'{"a": [1, NaN]}')
    assert "NaN" in str(caught.value.detail)


# ---- content types: a JSON body under another type read "Input should be a valid dictionary" -----


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None])
@pytest.mark.parametrize("path", JSON_ROUTES)
def test_a_body_not_sent_as_json_is_a_415_naming_the_type(
    client: TestClient, path: str, content_type: str | None
) -> None:
    """It read "Input should be a valid dictionary" (FastAPI parses JSON only under a JSON type)."""
    got = problem(send(client, path, json.dumps(TUNING).encode(), content_type), 415)
    assert (content_type or "without a Content-Type") in got["detail"] and "application/json" in got["hint"]
    assert no_jobs(client)


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/merge-patch+json"])
def test_json_types_are_read_as_json(client: TestClient, content_type: str) -> None:
    assert send(client, "/v1/tunings", json.dumps(TUNING).encode(), content_type).status_code == 202


def test_is_json_type() -> None:
    assert is_json_type("Application/JSON") and is_json_type("application/problem+json; q=1")
    assert not is_json_type("") and not is_json_type("text/json") and not is_json_type("application/jsonx")


# ---- bodies that cannot be parsed: were "There was an error parsing the body" --------------------


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nests"),
        (b'{"a": ' * 5_000 + b"1" + b"}" * 5_000, "nests"),
        (b'{"target": "\xff\xfe"}', "not UTF-8"),
    ],
)
@pytest.mark.parametrize("path", JSON_ROUTES)
def test_an_unparsable_body_is_a_400_saying_why(client: TestClient, path: str, body: bytes, says: str) -> None:
    got = problem(send(client, path, body), 400)
    assert says in got["detail"] and got["hint"]


@pytest.mark.parametrize("path", JSON_ROUTES)
def test_an_empty_body_says_the_body_is_missing(client: TestClient, path: str) -> None:
    got = problem(send(client, path, b""), 422)
    assert got["detail"] == "the request has no body" and "/docs" in got["hint"]


@pytest.mark.parametrize("body", [b"[1, 2]", b"null", b'"x"', b"3"])
def test_a_body_that_is_not_an_object_says_so(client: TestClient, body: bytes) -> None:
    got = problem(send(client, "/v1/tunings", body), 422)
    assert got["detail"] == "the body is not a JSON object"


# ---- routing errors: the generic "Not Found" and "Method Not Allowed" ----------------------------


@pytest.mark.parametrize("path", ["/v1//targets", "/v1/tunings/a/b/c", "/v2/targets", "/v1/tunings/..%2f.."])
def test_an_unknown_route_names_the_path_and_where_routes_are_listed(client: TestClient, path: str) -> None:
    got = problem(client.get(path), 404)
    assert "no route" in got["detail"] and "/docs" in got["detail"]


def test_a_405_names_the_method_and_the_allowed_ones(client: TestClient) -> None:
    r = client.delete("/v1/targets")
    got = problem(r, 405)
    assert got["detail"].startswith("DELETE is not allowed on '/v1/targets'") and r.headers["allow"] == "GET"
    assert "GET" in got["detail"]


def test_head_and_options_are_405_problems_with_allow(client: TestClient) -> None:
    for method in ("HEAD", "OPTIONS"):
        r = client.request(method, "/v1/health")
        assert r.status_code == 405 and r.headers["allow"] == "GET"


# ---- the document lists every status the routes answer -------------------------------------------


def documented(app: Any, method: str, path: str) -> set[str]:
    return set(app.openapi()["paths"][path][method.lower()]["responses"])


def test_every_secured_route_documents_401_and_every_body_route_400_413_415(settings: Settings) -> None:
    app = create_app(settings)
    secured = create_app(settings.model_copy(update={"api_tokens": "t", "auth_reads": True})).openapi()["paths"]
    assert sum(bool(op.get("security")) for item in secured.values() for op in item.values()) > 10
    for path, item in secured.items():
        for method, op in item.items():
            assert ("401" in op["responses"]) is bool(op.get("security")), (method, path)
    for path, item in app.openapi()["paths"].items():
        for method, op in item.items():
            codes = set(op["responses"])
            assert "401" not in codes and not op.get("security"), (method, path)  # no tokens: nothing asks for one
            if "requestBody" in op:
                assert {"400", "413", "415"} <= codes, (method, path)
            for code, response in op["responses"].items():
                if code[0] in "45":
                    assert "application/problem+json" in response.get("content", {}), (method, path, code)
    assert {"429", "503"} <= documented(app, "POST", "/v1/tunings")
    assert {"429", "503"} <= documented(app, "POST", "/v1/models/tunings")
    assert {"422", "429", "503"} <= documented(app, "POST", "/v1/mappings/validate")


def test_statuses_the_service_answers_are_documented(settings: Settings) -> None:
    """Drive each status through a route and find it in that route's responses."""
    secured = settings.model_copy(update={"api_tokens": "t", "max_active_per_client": 1, "max_body_bytes": 4096})
    with TestClient(create_app(secured), raise_server_exceptions=False) as c:
        auth = {"Authorization": "Bearer t"}
        json_auth = {**auth, "content-type": "application/json"}
        seen = [
            ("POST", "/v1/tunings", c.post("/v1/tunings", json=TUNING)),  # 401
            ("POST", "/v1/tunings", c.post("/v1/tunings", content=b'{"a": "\xff"}', headers=json_auth)),  # 400
            ("POST", "/v1/tunings", c.post("/v1/tunings", content=b"x" * 5000, headers=json_auth)),  # 413
            ("POST", "/v1/tunings", c.post("/v1/tunings", content=b"{}", headers={**auth, "content-type": "text/a"})),
            ("POST", "/v1/tunings", c.post("/v1/tunings", json=TUNING, headers=auth)),  # 202
            ("POST", "/v1/tunings", c.post("/v1/tunings", json={**TUNING, "seed": 1}, headers=auth)),  # 429
        ]
        app = c.app
        statuses = [r.status_code for _, _, r in seen]
        assert statuses == [401, 400, 413, 415, 202, 429], [r.text[:200] for _, _, r in seen]
        for method, path, r in seen:
            assert str(r.status_code) in documented(app, method, path), (method, path, r.status_code)


@pytest.mark.parametrize("value", ["NaN", "inf", "-Infinity"])
def test_a_non_finite_query_number_says_finite(client: TestClient, value: str) -> None:
    """It read "Input should be less than or equal to 86400" for NaN."""
    job = client.post("/v1/tunings", json=TUNING).json()["id"]
    got = problem(client.get(f"/v1/tunings/{job}/events?max_seconds={value}"), 422)
    assert got["field"] == "query.max_seconds" and "finite" in got["detail"]
