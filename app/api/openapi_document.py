"""Edits to the app's OpenAPI document, applied when FastAPI builds it (it then keeps the document)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

Document = dict[str, Any]


def amend(app: FastAPI, edit: Callable[[Document], Document]) -> None:
    """Make `app.openapi()` return its document passed through `edit` (in place and idempotent, as
    `app.openapi()` runs once per request that reads the document)."""
    build: Callable[[], Document] = app.openapi

    def openapi() -> Document:
        return edit(build())

    app.openapi = openapi  # type: ignore[method-assign]
