"""Every status code a route can answer, documented in the OpenAPI document with its problem schema.

The routes declare what their handlers raise (404, 409, 422, 429...); the layers around them
answer more, the same way for every route of a kind. `document_statuses` adds those to each
operation of the served document, unless the route describes the code itself:

- 401 on every operation that requires a token (`app.api.openapi_security`: when the service sets TM_API_TOKENS);
- 400 (a body that cannot be parsed: not UTF-8, nested too deeply) and 413 (over TM_MAX_BODY_BYTES,
  TM_MAX_MODEL_BYTES under /v1/models/) on every operation with a request body;
- 415 on every operation whose body is JSON only (`app.api.json_body`);
- 429 where a client's job quota applies (TM_MAX_ACTIVE_PER_CLIENT), 503 where the job database is
  read or written (it may be unreachable: ``Retry-After``).

An error response documented without content gets the ``application/problem+json`` Problem schema.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from app.api.openapi_document import amend
from app.api.openapi_security import token_optional

PROBLEM = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}

UNAUTHORIZED = "no bearer token, or one not among TM_API_TOKENS (only when the service sets tokens)"
UNPARSABLE = "the body cannot be parsed (not UTF-8, or nested too deeply): the detail says which"
TOO_LARGE = "the body is over TM_MAX_BODY_BYTES (TM_MAX_MODEL_BYTES for model uploads)"
NOT_JSON = "the body is not sent as JSON (Content-Type application/json, or a type ending in +json)"
QUOTA = "this client already has TM_MAX_ACTIVE_PER_CLIENT jobs queued or running: wait or cancel some"
STORAGE = "the job database is unreachable: retry after Retry-After (GET /v1/ready says when it is back)"

#: Operations that create jobs (the per-client quota applies).
CREATES_JOBS = {"create_tuning", "create_model_tuning"}


def _reads_storage(path: str, op: dict[str, Any]) -> bool:
    return path.startswith("/v1/tunings") or op.get("operationId") == "create_model_tuning"


def _json_only(op: dict[str, Any]) -> bool:
    content = op.get("requestBody", {}).get("content", {})
    return bool(content) and set(content) == {"application/json"}


def add_statuses(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with the statuses of the module docstring added to every operation (in place, idempotent)."""
    for path, item in document.get("paths", {}).items():
        for op in item.values():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            extra: dict[str, str] = {}
            if op.get("security") and not token_optional(op):
                extra["401"] = UNAUTHORIZED
            if "requestBody" in op:
                extra |= {"400": UNPARSABLE, "413": TOO_LARGE}
            if _json_only(op):
                extra["415"] = NOT_JSON
            if op.get("operationId") in CREATES_JOBS:
                extra["429"] = QUOTA
            if _reads_storage(path, op):
                extra["503"] = STORAGE
            responses = op["responses"]
            for status, text in extra.items():
                responses.setdefault(status, {"description": text})
            for status, response in responses.items():
                if status[0] in "45" and "content" not in response:
                    response["content"] = PROBLEM
    return document


def document_statuses(app: FastAPI) -> None:
    """Make `app`'s OpenAPI document carry every status its routes answer (module docstring)."""
    amend(app, add_statuses)
