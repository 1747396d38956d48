"""The `mapper` commands: tune, status, watch, cancel, targets, workloads, serve, worker."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from app import baseline as bl
from app.cli import common, html_report, listings
from app.cli.common import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    BaselineOpt,
    JsonOpt,
    ServerOpt,
    TokenOpt,
    ToleranceOpt,
    UsageError,
    WaitOpt,
    WriteBaselineOpt,
    _fail,
    _note,
    _user_errors,
)
from app.cli.inputs import (
    _pairs,
    _targets,
    _yaml_value,
    parse_overrides,
    read_network,
    read_problem_file,
    spec_from_flags,
)
from app.cli.output import finish
from app.cli.running import end_of_job, follow_job, run_in_process
from app.client import ApiClient, ClientError
from mapper.settings import OBJECTIVES, STRATEGIES, SearchSettings
from workload.spec import spec_from_dict

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Search accelerator mappings of tensor problems, in-process or on a tensormapper service.",
    epilog=EXIT_CODES,
    pretty_exceptions_show_locals=False,
)


@app.command(epilog=EXIT_CODES)
def tune(
    einsum: Annotated[str | None, typer.Option(help='einsum, e.g. "mk,kn->mn"')] = None,
    size: Annotated[list[str], typer.Option(help="axis size, e.g. m=512 (repeatable)")] = [],  # noqa: B006
    conv: Annotated[str | None, typer.Option(help='conv2d, e.g. "batch=1,in=64,out=64,h=56,w=56,k=3,s=1,p=1"')] = None,
    file: Annotated[Path | None, typer.Option(help="JSON/YAML problem file (one problem or a list)")] = None,
    workload: Annotated[str | None, typer.Option(help="named workload, e.g. resnet50")] = None,
    onnx: Annotated[
        Path | None, typer.Option(help="ONNX model: every Conv, MatMul, Gemm, Einsum and reduction is a layer")
    ] = None,
    layers: Annotated[Path | None, typer.Option(help="layer-list file: JSON/YAML list of problem specs")] = None,
    op: Annotated[
        list[str], typer.Option(help="with --onnx: import only these operators, e.g. Conv,MatMul (repeatable)")
    ] = [],  # noqa: B006
    param: Annotated[
        list[str],
        typer.Option(help="workload parameter, or an ONNX model's dynamic dimension, name=value (repeatable)"),
    ] = [],  # noqa: B006
    dtype: Annotated[
        str | None,
        typer.Option(
            help="input dtype (default bf16; bfloat8_b, bfloat4_b: Tenstorrent only); with --onnx or --layers it "
            "replaces every layer's declared input dtype"
        ),
    ] = None,
    weight: Annotated[str | None, typer.Option(help="weight input (index or name)")] = None,
    reduce_op: Annotated[str, typer.Option(help="add | mul | max | min (einsum problems)")] = "add",
    out_dtype: Annotated[str | None, typer.Option(help="output dtype (default: the accumulation type)")] = None,
    target: Annotated[
        list[str], typer.Option(help="target preset (see `mapper targets`; default rngd); several make a comparison")
    ] = [],  # noqa: B006
    override: Annotated[
        list[str], typer.Option(help="hardware override name=value; a list field takes a,b,c (repeatable)")
    ] = [],  # noqa: B006
    objective: Annotated[list[str], typer.Option(help=" | ".join(OBJECTIVES) + " (repeatable: a Pareto front)")] = [],  # noqa: B006
    strategy: Annotated[str, typer.Option(help=" | ".join(STRATEGIES))] = "auto",
    trials: Annotated[int, typer.Option(help="maximum trials")] = SearchSettings().max_trials,
    seconds: Annotated[float, typer.Option(help="maximum seconds of a search")] = SearchSettings().max_seconds,
    patience: Annotated[
        int, typer.Option(help="stop after this many trials without improvement (0: spend the whole budget)")
    ] = SearchSettings().patience,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    storage: Annotated[
        str | None, typer.Option(help="in-process result cache: a journal file or a database URL")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            help="in-process worker processes for workload layers (default 2; on a terminal without this flag the "
            "layers run in turn, followed by a progress bar)"
        ),
    ] = None,
    validate: Annotated[bool, typer.Option(help="run the executor on the best mapping")] = True,
    server: ServerOpt = None,
    token: TokenOpt = None,
    wait: WaitOpt = None,
    detach: Annotated[bool, typer.Option("--detach", help="with --server: print the job id, do not wait")] = False,
    baseline: BaselineOpt = None,
    tolerance: ToleranceOpt = "2%",
    write_baseline: WriteBaselineOpt = None,
    as_json: JsonOpt = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="write the result's HTML report (pictures, tables) to this file")
    ] = None,
) -> None:
    """Find the best mapping of a problem (or every layer of a workload) on one target or several."""
    sources = [x for x in (einsum, conv, file, workload, onnx, layers) if x is not None]
    if len(sources) != 1:
        _fail("give exactly one of --einsum, --conv, --file, --workload, --onnx or --layers")
    if not math.isfinite(seconds):
        _fail(f"--seconds {seconds} is not a number of seconds: give one, e.g. --seconds 30")
    named = (("--einsum", einsum, "mk,kn->mn"), ("--conv", conv, "batch=1,in=64,out=64,h=56,w=56,k=3"))
    for flag, given, example in (*named, ("--workload", workload, "resnet50")):
        if given is not None and not given.strip():
            _fail(f"{flag} is empty: give one, e.g. {flag} {example}")
    with _user_errors():
        targets = _targets(target)
        bl.parse_tolerance(tolerance)
        if html is not None:
            html_report.check_path(html)
        if server and (storage is not None or workers is not None):
            raise UsageError("--storage and --workers apply in-process; a server has its own storage and workers")
        if not server and (wait is not None or detach):
            raise UsageError("--wait and --detach apply with --server URL (or TM_SERVER)")
        settings = SearchSettings(
            strategy=strategy,
            objectives=tuple(objective) or ("latency",),
            max_trials=trials,
            max_seconds=seconds,
            patience=patience,
            seed=seed,
        )
        overrides = parse_overrides(override, targets)
        specs: list[Any] | None = None
        wl: tuple[str, dict[str, Any]] | None = None
        network = None
        if onnx is not None or layers is not None:
            network = read_network(onnx, layers, param, op)
            if dtype is not None:
                network = network.with_dtype(dtype)
            _note(network.summary())
            specs, name = [layer.problem.model_dump(mode="json") for layer in network.layers], network.name
            if not specs:
                network.problems()  # the error: nothing to tune, and what was skipped
        elif workload:
            wl = (workload, {k: _yaml_value("--param", k, v) for k, v in _pairs(param, "--param").items()})
            name = workload
        elif file is not None:
            specs, name = read_problem_file(file), file.name
        else:
            specs, name = [spec_from_flags(einsum, size, conv, dtype or "bf16", weight, reduce_op, out_dtype)], "tuning"
        if op and not onnx:
            raise UsageError("--op goes with --onnx")
        if param and not (workload or onnx):
            raise UsageError("--param goes with --workload or --onnx")
        comparison = len(targets) > 1
        if server:
            client = common.make_client(server, token)
            body: dict[str, Any] = {
                "overrides": overrides,
                "objectives": list(settings.objectives),
                "strategy": strategy,
                "trials": trials,
                "seconds": seconds,
                "patience": patience,
                "seed": seed,
                "validate": validate,
            }
            body.update({"targets": targets} if comparison else {"target": targets[0]})
            if wl is not None:
                body.update({"workload": wl[0], "params": wl[1]})
            elif network is not None:
                body.update({"layers": specs, "name": name})
            else:
                assert specs is not None
                if len(specs) == 1:
                    body["problem"] = specs[0]
                else:  # several problems are a network's layers, as in-process (kind inferred here)
                    layer_specs = [spec_from_dict(x).model_dump(mode="json") for x in specs]
                    body.update({"layers": layer_specs, "name": name})
            job = client.submit(body)
    if server:
        job_id = str(job["id"])
        _note(f"job {job_id} {job.get('state')}: {job.get('summary', '')}")
        if detach:
            typer.echo(json.dumps(job, indent=2) if as_json else job_id)
            return
        final = follow_job(client, job_id, wait=wait, label=name, objective=settings.objectives[0])
        if html is not None:
            with _user_errors():
                html_report.fetch_report(client, job_id, html)
        end_of_job(
            client, final, as_json=as_json, baseline=baseline, tolerance=tolerance, write_baseline=write_baseline
        )
        return
    with _user_errors():
        try:
            rows = run_in_process(
                specs, wl, name, targets, settings, overrides, storage, workers, validate, network=network is not None
            )
        except ImportError as e:
            raise UsageError(f"a target is not available in this build ({e})") from None
        except KeyboardInterrupt:
            _fail("interrupted", EXIT_INTERRUPTED)
        if html is not None:
            html_report.write_html(html, html_report.render_rows(rows, html_report.problems_of(specs, wl), overrides))
    finish(
        rows, comparison=comparison, as_json=as_json, baseline=baseline, tolerance=tolerance,
        write_baseline=write_baseline,
    )  # fmt: skip


@app.command()
def mutants(
    file: Annotated[Path, typer.Argument(help="JSON/YAML file holding one problem")],
    target: Annotated[str, typer.Option(help="target preset")] = "trn2",
    as_json: JsonOpt = False,
) -> None:
    """Tune a problem, then validate broken copies of its best mapping (a dropped tile, a repeated reduction
    tile, a wrong stride, dummy padding in a reduction, a bf16 accumulator): each must fail. Exit 3 if one passes."""
    from costmodels.registry import get_target
    from executor.mutations import mutants as make_mutants
    from executor.validate import validate_as_run
    from mapper.search import tune as search
    from workload.spec import problem_from_dict

    with _user_errors():
        specs = read_problem_file(file)
        if len(specs) != 1:
            raise UsageError(f"{file.name} holds {len(specs)} problems; give one")
        problem = problem_from_dict(specs[0])
        result = search(problem, get_target(target), SearchSettings(), validate=False)
    if result.mapping is None:
        _fail(f"{target} has no feasible mapping for this problem", EXIT_FAILED)
    rows = []
    for name, broken in make_mutants(problem, result.mapping):
        report = validate_as_run(problem, broken)
        rows.append(
            {"mutant": name, "caught": report.status == "failed", "status": report.status, "why": report.reason}
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        for r in rows:
            typer.echo(f"{'caught' if r['caught'] else 'MISSED':7} {r['mutant']}: {r['status']} ({r['why']})")
    if not all(r["caught"] for r in rows):
        raise typer.Exit(EXIT_FAILED)


def _need_server(server: str | None, token: str | None) -> ApiClient:
    if not server:
        _fail("this command talks to a service: give --server URL (or set TM_SERVER)")
    return common.make_client(server, token)


def _when(t: Any) -> str:
    if not isinstance(t, int | float):
        return "-"
    import datetime

    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _job_lines(job: dict[str, Any]) -> list[str]:
    p = job.get("progress") or {}
    lines = [
        f"job {job.get('id')}: {job.get('state')} ({job.get('kind')}) {job.get('summary', '')}",
        f"  targets: {', '.join(job.get('targets') or [])}",
        f"  progress: {p.get('done', 0)}/{p.get('total', 0)} {p.get('unit', '')}"
        + (f", best {p['best']:g}" if isinstance(p.get("best"), int | float) else ""),
    ]
    if job.get("stop_reason"):
        lines.append(f"  stop reason: {job['stop_reason']}")
    if job.get("error"):
        lines.append(f"  error: {job['error']}")
    lines.append(
        f"  created {_when(job.get('created_at'))}, started {_when(job.get('started_at'))}, "
        f"finished {_when(job.get('finished_at'))}"
    )
    return lines


@app.command()
def status(
    job_id: Annotated[str | None, typer.Argument(metavar="[ID]", help="job id (none: list recent jobs)")] = None,
    state: Annotated[str | None, typer.Option(help="list only jobs in this state")] = None,
    limit: Annotated[int, typer.Option(help="jobs to list")] = 20,
    server: ServerOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a job of the service (or list its recent jobs)."""
    client = _need_server(server, token)
    with _user_errors(server):
        if job_id is None:
            page = client.jobs(state=state, limit=limit)
            if as_json:
                typer.echo(json.dumps(page, indent=2))
                return
            for j in page.get("items", []):
                typer.echo(f"{j.get('id')}  {j.get('state'):<9}  {j.get('kind'):<10}  {j.get('summary', '')}")
            return
        job = client.job(job_id)
    if as_json:
        typer.echo(json.dumps(job, indent=2))
        return
    for line in _job_lines(job):
        typer.echo(line)


