"""The ``mapper`` console command: tune a problem or a workload in-process, list targets and workloads.

Errors a user can fix (a malformed problem, an unknown target, a bad setting) print one line
and exit with code 2; they never show a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.progress import Progress as RichProgress
from rich.table import Table

from mapper.cache import tune_cached
from mapper.display import show_result, show_workload
from mapper.settings import STRATEGIES, SearchSettings
from mapper.workloads import tune_layers
from workload.errors import ProblemError
from workload.problem import Problem

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Search accelerator mappings of tensor problems.")

CONV_KEYS = {
    "batch": "batch",
    "n": "batch",
    "in": "in_channels",
    "out": "out_channels",
    "h": "input_height",
    "w": "input_width",
    "k": "kernel",
    "s": "stride",
    "p": "padding",
    "d": "dilation",
    "g": "groups",
}


class UsageError(Exception):
    """A command-line value a user must fix."""


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        for part in item.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise UsageError(f"{what} {part!r} is not name=value")
            out[key.strip()] = value.strip()
    return out


def _int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{key}={value!r} is not an integer") from None


def problem_from_flags(
    einsum: str | None,
    sizes: list[str],
    conv: str | None,
    dtype: str,
    weight: str | None,
    reduce_op: str = "add",
    out_dtype: str | None = None,
) -> Problem:
    """Build the problem of ``--einsum/--size`` or ``--conv``."""
    if einsum:
        from workload.einsum import einsum as build_einsum

        dims = {k: _int(k, v) for k, v in _pairs(sizes, "--size").items()}
        w: int | str | None = int(weight) if weight and weight.isdigit() else weight
        return build_einsum(einsum, dims, dtype=dtype, weight=w, reduce_op=reduce_op, out_dtype=out_dtype)
    if reduce_op != "add":
        raise UsageError("--reduce-op applies to --einsum problems; a conv2d always reduces with add")
    assert conv is not None
    from workload.conv2d import conv2d

    params: dict[str, Any] = {}
    for key, value in _pairs([conv], "--conv").items():
        name = CONV_KEYS.get(key, key)
        params[name] = _int(key, value)
    try:
        return conv2d(dtype=dtype, out_dtype=out_dtype, **params)
    except TypeError as e:
        raise UsageError(f"--conv: {e}; keys: {', '.join(sorted(CONV_KEYS))}") from None


def problems_from_file(path: Path) -> list[Problem]:
    """A JSON or YAML problem file: one problem, or a list of them."""
    from workload.spec import problem_from_dict

    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise UsageError(f"{path} is not valid JSON or YAML: {e}") from None
    items = data if isinstance(data, list) else [data]
    return [problem_from_dict(d) for d in items]


def _overrides(items: list[str]) -> dict[str, Any]:
    return {k: yaml.safe_load(v) for k, v in _pairs(items, "--override").items()}


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=2)


@app.command()
def tune(
    einsum: Annotated[str | None, typer.Option(help='einsum, e.g. "mk,kn->mn"')] = None,
    size: Annotated[list[str], typer.Option(help="axis size, e.g. m=512 (repeatable)")] = [],  # noqa: B006
    conv: Annotated[str | None, typer.Option(help='conv2d, e.g. "batch=1,in=64,out=64,h=56,w=56,k=3,s=1,p=1"')] = None,
    file: Annotated[Path | None, typer.Option(help="JSON/YAML problem file")] = None,
    workload: Annotated[str | None, typer.Option(help="named workload, e.g. resnet50")] = None,
    param: Annotated[list[str], typer.Option(help="workload parameter name=value (repeatable)")] = [],  # noqa: B006
    dtype: Annotated[str, typer.Option(help="input dtype")] = "bf16",
    weight: Annotated[str | None, typer.Option(help="weight input (index or name)")] = None,
    reduce_op: Annotated[str, typer.Option(help="add | mul | max | min (einsum problems)")] = "add",
    out_dtype: Annotated[str | None, typer.Option(help="output dtype (default: the accumulation type)")] = None,
    target: Annotated[str, typer.Option(help="target preset (see `mapper targets`)")] = "rngd",
    override: Annotated[list[str], typer.Option(help="hardware override name=value (repeatable)")] = [],  # noqa: B006
    objective: Annotated[list[str], typer.Option(help="latency, offchip_bytes, footprint, energy")] = [],  # noqa: B006
    strategy: Annotated[str, typer.Option(help=" | ".join(STRATEGIES))] = "auto",
    trials: Annotated[int, typer.Option(help="maximum trials")] = SearchSettings().max_trials,
    seconds: Annotated[float, typer.Option(help="maximum seconds")] = SearchSettings().max_seconds,
    patience: Annotated[
        int, typer.Option(help="stop after this many trials without improvement (0: spend the whole budget)")
    ] = SearchSettings().patience,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    storage: Annotated[str | None, typer.Option(help="result cache: a journal file or a database URL")] = None,
    workers: Annotated[int, typer.Option(help="worker processes for workloads")] = 2,
    validate: Annotated[bool, typer.Option(help="run the executor on the best mapping")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Find the best mapping of a problem (or every layer of a workload) on a target."""
    sources = [x for x in (einsum, conv, file, workload) if x]
    if len(sources) != 1:
        _fail("give exactly one of --einsum, --conv, --file or --workload")
    try:
        settings = SearchSettings(
            strategy=strategy,
            objectives=tuple(objective) or ("latency",),
            max_trials=trials,
            max_seconds=seconds,
            patience=patience,
            seed=seed,
        )
        overrides = _overrides(override)
        if workload or file:
            if workload:
                from workload.named import load

                wparams = {k: yaml.safe_load(v) for k, v in _pairs(param, "--param").items()}
                problems, name = load(workload, **wparams), workload
            else:
                assert file is not None
                problems, name = problems_from_file(file), file.name
            if len(problems) > 1 or workload:
                w = tune_layers(
                    problems, target, settings, name=name, overrides=overrides, storage=storage,
                    workers=workers, validate=validate,
                )  # fmt: skip
                if as_json:
                    typer.echo(w.model_dump_json(indent=2))
                else:
                    show_workload(Console(), w)
                return
            problem = problems[0]
        else:
            problem = problem_from_flags(einsum, size, conv, dtype, weight, reduce_op, out_dtype)
        result = _run_one(problem, target, settings, overrides, storage, validate, progress=not as_json)
    except (ProblemError, UsageError) as e:
        _fail(str(e))
    except ValidationError as e:
        first = e.errors()[0]
        _fail(f"invalid {'.'.join(str(x) for x in first['loc'])}: {first['msg']}")
    except ImportError as e:
        _fail(f"target {target} is not available in this build ({e})")
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        show_result(Console(), result)


