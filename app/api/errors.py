"""Every error is an RFC 9457 problem detail (``application/problem+json``), via fastapi-problem.

- a malformed body or parameter: 422 naming the field, what is wrong and how to fix it;
- a problem the engine rejects (`workload.errors.ProblemError`: a bad einsum token, an unknown
  target, an override out of range, a problem the target cannot run): 422 with ``token`` and
  ``hint`` members, the same words the CLI prints;
- unknown job or target: 404; cancelling a finished job: 409; a body over the limit: 413;
- the database unreachable (restarted, network gone): 503 with ``Retry-After``, saying to retry;
- anything unexpected: 500 with a generic message (the log has the traceback, the client never).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi_problem.error import (
    ConflictProblem,
    NotFoundProblem,
    Problem,
    ServerProblem,
    StatusProblem,
    UnprocessableProblem,
)
from fastapi_problem.handler import (
    ExceptionHandler,
    Handler,
    add_exception_handler,
    http_exception_handler_,
    new_exception_handler,
)
from optuna.exceptions import StorageInternalError
from pydantic import ValidationError
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.exceptions import HTTPException
from starlette.routing import compile_path

from mapper.settings import MAX_SECONDS, MAX_TRIALS
from workload.errors import ProblemError
from workload.spec import FIELD_HINTS, KIND_ERROR

log = logging.getLogger("tensormapper.api")


class NotFound(NotFoundProblem):
    title = "Not found"


class Conflict(ConflictProblem):
    title = "Conflict"


class Unprocessable(UnprocessableProblem):
    title = "Unprocessable request"

    def __init__(self, detail: str | None = None, **kwargs: Any) -> None:
        # every 422 carries `errors` (the OpenAPI schema of a 422 requires it): one entry unless given
        where = kwargs.get("field") or kwargs.get("token") or kwargs.get("limit") or "body"
        kwargs.setdefault("errors", [{"loc": [where], "msg": detail or "", "type": "unprocessable"}])
        super().__init__(detail, **kwargs)


class TooMany(StatusProblem):
    title = "Too many requests"
    status = 429


class UnsupportedMediaType(StatusProblem):
    title = "Unsupported media type"
    status = 415


class Unauthorized(StatusProblem):
    title = "Unauthorized"
    status = 401

    def __init__(self, detail: str | None = None, **kwargs: Any) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"}, **kwargs)


class InternalError(ServerProblem):
    title = "Internal server error"

    def __init__(self, detail: str | None = None, **kwargs: Any) -> None:  # never echo an internal message
        super().__init__("the service failed unexpectedly; its log has the details", **kwargs)


class StorageUnavailable(StatusProblem):
    title = "Storage unavailable"
    status = 503

    def __init__(self, detail: str | None = None, **kwargs: Any) -> None:
        super().__init__(detail, headers={"Retry-After": str(RETRY_AFTER_SECONDS)}, **kwargs)


class NotReady(StatusProblem):
    title = "Not ready"
    status = 503


class BadRequest(StatusProblem):
    title = "Bad request"
    status = 400


class ValidationTimedOut(StatusProblem):
    title = "Validation timed out"
    status = 503


#: what a client is told to wait when the database is away (a restart takes seconds)
RETRY_AFTER_SECONDS = 5

#: the errors that mean the database cannot be reached (app.jobs.outage tells them apart the same way)
STORAGE_OUTAGES = (OperationalError, InterfaceError, StorageInternalError)


#: a search budget over the engine's fixed limit (app.jobs.models): say it is fixed, and which setting is the service's
BUDGET_HINTS = {
    "trials": f"ask for at most {MAX_TRIALS} trials, a fixed limit (the service's own, TM_MAX_TRIALS, is at or "
    "below it)",
    "seconds": f"ask for at most {MAX_SECONDS:g} seconds, a fixed limit (the service's own, TM_MAX_SEARCH_SECONDS, "
    "is at or below it)",
}


def _hint(err: dict[str, Any]) -> str:
    kind = str(err.get("type", ""))
    loc = [str(x) for x in err.get("loc", ())]
    if kind in ("less_than_equal", "finite_number") and loc and loc[-1] in BUDGET_HINTS and len(loc) <= 2:
        return BUDGET_HINTS[loc[-1]]
    named = [x for x in loc if x in FIELD_HINTS]
    if kind == "missing":
        return "add this field"
    if kind == "extra_forbidden":
        return "remove this field (check its spelling)"
    if kind in ("union_tag_invalid", "union_tag_not_found", KIND_ERROR):
        return "set kind to 'einsum' or 'conv2d'"
    if named:
        return FIELD_HINTS[named[-1]]
    if kind == "json_invalid":
        return "send a valid JSON document"
    if kind.startswith("int"):
        return 'give a whole number, e.g. 64 (not 64.0 or "64")'
    if kind == "literal_error":
        return f"use one of {(err.get('ctx') or {}).get('expected', 'the documented values')}"
    return "see the request schema at /docs"


def _where(loc: tuple[Any, ...]) -> str:
    """The field path as a client wrote it (without pydantic's union member tags)."""
    tags = {"einsum", "conv2d", "EinsumSpec", "Conv2dSpec", "function-after[_one_source_and_target()]"}
    parts = [str(x) for x in loc if str(x) not in tags and not str(x).startswith("function-")]
    return ".".join(parts) or "body"


def explain_validation(errors: list[dict[str, Any]]) -> tuple[str, str, str]:
    """(detail, field, hint) for the first of pydantic's errors."""
    first = errors[0] if errors else {"msg": "invalid request", "loc": ()}
    if first.get("type") == "missing" and tuple(first.get("loc", ())) == ("body",):
        return "the request has no body", "body", "send a JSON object; /docs has an example for every route"
    if first.get("type") == "model_attributes_type" and tuple(first.get("loc", ())) == ("body",):
        return "the body is not a JSON object", "body", "send a JSON object; /docs has an example for every route"
    if first.get("type") == "json_invalid":
        loc = tuple(first.get("loc", ()))
        at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        ctx = first.get("ctx")
        why = ctx.get("error", "") if isinstance(ctx, dict) else ""
        return f"the body is not valid JSON{at}: {why}".rstrip(": "), "body", _hint(first)
    where = _where(tuple(first.get("loc", ())))
    msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    return f"invalid {where}: {msg}", where, _hint(first)


def _errors(exc: RequestValidationError | ValidationError) -> list[dict[str, Any]]:
    # errors may hold exceptions and bytes; keep what JSON can carry
    raw = exc.errors()
    return list(json.loads(json.dumps(raw, default=str)))


def _request_validation(_eh: ExceptionHandler, _request: Request, exc: RequestValidationError) -> Problem:
    errs = _errors(exc)
    detail, field, hint = explain_validation(errs)
    for e in errs:
        e.pop("input", None)  # a body can be large; the location says where
        e.pop("url", None)
    return Unprocessable(detail, field=field, hint=hint, errors=errs)


def _pydantic(_eh: ExceptionHandler, _request: Request, exc: ValidationError) -> Problem:
    errs = _errors(exc)
    detail, field, hint = explain_validation(errs)
    return Unprocessable(detail, field=field, hint=hint)


def printable(text: str) -> str:
    """`text` with what UTF-8 cannot carry (lone surrogates) escaped: a problem detail may echo any input."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _problem_error(_eh: ExceptionHandler, _request: Request, exc: ProblemError) -> Problem:
    hint = printable(exc.hint or "see the problem format in the README")
    return Unprocessable(printable(exc.message), token=printable(exc.token), hint=hint)


def _unparsable_body(cause: BaseException | None) -> Problem:
    """FastAPI's 400 "There was an error parsing the body", said with its cause and the fix."""
    if isinstance(cause, RecursionError):
        detail = "the body nests arrays or objects too deeply to parse"
        hint = "send the documented shape: no request nests more than a few levels"
    elif isinstance(cause, UnicodeDecodeError):
        detail = f"the body is not UTF-8 text (byte {cause.start} cannot start or continue a character)"
        hint = "send JSON encoded as UTF-8"
    else:
        detail = f"the body could not be parsed as JSON ({type(cause).__name__ if cause else 'unknown cause'})"
        hint = "send a valid JSON document with Content-Type: application/json"
    return BadRequest(detail, field="body", hint=hint)


def documented_methods(request: Request) -> str:
    """The methods the OpenAPI document lists for the request's path ("GET, POST"), "" for an undocumented path.

    Starlette's 405 names the methods of the first route whose path matches, and GET and POST
    /v1/tunings are two routes: its ``Allow`` would leave one out."""
    methods: set[str] = set()
    for template, item in request.app.openapi().get("paths", {}).items():
        if compile_path(template)[0].match(request.url.path):
            methods |= {m.upper() for m in item}
    return ", ".join(sorted(methods))


def _http_exception(eh: ExceptionHandler, request: Request, exc: HTTPException) -> Problem:
    """Starlette's and FastAPI's own errors, with details a client can act on."""
    if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
        return _unparsable_body(exc.__cause__)
    if exc.status_code == 404 and exc.detail == "Not Found":
        return Problem(
            title="Not found",
            type_="http-not-found",
            status=404,
            detail=f"no route {printable(request.url.path)!r}: every route is listed at /docs (and /openapi.json)",
        )
    if exc.status_code == 405 and exc.detail == "Method Not Allowed":
        allowed = documented_methods(request) or (exc.headers or {}).get("Allow", "")
        return Problem(
            title="Method not allowed",
            type_="http-method-not-allowed",
            status=405,
            detail=f"{request.method} is not allowed on {printable(request.url.path)!r}; allowed: {allowed}",
            headers={**(exc.headers or {}), "Allow": allowed},
        )
    return http_exception_handler_(eh, request, exc)


def _storage_outage(_eh: ExceptionHandler, _request: Request, exc: Exception) -> Problem:
    log.warning("storage unreachable: %s: %s", type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "")
    return StorageUnavailable(
        f"the job database is unreachable ({type(exc).__name__}): the request was not completed",
        hint=f"retry in {RETRY_AFTER_SECONDS} s; GET /v1/ready says when the storage is back",
    )


def install(app: FastAPI) -> None:
    """Answer every error of `app` with a problem detail."""
    handlers: dict[type[Exception], Handler] = {ProblemError: _problem_error, ValidationError: _pydantic}
    handlers |= dict.fromkeys(STORAGE_OUTAGES, _storage_outage)
    eh = new_exception_handler(
        logger=log,
        unhandled_wrappers={"default": InternalError},
        handlers=handlers,
        request_validation_handler=_request_validation,
        http_exception_handler=_http_exception,
    )
    add_exception_handler(app, eh)
    for kind in (ProblemError, ValidationError, *STORAGE_OUTAGES):  # answered by the routing layer, never a 500
        app.add_exception_handler(kind, eh)