@app.command(epilog=EXIT_CODES)
def watch(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="job id")],
    server: ServerOpt = None,
    token: TokenOpt = None,
    wait: WaitOpt = None,
    baseline: BaselineOpt = None,
    tolerance: ToleranceOpt = "2%",
    write_baseline: WriteBaselineOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Follow a job (a live progress line on a terminal) to its end; print its result like `mapper tune`."""
    client = _need_server(server, token)
    with _user_errors(server):
        bl.parse_tolerance(tolerance)
        job = client.job(job_id)
        final = follow_job(client, job_id, wait=wait, label=str(job.get("summary") or job_id))
    reason = final.get("stop_reason")
    _note(f"job {job_id} {final.get('state')}" + (f": {reason}" if reason and reason != final.get("state") else ""))
    end_of_job(client, final, as_json=as_json, baseline=baseline, tolerance=tolerance, write_baseline=write_baseline)


@app.command()
def cancel(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="job id")],
    server: ServerOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ask the service to stop a job (a running search keeps the best found so far)."""
    client = _need_server(server, token)
    with _user_errors(server):
        job = client.cancel(job_id)
    if as_json:
        typer.echo(json.dumps(job, indent=2))
    else:
        typer.echo(f"job {job_id}: cancel requested (state: {job.get('state')})")


