"""``mapper evaluate FILE``: price a point or a mapping on a target on this machine, as ``POST /v1/mappings/evaluate``.

FILE holds that route's body (``{"problem": ..., "target": ..., "overrides": {...}, "point": {...}}`` or a
``"mapping"`` instead of the point; JSON or YAML). A point names the target's search parameters or its own knobs (a
vendor's published configuration: Tensix's ``act_block_h`` and ``out_subblock``). The answer is the route's: the
violations with their codes and reasons, or the cost, the gap to the roofline bound and the target's dump.
``--validate`` then runs the mapping in the executor (`mapper validate`). Exit 0 when the mapping is feasible (and
passes, with ``--validate``), 3 when it is not, 2 for a request the route would refuse (its reason and hint).
The service's problem-size limit (``TM_MAX_MACS``) does not apply here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.commands import app
from app.cli.common import EXIT_FAILED, JsonOpt, _fail, _user_errors
from app.cli.validate_cmd import read_body
from executor.validate import DEFAULT_MAX_STEPS, ValidationTooLarge, validate

ROUTE = "POST /v1/mappings/evaluate"


def _summary(out: dict[str, Any]) -> list[str]:
    """The answer as a person reads it: the verdict, then the cost or the reasons."""
    head = f"{out['target']} ({out['family']})"
    if not out["feasible"]:
        return [f"{head}: not feasible"] + [f"  {v['code']}: {v['message']}" for v in out["violations"]]
    cost = out["cost"]
    lines = [f"{head}: feasible"]
    lines += [f"  {name}: {value:.6g}" for name, value in out["objectives"].items()]
    lines.append(f"  cycles: {cost['cycles']:.6g} ({cost['bound']}-bound)")
    if out["gap"] is not None:
        lines.append(f"  gap to the roofline bound: {out['gap']:.1%}")
    lines += [f"  note: {n}" for n in cost.get("notes", [])]
    if out.get("render"):
        lines += ["", str(out["render"])]
    return lines


@app.command("evaluate")
def evaluate_file(
    file: Annotated[Path, typer.Argument(help="JSON/YAML file: the body of POST /v1/mappings/evaluate")],
    as_json: JsonOpt = False,
    run: Annotated[bool, typer.Option("--validate", help="run the mapping in the executor too")] = False,
    max_steps: Annotated[
        int, typer.Option(min=1, help="with --validate: reduction steps before a proxy over a shorter reduction")
    ] = DEFAULT_MAX_STEPS,
) -> None:
    """Price a point (the target's parameters or its own knobs) or a mapping on a target: the violations, or the cost
    and the target's dump (what POST /v1/mappings/evaluate answers). Exit 3 if it is not feasible (or, with
    --validate, fails the executor)."""
    from app.api.errors import Unprocessable  # (the service's modules: imported by this command only)
    from app.api.routes.mappings import evaluate
    from app.api.schemas_engine import EvaluateRequest, ValidationReportOut
    from app.settings import Settings

    with _user_errors():  # (a malformed file, body or problem: one line, exit 2)
        req = EvaluateRequest.model_validate(read_body(file, ROUTE))
        try:
            answer = evaluate(req, Settings(max_macs=float("inf")))
        except Unprocessable as e:
            hint = e.extras.get("hint")
            _fail(f"{e.detail}{f' ({hint})' if hint else ''}")
        except (ValueError, OverflowError, RecursionError) as e:  # (what the service's handlers make a 422)
            _fail(f"{ROUTE} would refuse this body: {' '.join(str(e).split())[:300]}")
    out = answer.model_dump(mode="json")
    report = None
    if run and answer.feasible and answer.mapping is not None:
        try:
            report = validate(req.problem.to_problem(), answer.mapping, max_steps=max_steps)
        except ValidationTooLarge as e:
            _fail(f"not validated: {e}", EXIT_FAILED)
        out["validation"] = ValidationReportOut.of(report.model_dump(mode="python")).model_dump(mode="json")
    if as_json:
        typer.echo(json.dumps(out, indent=2))
    else:
        for line in _summary(out):
            typer.echo(line)
        if report is not None:
            typer.echo(f"validation {report.status}: {report.reason}")
    if not answer.feasible or (report is not None and not report.passed):
        raise typer.Exit(EXIT_FAILED)