def _run_one(
    problem: Problem,
    target: str,
    settings: SearchSettings,
    overrides: dict[str, Any],
    storage: str | None,
    validate: bool,
    *,
    progress: bool,
) -> Any:
    if not (progress and sys.stdout.isatty()):
        return tune_cached(problem, target, settings, overrides=overrides, storage=storage, validate=validate)
    with RichProgress(transient=True) as bar:
        task = bar.add_task("searching", total=settings.max_trials)

        def tick(done: int, total: int, _best: float | None) -> None:
            bar.update(task, completed=done, total=total)

        return tune_cached(
            problem, target, settings, overrides=overrides, storage=storage, validate=validate, progress=tick
        )


@app.command()
def targets(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the target presets with their family and key figures."""
    from costmodels.presets import preset_family, preset_names
    from costmodels.registry import get_target

    rows = []
    for name in preset_names():
        row: dict[str, Any] = {"target": name, "family": preset_family(name)}
        try:
            t = get_target(name)
            hw = t.hardware.model_dump()
            row["objectives"] = list(t.objectives)
            row["figures"] = {k: v for k, v in hw.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        except Exception as e:  # a family still being written must not hide the others
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="targets", title_justify="left")
    for col in ("target", "family", "objectives", "key figures"):
        table.add_column(col)
    for row in rows:
        figures = ", ".join(f"{k}={v:g}" for k, v in list(row.get("figures", {}).items())[:6])
        table.add_row(
            row["target"], row["family"], ", ".join(row.get("objectives", [])), figures or row.get("error", "")
        )
    Console().print(table)


@app.command()
def workloads(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the named workloads and their layer counts."""
    from workload.named import describe, load, names

    rows = [{"workload": n, "layers": len(load(n)), "description": describe(n).splitlines()[0]} for n in names()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="workloads", title_justify="left")
    for col in ("workload", "layers", "description"):
        table.add_column(col)
    for row in rows:
        table.add_row(str(row["workload"]), str(row["layers"]), str(row["description"]))
    Console().print(table)


def main() -> None:
    """Console-script entry point."""
    app()
