"""Dependencies of the routes, as `Annotated` aliases (the FastAPI full-stack template's way).

They are ``async def``: none of them blocks, and FastAPI runs a plain ``def`` dependency in the
thread pool, a hop per dependency per request that the read path does not need.

Authentication is optional: with ``TM_API_TOKENS`` set, creating or cancelling work needs
``Authorization: Bearer <token>`` (compared in constant time), and reads too when
``TM_AUTH_READS`` is true. A client is its token when it sends one, else its address: the unit of
the per-client job quota.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.errors import Unauthorized
from app.jobs.store import JobStore
from app.settings import Settings

bearer = HTTPBearer(auto_error=False, description="a token of TM_API_TOKENS (only when the service sets any)")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_store(request: Request) -> JobStore:
    store: JobStore = request.app.state.store
    return store


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[JobStore, Depends(get_store)]


def _check_token(settings: Settings, creds: HTTPAuthorizationCredentials | None) -> None:
    if not settings.tokens:
        return
    if creds is None:
        raise Unauthorized("this route needs a bearer token", hint="send Authorization: Bearer <token>")
    given = creds.credentials.encode()
    # compare with every token, always, so timing tells nothing about which or how much matched
    ok = [hmac.compare_digest(given, t.encode()) for t in settings.tokens]
    if not any(ok):
        raise Unauthorized("the bearer token is not one of this service's", hint="check TM_API_TOKENS")


async def require_writer(settings: SettingsDep, creds: Credentials) -> None:
    """Creating or cancelling work: a token when the service has any."""
    _check_token(settings, creds)


async def require_reader(settings: SettingsDep, creds: Credentials) -> None:
    """Reading: open unless TM_AUTH_READS asks for a token."""
    if settings.auth_reads:
        _check_token(settings, creds)


async def client_id(request: Request, creds: Credentials) -> str:
    """Who is asking: a digest of the bearer token, else the peer address."""
    if creds is not None:
        return "token:" + hashlib.sha256(creds.credentials.encode()).hexdigest()[:16]
    return "addr:" + (request.client.host if request.client else "unknown")


Writer = Depends(require_writer)
Reader = Depends(require_reader)
ClientDep = Annotated[str, Depends(client_id)]
