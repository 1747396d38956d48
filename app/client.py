"""A small client of the service's REST API (``/v1``), used by ``mapper ... --server URL``.

`ApiClient` wraps an `httpx.Client`; pass one (for example FastAPI's `TestClient`, which is an
`httpx.Client` over the app in-process) or let it make its own. A `token` is sent as
``Authorization: Bearer <token>`` (services that set ``TM_API_TOKENS`` want one to create or cancel).
Jobs come back as the API's JSON objects (dicts). Errors:

- `ServerUnreachable`: no connection to the URL (refused, DNS, TLS, connect timeout);
- `ApiError`: an error answer; its problem details (RFC 9457: title, status, detail, token, hint)
  become one line with `ApiError.one_line`;
- `WaitTimeout`: `ApiClient.wait` ran out of time before the job finished (the job keeps running).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

FINISHED = ("succeeded", "failed", "cancelled")

#: called with each progress (``{"done", "total", "unit", "best"}``) while waiting
OnProgress = Callable[[dict[str, Any]], None]


class ClientError(Exception):
    """Base of the client's errors."""


class ServerUnreachable(ClientError):
    """The server did not answer at all."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"cannot reach the server at {url}: {reason}")


class ApiError(ClientError):
    """The server answered with an error (problem details when it sent them)."""

    def __init__(self, status: int, title: str, detail: str, *, token: str = "", hint: str = "") -> None:
        self.status = status
        self.title = title
        self.detail = detail
        self.token = token
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """``detail (at 'token'): hint``, the same shape as the engine's own problem errors."""
        text = " ".join((self.detail or self.title or f"HTTP {self.status}").split())
        if self.token:
            text += f" (at {self.token!r})"
        if self.hint:
            text += f": {' '.join(self.hint.split())}"
        return text

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            reason = response.reason_phrase or "error"
            return cls(response.status_code, reason, f"the server answered {response.status_code} {reason}")
        return cls(
            int(body.get("status") or response.status_code),
            str(body.get("title") or ""),
            str(body.get("detail") or body.get("title") or f"the server answered {response.status_code}"),
            token=str(body.get("token") or ""),
            hint=str(body.get("hint") or ""),
        )


