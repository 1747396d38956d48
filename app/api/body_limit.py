"""Request bodies over the limit get a 413 problem detail, whether their length is declared or not.

Starlette's `RequestBodyLimitMiddleware` counts the bytes of every body (chunked ones included)
and raises an HTTP 413 that the problem-detail handler answers; but a body whose declared
``Content-Length`` is already over the limit it answers itself, in plain text, before reading.
`DeclaredBodyLimit` sits outside it and answers that case in the service's error format.
"""

from __future__ import annotations

import json

from fastapi import FastAPI
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

HINT = "send a smaller body, or raise the limit with TM_MAX_BODY_BYTES"


#: Routes with a limit of their own: path prefix -> (setting name, its hint). Model uploads are larger.
MODEL_PREFIX = "/v1/models/"
MODEL_HINT = "send a smaller model (its weights as external data: only the graph is read), or raise TM_MAX_MODEL_BYTES"


class DeclaredBodyLimit:
    """Refuse requests whose Content-Length exceeds `limit` bytes (`model_limit` on model uploads) with a 413."""

    def __init__(self, app: ASGIApp, limit: int, model_limit: int | None = None) -> None:
        self.app = app
        self.limit = limit
        self.model_limit = model_limit or limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            model = str(scope.get("path", "")).startswith(MODEL_PREFIX)
            limit = self.model_limit if model else self.limit
            declared = dict(scope.get("headers") or []).get(b"content-length", b"")
            if declared.isdigit() and int(declared) > limit:
                await self._refuse(int(declared), limit, MODEL_HINT if model else HINT, send)
                return
        await self.app(scope, receive, send)

    async def _refuse(self, size: int, limit: int, hint: str, send: Send) -> None:
        body = json.dumps(
            {
                "type": "request-too-large",
                "title": "Request body too large",
                "status": 413,
                "detail": f"the body has {size} bytes; this route accepts at most {limit}",
                "hint": hint,
            }
        ).encode()
        headers = [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class CountedBodyLimit:
    """Starlette's `RequestBodyLimitMiddleware` (counting every chunk), with the model uploads' own limit."""

    def __init__(self, app: ASGIApp, limit: int, model_limit: int) -> None:
        self.default = RequestBodyLimitMiddleware(app, max_body_size=limit)
        self.models = RequestBodyLimitMiddleware(app, max_body_size=model_limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        model = scope["type"] == "http" and str(scope.get("path", "")).startswith(MODEL_PREFIX)
        await (self.models if model else self.default)(scope, receive, send)


def install(app: FastAPI, limit: int, model_limit: int | None = None) -> None:
    """Limit `app`'s request bodies to `limit` bytes, and to `model_limit` under /v1/models/ (the last
    middleware added runs first)."""
    app.add_middleware(CountedBodyLimit, limit=limit, model_limit=model_limit or limit)
    app.add_middleware(DeclaredBodyLimit, limit=limit, model_limit=model_limit or limit)
