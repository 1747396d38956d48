"""What a JSON request body must be before its fields are looked at: JSON, finite, valid Unicode.

FastAPI parses a body as JSON only when its ``Content-Type`` says so; any other type, or none,
reaches the model as raw bytes, and the client reads "Input should be a valid dictionary" about a
body that may well be JSON. Python's parser also takes what JSON (RFC 8259) does not
have: the literals ``NaN``, ``Infinity`` and ``-Infinity`` (which then pass as numbers, e.g. an
infinite clock override), and a ``\\ud800`` escape with no partner (a lone UTF-16 surrogate, a
string nothing can encode: a database refuses it, a response cannot carry it).

`require_json_body`, a dependency of the routes with a JSON body, answers those with problem
details before any field is checked: 415 for a body not declared as JSON (naming the type sent), 422 naming
where a non-finite number or a lone surrogate sits. A valid body costs two substring searches.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import Depends, Request

from app.api.errors import Unprocessable, UnsupportedMediaType

#: A \\uD800-\\uDFFF escape: a surrogate, paired or not (decoding tells: a pair becomes one character).
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
NON_FINITE = (b"NaN", b"Infinity")
JSON_TYPES = "application/json (or any type ending in +json)"


def is_json_type(content_type: str) -> bool:
    """Whether FastAPI parses a body of this ``Content-Type`` as JSON (never one without a type: its
    `strict_content_type`)."""
    media = content_type.split(";", 1)[0].strip().lower()
    main, _, sub = media.partition("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


class _NotFinite(ValueError):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _reject_constant(literal: str) -> Any:
    raise _NotFinite(literal)


def _lone_surrogate(value: Any, path: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """(where, the string) of the first string (key or value) holding a lone surrogate, if any."""
    if isinstance(value, str):
        return (".".join(path) or "body", value) if any("\ud800" <= ch <= "\udfff" for ch in value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            hit = _lone_surrogate(k, (*path, "<key>")) or _lone_surrogate(v, (*path, str(k)))
            if hit is not None:
                return hit
    if isinstance(value, list):
        for i, v in enumerate(value):
            hit = _lone_surrogate(v, (*path, str(i)))
            if hit is not None:
                return hit
    return None


def check_json_text(body: bytes) -> None:
    """Raise a 422 problem if `body` (JSON text) holds NaN/Infinity or a lone surrogate; else nothing.

    Text that is not JSON at all passes: the route's parser reports it with its position."""
    suspicious_number = any(token in body for token in NON_FINITE)
    if not suspicious_number and SURROGATE_ESCAPE.search(body) is None:
        return
    try:
        parsed = json.loads(body, parse_constant=_reject_constant)
    except _NotFinite as e:
        raise Unprocessable(
            f"the body holds {e.literal}, which JSON does not have (RFC 8259 numbers are finite)",
            field="body",
            hint="send a finite number, or leave the field out to take its default",
        ) from None
    except ValueError:  # not JSON (or not UTF-8): the route's own parser says where
        return
    check_unicode(parsed)


def check_unicode(value: Any) -> None:
    """Raise a 422 problem naming the first string of `value` (parsed JSON or YAML) with a lone surrogate."""
    hit = _lone_surrogate(value)
    if hit is not None:
        where, text = hit
        shown = text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")[:80]
        raise Unprocessable(
            f"invalid {where}: the string {shown!r} holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape "
            "without its partner), which is not a character",
            field=where,
            hint="send valid Unicode: escape a character outside the BMP as a surrogate pair, or send it as UTF-8",
        )


async def require_json_body(request: Request) -> None:
    """415 unless the body is declared as JSON; 422 for NaN/Infinity or a lone surrogate (module docstring)."""
    content_type = request.headers.get("content-type", "")
    body = await request.body()  # FastAPI has read the body already: this is its cached copy
    if not is_json_type(content_type) and (body or content_type):  # no body, no type: "the request has no body"
        sent = f"as {content_type.split(';', 1)[0].strip()!r}" if content_type else "without a Content-Type"
        raise UnsupportedMediaType(
            f"the body is sent {sent}; this route reads JSON",
            hint=f"send the body as JSON with Content-Type: {JSON_TYPES}",
            accepted=["application/json"],
        )
    check_json_text(body)


JsonBody = Depends(require_json_body)