class WaitTimeout(ClientError):
    """The wait ran out before the job finished."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        super().__init__(f"job {job.get('id')} is still {job.get('state')}")


class ApiClient:
    """The service API at `base_url` (``http://host:port``), over `http` if given."""

    def __init__(
        self, base_url: str, http: httpx.Client | None = None, *, token: str | None = None, timeout: float = 30.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = http if http is not None else httpx.Client(timeout=timeout, follow_redirects=True)
        self._owned = http is None
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def close(self) -> None:
        if self._owned:
            self.http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---- plumbing ------------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, self._url(path), headers=self._headers, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as e:
            raise ServerUnreachable(self.base_url, str(e) or type(e).__name__) from None
        except httpx.TransportError as e:
            raise ServerUnreachable(self.base_url, f"{type(e).__name__}: {e}") from None
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._request(method, path, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise ApiError(response.status_code, "bad answer", f"{path} did not answer JSON") from None

    # ---- the API -------------------------------------------------------------------------------

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /v1/tunings``: the new job (or the existing job of an identical request)."""
        job: dict[str, Any] = self._json("POST", "/v1/tunings", json=body)
        return job

    def job(self, job_id: str) -> dict[str, Any]:
        """``GET /v1/tunings/{id}``."""
        job: dict[str, Any] = self._json("GET", f"/v1/tunings/{job_id}")
        return job

    def jobs(self, state: str | None = None, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """``GET /v1/tunings``: ``{"items": [...], "next_cursor": ...}``."""
        params = {k: v for k, v in (("state", state), ("limit", limit), ("cursor", cursor)) if v is not None}
        page: dict[str, Any] = self._json("GET", "/v1/tunings", params=params)
        return page

    def cancel(self, job_id: str) -> dict[str, Any]:
        """``POST /v1/tunings/{id}/cancel``: the job (ApiError 409 if it already finished)."""
        job: dict[str, Any] = self._json("POST", f"/v1/tunings/{job_id}/cancel")
        return job

    def result(self, job_id: str) -> dict[str, Any]:
        """``GET /v1/tunings/{id}/result``: a TuneResult, WorkloadResult or ``{"rows": [...]}`` (by the job's kind)."""
        result: dict[str, Any] = self._json("GET", f"/v1/tunings/{job_id}/result")
        return result

    def report(self, job_id: str) -> str:
        """``GET /v1/tunings/{id}/report``: the job's result as an HTML page."""
        return self._request("GET", f"/v1/tunings/{job_id}/report").text

    def targets(self) -> Any:
        """``GET /v1/targets``."""
        return self._json("GET", "/v1/targets")

    def workloads(self) -> Any:
        """``GET /v1/workloads``."""
        return self._json("GET", "/v1/workloads")

    def events(
        self, job_id: str, *, read_timeout: float | None = None, max_seconds: float | None = None
    ) -> Iterator[tuple[str, Any]]:
        """``GET /v1/tunings/{id}/events``: (event name, decoded data) until the server closes the stream.

        `max_seconds` asks the server to close the stream after that long; httpx.ReadTimeout is raised
        when nothing arrives for `read_timeout` seconds.
        """
        timeout = httpx.Timeout(10.0, read=read_timeout)
        params = {} if max_seconds is None else {"max_seconds": min(max(max_seconds, 0.01), 86_400.0)}
        try:
            with self.http.stream(
                "GET",
                self._url(f"/v1/tunings/{job_id}/events"),
                params=params,
                headers={"Accept": "text/event-stream", **self._headers},
                timeout=timeout,
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError.from_response(response)
                yield from parse_sse(response.iter_lines())
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as e:
            raise ServerUnreachable(self.base_url, str(e) or type(e).__name__) from None

    def wait(
        self,
        job_id: str,
        *,
        seconds: float | None = None,
        on_progress: OnProgress | None = None,
        poll: float = 0.5,
    ) -> dict[str, Any]:
        """Follow a job until it finishes and return the final job; `WaitTimeout` after `seconds`.

        Follows the event stream; if the stream breaks off (or the server has none), polls the job.
        """
        deadline = None if seconds is None else time.monotonic() + seconds
        job = self.job(job_id)
        if job.get("state") in FINISHED:
            return job
        try:
            left = _left(deadline)
            stream = self.events(job_id, read_timeout=None if left is None else left + 5.0, max_seconds=left)
            for name, data in stream:
                if name == "progress" and isinstance(data, dict) and on_progress is not None:
                    on_progress(data)
                elif name in ("state", "end") and isinstance(data, dict):
                    job = data
                    if on_progress is not None and isinstance(job.get("progress"), dict):
                        on_progress(job["progress"])
                    if name == "end" or job.get("state") in FINISHED:
                        return job
                if deadline is not None and time.monotonic() >= deadline:
                    raise WaitTimeout(self.job(job_id))
        except (httpx.TimeoutException, httpx.RemoteProtocolError, httpx.ReadError):
            pass  # nothing heard in time, or the stream broke off: look at the job below
        except ApiError as e:
            if e.status not in (404, 405):  # no event route on this server: poll (an unknown job 404s below)
                raise
        while True:
            job = self.job(job_id)
            if on_progress is not None and isinstance(job.get("progress"), dict):
                on_progress(job["progress"])
            if job.get("state") in FINISHED:
                return job
            left = _left(deadline)
            if left is not None and left <= 0:
                raise WaitTimeout(job)
            time.sleep(poll if left is None else min(poll, left))


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, Any]]:
    """Server-sent events from text lines: (event name, JSON-decoded data or the raw text)."""
    name, data = "message", list[str]()
    for line in lines:
        line = line.rstrip("\r\n")
        if not line:
            if data:
                raw = "\n".join(data)
                try:
                    decoded: Any = json.loads(raw)
                except ValueError:
                    decoded = raw
                yield name, decoded
            name, data = "message", list[str]()
        elif line.startswith(":"):
            continue  # a comment (keep-alive)
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
    if data:
        raw = "\n".join(data)
        try:
            yield name, json.loads(raw)
        except ValueError:
            yield name, raw
