"""Finished results answered from memory before routing: pre-encoded bytes, an ETag, 304 when it matches.

A finished job's result never changes, and the store keeps the most recently read ones in memory
as the bytes a response sends (`JobStore.finished_body`). `FinishedResults` answers
``GET /v1/tunings/{id}/result`` for those without FastAPI's routing, dependencies or a thread:
no database round trip, no JSON work. Anything else (a job not held, reads that need a token,
any other route) goes on to the app unchanged, where the route gives the same bytes and ETag.
The request is still counted by the metrics middleware under the route's path.
"""

from __future__ import annotations

import re

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

RESULT_PATH = re.compile(r"^/v1/tunings/([0-9a-f]{32})/result$")
ROUTE_PATH = "/v1/tunings/{job_id}/result"


def etag_matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 If-None-Match: `*` or a list of tags, weak or strong (weak comparison)."""
    tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
    return "*" in tags or etag in tags


class RouteLabel:
    """What the metrics middleware reads of ``scope["route"]``: the template of the route the fast path answers
    for (looking the route up in the app finds nothing when FastAPI keeps included routers nested)."""

    path = ROUTE_PATH


class FinishedResults:
    """Answer reads of finished results held in the app's store (see the module docstring)."""

    def __init__(self, app: ASGIApp, fastapi_app: FastAPI) -> None:
        self.app, self.fastapi_app = app, fastapi_app
        self.route = RouteLabel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            m = RESULT_PATH.match(scope["path"])
            store = getattr(self.fastapi_app.state, "store", None)
            hit = store.finished_body(m.group(1)) if m and store is not None else None
            if hit is not None:
                scope["route"] = self.route  # counted under the route, as if routed
                await self._answer(scope, send, *hit)
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _answer(scope: Scope, send: Send, body: bytes, etag: str) -> None:
        inm = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"if-none-match"), None)
        headers = [(b"etag", etag.encode()), (b"cache-control", b"no-cache")]
        if inm is not None and etag_matches(inm, etag):
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


def install(app: FastAPI, enabled: bool) -> None:
    """Put the fast path in front of the routes (inside the metrics middleware: call before `metrics.install`)."""
    if enabled:
        app.add_middleware(FinishedResults, fastapi_app=app)
