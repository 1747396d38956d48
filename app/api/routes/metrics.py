"""Prometheus metrics at /metrics: requests, jobs by state, queue depth, search seconds.

Request counts and latencies are counted in this process; job figures are read from the
database at scrape time, so every API process reports the same totals.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.jobs.models import JOB_STATES
from app.jobs.store import JobStore

router = APIRouter(tags=["service"])


class JobCollector(Collector):
    """Job figures from the store, read when Prometheus scrapes."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        store: JobStore | None = getattr(self.app.state, "store", None)
        if store is None:
            return
        try:
            counts = store.counts()
            seconds, finished = store.search_seconds()
        except Exception:  # the database is down: /v1/ready says so; metrics carry what they can
            return
        g = GaugeMetricFamily("tm_jobs", "Tuning jobs by state", labels=["state"])
        for state in JOB_STATES:
            g.add_metric([state], counts.get(state, 0))
        yield g
        yield GaugeMetricFamily("tm_queue_depth", "Jobs waiting for a worker", value=counts.get("queued", 0))
        c = CounterMetricFamily("tm_search_seconds", "Seconds finished jobs spent running")
        c.add_metric([], seconds)
        yield c
        yield CounterMetricFamily("tm_jobs_finished", "Jobs that finished (any final state)", value=finished)


def install(app: FastAPI) -> None:
    """Count requests and expose the app's registry."""
    registry = CollectorRegistry()
    requests = Counter("tm_http_requests", "HTTP requests", ["method", "route", "status"], registry=registry)
    latency = Histogram("tm_http_request_seconds", "HTTP request latency", ["route"], registry=registry)
    registry.register(JobCollector(app))
    app.state.metrics_registry = registry

    app.add_middleware(CountRequests, requests=requests, latency=latency)


class CountRequests:
    """Pure ASGI middleware (no per-request task or body copy): counts each response by route and status."""

    def __init__(self, app: ASGIApp, requests: Counter, latency: Histogram) -> None:
        self.app, self.requests, self.latency = app, requests, latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = [500]

        async def send_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.requests.labels(scope["method"], route, str(status[0])).inc()
            self.latency.labels(route).observe(time.perf_counter() - t0)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus text format."""
    return Response(generate_latest(request.app.state.metrics_registry), media_type=CONTENT_TYPE_LATEST)
