"""The project's own validation error for malformed problems."""

from __future__ import annotations


class ProblemError(Exception):
    """A problem specification is malformed.

    Attributes:
        message: what is wrong.
        token: the offending token of the input (an axis name, a dtype, a parameter name...).
        hint: how to fix it.

    Deliberately not a ``ValueError``: pydantic passes it through unchanged from validators, so
    callers see this error (with its token and hint) rather than a generic validation error.
    """

    def __init__(self, message: str, *, token: str = "", hint: str = "") -> None:
        self.message = message
        self.token = token
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" (at {self.token!r})" if self.token else ""
        fix = f": {self.hint}" if self.hint else ""
        return f"{self.message}{where}{fix}"

    def to_dict(self) -> dict[str, str]:
        return {"message": self.message, "token": self.token, "hint": self.hint}
