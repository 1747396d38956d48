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


class DeclaredBodyLimit:
    """Refuse requests whose Content-Length exceeds `limit` bytes with an RFC 9457 413."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            declared = dict(scope.get("headers") or []).get(b"content-length", b"")
            if declared.isdigit() and int(declared) > self.limit:
                await self._refuse(int(declared), send)
                return
        await self.app(scope, receive, send)

    async def _refuse(self, size: int, send: Send) -> None:
        body = json.dumps(
            {
                "type": "request-too-large",
                "title": "Request body too large",
                "status": 413,
                "detail": f"the body has {size} bytes; this service accepts at most {self.limit}",
                "hint": HINT,
            }
        ).encode()
        headers = [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def install(app: FastAPI, limit: int) -> None:
    """Limit `app`'s request bodies to `limit` bytes (the last middleware added runs first)."""
    app.add_middleware(RequestBodyLimitMiddleware, max_body_size=limit)
    app.add_middleware(DeclaredBodyLimit, limit=limit)