@app.command()
def targets(server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """List the target presets with their family and key figures."""
    if server:
        _server_listing("targets", server, token, as_json)
        return
    listings.print_targets(listings.local_targets(), as_json)


@app.command()
def workloads(server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """List the named workloads and their layer counts."""
    if server:
        _server_listing("workloads", server, token, as_json)
        return
    listings.print_listing("workloads", listings.local_workloads(), as_json)


def _server_listing(kind: str, server: str, token: str | None, as_json: bool) -> None:
    """The service's listing of `kind` (``targets`` or ``workloads``), as JSON or a table."""
    with _user_errors():
        data = getattr(common.make_client(server, token), kind)()
    listings.print_listing(kind, data, as_json)


def _settings(**given: Any) -> Any:
    """`app.settings.Settings` from the environment (``TM_*``), with the flags given on top."""
    from app.settings import Settings

    return Settings(**{k: v for k, v in given.items() if v is not None})


@app.command()
def serve(
    storage: Annotated[
        str | None, typer.Option(help="database URL (env TM_STORAGE; default SQLite in data-dir)")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="directory of the embedded database (env TM_DATA_DIR)")] = None,
    host: Annotated[str | None, typer.Option(help="interface to bind (env TM_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="port to bind (env TM_PORT)")] = None,
    workers: Annotated[int | None, typer.Option(help="worker processes beside the API (env TM_WORKERS)")] = None,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="do not open the console in a browser")] = False,
) -> None:
    """Start the service: the API (and its console at /docs) and its worker processes."""
    with _user_errors():
        settings = _settings(storage=storage, data_dir=data_dir, host=host, port=port, workers=workers)
    from app.server import StorageUnusable
    from app.server import serve as run_server

    try:
        run_server(settings, open_browser=not no_browser)
    except StorageUnusable as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"cannot start the service on {settings.host}:{settings.port}: {e.strerror or e}")


@app.command()
def worker(
    storage: Annotated[str | None, typer.Option(help="database URL of the service's jobs (env TM_STORAGE)")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="directory of the embedded database (env TM_DATA_DIR)")] = None,
) -> None:
    """Run one more worker process: it takes queued jobs from the storage until stopped."""
    with _user_errors():
        settings = _settings(storage=storage, data_dir=data_dir)
    from app.jobs.worker import run_worker

    try:
        run_worker(settings)
    except KeyboardInterrupt:
        raise typer.Exit(code=130) from None


def main(args: list[str] | None = None, prog_name: str = "mapper") -> None:
    """Console-script entry point."""
    try:
        app(args=args, prog_name=prog_name)
    except ClientError as e:  # defensive: a client error outside the commands' guards
        _fail(str(e))
    except httpx.HTTPError as e:
        _fail(f"the server connection failed: {e}")
