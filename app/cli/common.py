"""What every `mapper` command shares: exit codes, option types, one-line errors, the API client."""

from __future__ import annotations

import os
import sys
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from app import baseline as bl
from app.client import ApiClient, ApiError, ServerUnreachable
from mapper.result import TuneResult
from mapper.workloads import WorkloadResult
from workload.errors import ProblemError

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_CANCELLED = 4
EXIT_TIMEOUT = 5
EXIT_REGRESSION = 6
EXIT_INTERRUPTED = 130

EXIT_CODES = (
    "Exit codes: 0 ok; 2 usage error or bad problem (also an error answer of the server, or no server at the URL); "
    "3 no feasible mapping, failed validation or failed job; 4 cancelled; 5 --wait ran out (the job keeps running); "
    "6 regression against --baseline. When several apply, the smallest wins."
)


MAX_FILE_BYTES = 16 << 20
MAX_NESTING = 64

Result = TuneResult | WorkloadResult
Row = tuple[str, Result | None, str | None]  # target, result, error


#: the width of tables and dumps on standard output when it is not a terminal (a pipe, a CI log, a file) and
#: ``COLUMNS`` does not say: wide enough that no line is cut or wrapped at rich's default of 80 columns
PIPED_WIDTH = 240


def out_console() -> Console:
    """Standard output's console: a terminal's own width; piped or redirected, `PIPED_WIDTH` (or ``COLUMNS``)."""
    piped = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    return Console(width=PIPED_WIDTH if piped else None)


class UsageError(Exception):
    """A command-line value a user must fix."""


# ---- options shared by several commands -----------------------------------------------------

ServerOpt = Annotated[
    str | None, typer.Option("--server", envvar="TM_SERVER", help="service URL, e.g. http://127.0.0.1:8000")
]
TokenOpt = Annotated[
    str | None,
    typer.Option("--token", envvar="TM_TOKEN", show_default=False, help="bearer token of the service (TM_API_TOKENS)"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON for machines")]
WaitOpt = Annotated[
    float | None,
    typer.Option("--wait", min=0, help="seconds to wait for the server's job (then exit 5; the job keeps running)"),
]
BaselineOpt = Annotated[
    Path | None, typer.Option("--baseline", help="compare the tuned costs with this baseline file (exit 6 if worse)")
]
ToleranceOpt = Annotated[str, typer.Option("--tolerance", help="allowed worsening against --baseline: 2% or 0.02")]
WriteBaselineOpt = Annotated[
    Path | None,
    typer.Option("--write-baseline", help="record the tuned costs in this baseline file (merged into it if it exists)"),
]


def _fail(message: str, code: int = EXIT_USAGE) -> typing.NoReturn:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(code=code)


def _note(message: str) -> None:
    typer.echo(message, err=True)


@contextmanager
def _user_errors(server: str | None = None) -> Iterator[None]:
    """Turn the errors a user can fix into one line and exit code 2 (with the `server` of a command about one
    job, the service's 404 for an unknown job says how to list them with the CLI)."""
    try:
        yield
    except ApiError as e:
        if server is not None and e.status == 404 and e.detail.startswith("no tuning job"):
            e = ApiError(e.status, e.title, e.detail, hint=f"list jobs with `mapper status --server {server}`")
        _fail(str(e))
    except (ProblemError, UsageError, bl.BaselineError, ServerUnreachable) as e:
        _fail(str(e))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "value"
        _fail(f"invalid {where}: {str(first['msg']).removeprefix('Value error, ')}")


def make_client(server: str, token: str | None = None) -> ApiClient:
    """The API client of `--server` (tests replace this to serve the app in-process)."""
    return ApiClient(server if "://" in server else f"http://{server}", token=token)


# ---- parsing flags and files ----------------------------------------------------------------
