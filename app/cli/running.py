"""Running a tuning: in-process with a progress bar and Ctrl-C, or as a service job followed to its end."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from app.cli.common import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TIMEOUT,
    Result,
    Row,
    _fail,
    _note,
    _user_errors,
)
from app.cli.output import Bar, finish
from app.client import ApiClient, ApiError, WaitTimeout
from mapper.result import TuneResult
from mapper.settings import SearchSettings
from mapper.workloads import WorkloadResult
from workload.errors import ProblemError


def run_in_process(
    specs: list[Any] | None,
    workload: tuple[str, dict[str, Any]] | None,
    name: str,
    targets: list[str],
    settings: SearchSettings,
    overrides: dict[str, Any],
    storage: str | None,
    workers: int | None,
    validate: bool,
    *,
    network: bool = False,
) -> list[Row]:
    """Tune each target in this process; in a comparison a target that fails gives a row with its error.

    With `network` the specs are a whole network's layers (an ONNX import or a layer list): a workload
    result even when it has one layer."""
    from mapper.cache import resolve_factory, tune_cached
    from mapper.workloads import tune_layers
    from workload.spec import problem_from_dict

    if workload is not None:
        from workload.named import load

        problems = load(workload[0], **workload[1])
    else:
        assert specs is not None
        problems = [problem_from_dict(s) for s in specs]
    many = workload is not None or network or len(problems) > 1
    for t in targets:  # unknown targets and bad overrides are usage errors, before any search
        resolve_factory(None)(t, overrides)
    rows: list[Row] = []
    with _interruptible() as stop:
        for n, t in enumerate(targets):
            if n and stop.is_set():
                rows.append((t, None, "cancelled before this target was tuned"))
                continue
            label = f"{name} on {t}" if len(targets) > 1 else name
            try:
                with Bar(label, settings.objectives[0]) as bar:
                    watch = bar.watch(cancel=stop.is_set)
                    if many:
                        # on a terminal, layers run in turn in this process so the bar can follow them,
                        # unless --workers asks for worker processes
                        in_turn = workers is None and bar.enabled
                        r: Result = tune_layers(
                            problems, t, settings, name=name, overrides=overrides, storage=storage,
                            workers=2 if workers is None else workers, validate=validate,
                            watch=watch if in_turn else None,
                        )  # fmt: skip
                    else:
                        r = tune_cached(
                            problems[0], t, settings, overrides=overrides, storage=storage, validate=validate,
                            progress=watch,
                        )  # fmt: skip
                rows.append((t, r, None))
            except ProblemError as e:
                if len(targets) == 1:
                    raise
                rows.append((t, None, str(e)))
    return rows


@contextmanager
def _interruptible() -> Iterator[threading.Event]:
    """The first Ctrl-C asks the running search to stop and keep its best so far (exit 4); a second aborts."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def _on_sigint(_signum: int, _frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        _note("stopping: the best mapping found so far follows (Ctrl-C again to abort)")

    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _parse_result(data: Any) -> Result:
    if isinstance(data, dict) and "layers" in data:
        return WorkloadResult.model_validate(data)
    return TuneResult.model_validate(data)


def rows_of_job(client: ApiClient, job: dict[str, Any]) -> tuple[list[Row], bool]:
    """The rows of a finished job (fetching its result) and whether it is a comparison."""
    targets = [str(t) for t in job.get("targets") or []]
    comparison = job.get("kind") == "comparison"
    state = job.get("state")
    try:
        data = client.result(str(job["id"]))
    except ApiError as e:
        if e.status != 409 and e.status != 404:
            raise
        data = None
    if data is None:
        error = job.get("error") or f"job {state}"
        return [(t, None, str(error)) for t in targets or ["?"]], comparison
    if comparison:
        rows: list[Row] = []
        for row in data.get("rows", []):
            r = row.get("result")
            rows.append((str(row.get("target")), None if r is None else _parse_result(r), row.get("error")))
        return rows, True
    return [(targets[0] if targets else "?", _parse_result(data), None)], False


def follow_job(
    client: ApiClient, job_id: str, *, wait: float | None, label: str, objective: str = "latency"
) -> dict[str, Any]:
    """Wait for a job with a progress bar; exit 5 (naming the job) if `wait` runs out."""
    try:
        with Bar(label, objective) as bar:
            return client.wait(job_id, seconds=wait, on_progress=bar.job)
    except KeyboardInterrupt:
        _fail(f"interrupted: job {job_id} keeps running (`mapper cancel {job_id}` stops it)", EXIT_INTERRUPTED)
    except WaitTimeout as e:
        state = e.job.get("state", "unfinished")
        _fail(
            f"timed out after {wait:g} s: job {job_id} is still {state} (it keeps running; "
            f"follow it with `mapper watch {job_id}`, stop it with `mapper cancel {job_id}`)",
            EXIT_TIMEOUT,
        )


def end_of_job(
    client: ApiClient,
    job: dict[str, Any],
    *,
    as_json: bool,
    baseline: Path | None,
    tolerance: str,
    write_baseline: Path | None,
) -> None:
    """Print a finished job's result like an in-process run and exit with its code."""
    state = job.get("state")
    with _user_errors():
        rows, comparison = rows_of_job(client, job)
    if state == "failed" and all(r is None for _, r, _ in rows):
        if as_json:
            typer.echo(json.dumps(job, indent=2))
        _fail(f"job {job.get('id')} failed: {job.get('error') or 'no reason given'}", EXIT_FAILED)
    if state == "cancelled" and all(r is None for _, r, _ in rows):
        if as_json:
            typer.echo(json.dumps(job, indent=2))
        _note(f"job {job.get('id')} was cancelled")
        raise typer.Exit(code=EXIT_CANCELLED)
    if state == "cancelled":
        _note(f"job {job.get('id')} was cancelled; showing the best found before")
    code = {"cancelled": EXIT_CANCELLED, "failed": EXIT_FAILED}.get(str(state), EXIT_OK)
    finish(
        rows, comparison=comparison, as_json=as_json, baseline=baseline, tolerance=tolerance,
        write_baseline=write_baseline, code=code,
    )  # fmt: skip


# ---- commands ----------------------------------------------------------------------------------
