"""The OpenAPI document's security requirements, as the service's settings enforce them.

FastAPI marks every route that reads the bearer credentials (`app.api.deps.bearer`) as needing it;
the service asks for a token only as `TM_API_TOKENS` and `TM_AUTH_READS` say. So the document says:

- no tokens set: no operation needs one (no security requirement, no scheme);
- tokens set: routes that create or cancel work (`deps.require_writer`) need one; the others need one
  only with `TM_AUTH_READS`, else a token is optional (``[{}, {"HTTPBearer": []}]``: one names the
  client for its job quota, and nothing checks it).

A client generated from the document, or a fuzzer checking that a route refuses a missing or wrong
token, then meets what the service does.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts

from app.api.deps import require_writer
from app.api.openapi_document import amend
from app.settings import Settings

#: a security requirement list that makes the token optional
OPTIONAL: dict[str, list[str]] = {}


def _calls(dependant: Dependant) -> set[object]:
    out: set[object] = {dependant.call}
    for sub in dependant.dependencies:
        out |= _calls(sub)
    return out


def writer_operations(app: FastAPI) -> set[tuple[str, str]]:
    """(path, lower-case method) of every route that depends on `require_writer` (its own dependencies: the
    routers are included with `require_reader` only)."""
    out: set[tuple[str, str]] = set()
    for context in iter_route_contexts(app.routes):  # (through the included routers, as the document is built)
        route = context.original_route
        if isinstance(route, APIRoute) and require_writer in _calls(route.dependant):
            out |= {(str(context.path_format), method.lower()) for method in route.methods or ()}
    return out


def token_optional(op: dict[str, Any]) -> bool:
    """Whether `op`'s security requirements let a request without a token through."""
    return OPTIONAL in op.get("security", [OPTIONAL])


def secure(document: dict[str, Any], settings: Settings, writers: set[tuple[str, str]]) -> dict[str, Any]:
    """`document` with each operation's security as the settings enforce it (module docstring; in place)."""
    for path, item in document.get("paths", {}).items():
        for method, op in item.items():
            if not isinstance(op, dict) or not op.get("security"):
                continue
            if not settings.tokens:
                del op["security"]
            elif (path, method) not in writers and not settings.auth_reads and not token_optional(op):
                op["security"] = [OPTIONAL, *op["security"]]
    if not settings.tokens:
        document.get("components", {}).pop("securitySchemes", None)
    return document


def document_security(app: FastAPI, settings: Settings) -> None:
    """Make `app`'s OpenAPI document state the token requirements `settings` enforce (module docstring)."""
    amend(app, lambda document: secure(document, settings, writer_operations(app)))
