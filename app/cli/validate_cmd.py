"""``mapper validate FILE``: run a mapping in the executor on this machine, with no service limit.

FILE holds the body of ``POST /v1/mappings/validate`` (``{"problem": ..., "mapping": ..., "seed": 0}``,
JSON or YAML). The service refuses runs over its size or time limits and names this command:
the same body, the same executor (`executor.validate.validate`), the same report. The executor's
own bound on reduction steps still applies (over it, a proxy over a shorter reduction runs and the
report says so); ``--max-steps`` raises it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml

from app.cli.commands import app
from app.cli.common import EXIT_FAILED, JsonOpt, UsageError, _fail, _user_errors
from executor.validate import DEFAULT_MAX_STEPS, ValidationTooLarge, validate

if TYPE_CHECKING:
    from app.api.schemas_engine import ValidateRequest


def read_body(file: Path, route: str) -> dict[str, Any]:
    """The request body of `route` in `file` (JSON or YAML); a `UsageError` saying what is wrong otherwise."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {file}: {e}") from None
    try:
        data = yaml.safe_load(text) if file.suffix.lower() in (".yaml", ".yml") else json.loads(text)
    except RecursionError:
        raise UsageError(f"{file.name} is nested too deeply to read; give the body of {route}") from None
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        what = f"{file.name} is not {'YAML' if file.suffix.lower() in ('.yaml', '.yml') else 'JSON'}"
        raise UsageError(f"{what} ({' '.join(str(e).split())}); give the body of {route}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{file.name} holds no object; give the body of {route}")
    return data


def read_validate_request(file: Path) -> ValidateRequest:
    """The request body in `file` (JSON or YAML); a `UsageError` saying what is wrong otherwise."""
    data = read_body(file, "POST /v1/mappings/validate")
    from app.api.schemas_engine import ValidateRequest  # (the service's schemas: imported by this command only)

    return ValidateRequest.model_validate(data)


@app.command("validate")
def validate_file(
    file: Annotated[Path, typer.Argument(help="JSON/YAML file: the body of POST /v1/mappings/validate")],
    as_json: JsonOpt = False,
    max_steps: Annotated[
        int,
        typer.Option(
            min=1,
            help="reduction steps to run before validating a proxy over a shorter reduction (the executor's limit)",
        ),
    ] = DEFAULT_MAX_STEPS,
) -> None:
    """Run a mapping tile by tile in numpy on seeded inputs and compare it with the exact reference (what
    POST /v1/mappings/validate does, without the service's size and time limits). Exit 3 if it fails."""
    from app.api.engine_support import mapping_errors  # (the service's modules: imported by this command only)
    from app.api.schemas_engine import ValidationReportOut

    with _user_errors():
        req = read_validate_request(file)
        problem = req.problem.to_problem()
        errors = mapping_errors(problem, req.mapping)
        if errors:
            raise UsageError(f"the mapping does not match the problem: {'; '.join(errors[:5])}")
    try:
        report = validate(problem, req.mapping, seed=req.seed, max_steps=max_steps)
    except ValidationTooLarge as e:
        _fail(f"not validated: {e}", EXIT_FAILED)
    out = ValidationReportOut.of(report.model_dump(mode="python"))
    if as_json:
        typer.echo(out.model_dump_json(indent=2))
    else:
        typer.echo(f"{report.status}: {report.reason}")
    if not report.passed:
        raise typer.Exit(EXIT_FAILED)
