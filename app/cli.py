"""The ``mapper`` command, for people and CI jobs.

``mapper tune`` searches in-process, or on a service with ``--server URL`` (``TM_SERVER``) with the
same output; several ``--target``s make a comparison, one row per target. ``mapper serve`` starts
the service (API and workers), ``mapper worker`` one more worker; ``status``, ``watch`` and
``cancel`` follow and stop the service's jobs; ``targets`` and ``workloads`` list what can be tuned.

Standard output carries the result (tables, or JSON with ``--json``); job ids, progress bars (on a
terminal only), failure reasons and baseline verdicts go to standard error.

Exit codes (when several apply, the smallest wins):

    0  ok
    2  usage error or bad problem: a malformed problem, file or flag, an unknown target, an error
       answer of the server (its detail and hint on one line), an unreachable server
    3  no feasible mapping, a failed validation (any layer, any target), or the job failed
    4  the search or the job was cancelled
    5  timed out: --wait ran out before the server's job finished (the job keeps running; its id
       is printed)
    6  regression: a tuned cost is worse than the --baseline file's by more than --tolerance
  130  interrupted: a second Ctrl-C in-process (the first stops the search and keeps its best: 4),
       or Ctrl-C while following a server's job (which keeps running)

The codes are those of ``tune`` and ``watch``; ``status``, ``cancel`` and the lists exit 0 or 2.
Errors a user can fix print one line ``error: ...`` and never a traceback.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import types
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from app import baseline as bl
from app.client import ApiClient, ApiError, ClientError, ServerUnreachable, WaitTimeout
from mapper.display import UNITS, fmt, generic_table, show_comparison, show_result, show_workload
from mapper.result import TuneResult
from mapper.settings import STRATEGIES, SearchSettings
from mapper.watch import Watch
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

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Search accelerator mappings of tensor problems, in-process or on a tensormapper service.",
    epilog=EXIT_CODES,
    pretty_exceptions_show_locals=False,
)

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
MAX_FILE_BYTES = 16 << 20
MAX_NESTING = 64

Result = TuneResult | WorkloadResult
Row = tuple[str, Result | None, str | None]  # target, result, error


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
def _user_errors() -> Iterator[None]:
    """Turn the errors a user can fix into one line and exit code 2."""
    try:
        yield
    except (ProblemError, UsageError, bl.BaselineError, ServerUnreachable, ApiError) as e:
        _fail(str(e))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "value"
        _fail(f"invalid {where}: {str(first['msg']).removeprefix('Value error, ')}")


def make_client(server: str, token: str | None = None) -> ApiClient:
    """The API client of `--server` (tests replace this to serve the app in-process)."""
    return ApiClient(server if "://" in server else f"http://{server}", token=token)


# ---- parsing flags and files ----------------------------------------------------------------


def _pairs(items: list[str], what: str) -> dict[str, str]:
    """``name=value`` items, several per item separated by commas; a comma part without ``=`` continues the value."""
    out: dict[str, str] = {}
    for item in items:
        key = None
        for part in item.split(","):
            name, sep, value = part.partition("=")
            if sep and name.strip():
                key = name.strip()
                out[key] = value.strip()
            elif key is not None and not sep:
                out[key] = f"{out[key]},{part.strip()}"
            else:
                raise UsageError(f"{what} {part!r} is not name=value")
        if key is not None and not out[key]:
            raise UsageError(f"{what} {key!r} has no value: write {key}=value")
    return out


def _int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{key}={value!r} is not an integer") from None


def _yaml_value(what: str, key: str, text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise UsageError(f"{what} {key}={text!r} is not a valid value") from None


def spec_from_flags(
    einsum: str | None,
    sizes: list[str],
    conv: str | None,
    dtype: str,
    weight: str | None,
    reduce_op: str,
    out_dtype: str | None,
) -> dict[str, Any]:
    """The README problem spec of ``--einsum/--size`` or ``--conv`` (validated by `workload.spec`)."""
    if einsum:
        spec: dict[str, Any] = {
            "kind": "einsum",
            "expr": einsum,
            "sizes": {k: _int(k, v) for k, v in _pairs(sizes, "--size").items()},
            "dtype": dtype,
            "reduce_op": reduce_op,
        }
        if weight is not None:
            spec["weight"] = int(weight) if weight.isdigit() else weight
        if out_dtype is not None:
            spec["out_dtype"] = out_dtype
        return spec
    if reduce_op != "add":
        raise UsageError("--reduce-op applies to --einsum problems; a conv2d always reduces with add")
    assert conv is not None
    spec = {"kind": "conv2d", "dtype": dtype}
    for key, value in _pairs([conv], "--conv").items():
        if key not in CONV_KEYS:
            raise UsageError(f"--conv: unknown key {key!r}; keys: {', '.join(sorted(CONV_KEYS))}")
        spec[CONV_KEYS[key]] = _int(key, value)
    if out_dtype is not None:
        spec["out_dtype"] = out_dtype
    return spec


def _nesting(data: Any) -> int:
    """How deeply lists and mappings nest (stops counting past MAX_NESTING; safe on cyclic aliases)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict | list):
            continue
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            break
        stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _bracket_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of a text, strings included (an upper bound that is cheap to take)."""
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return deepest


def read_problem_file(path: Path) -> list[Any]:
    """The problem specs of a JSON or YAML file: one problem, or a list of them."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UsageError(f"{path} is {len(raw):,} bytes; a problem file may have at most {MAX_FILE_BYTES:,}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UsageError(
            f"{path} is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}): save it as UTF-8 JSON or YAML"
        ) from None
    too_deep = (
        f"{path} nests lists or mappings more than {MAX_NESTING} levels deep: a problem file is a mapping or a list"
    )
    if _bracket_depth(text) > 4 * MAX_NESTING:  # fail fast, before the parser recurses that deep
        raise UsageError(too_deep)
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise UsageError(too_deep) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        reason = getattr(e, "problem", None) or "syntax error"
        raise UsageError(f"{path} is not valid JSON or YAML{where}: {reason}") from None
    if _nesting(data) > MAX_NESTING:
        raise UsageError(too_deep)
    items = data if isinstance(data, list) else [data]
    if not items:
        raise UsageError(f"{path} holds an empty list: give a problem or a list of problems")
    return items


@cache
def _sequence_field(target: str, name: str) -> bool:
    """Whether a hardware field of a target's preset model is a tuple or a list."""
    from mapper.cache import resolve_factory

    try:
        hw = resolve_factory(None)(target, None).hardware
        field = type(hw).model_fields.get(name)
    except Exception:  # an unknown target or a family that fails to load: the run reports it
        return False
    if field is None:
        return False
    ann = field.annotation
    options = typing.get_args(ann) if typing.get_origin(ann) in (typing.Union, types.UnionType) else (ann,)
    return any(typing.get_origin(a) in (tuple, list) or a in (tuple, list) for a in options)


def parse_overrides(items: list[str], targets: list[str]) -> dict[str, Any]:
    """``--override name=value`` items; a tuple or list field takes one value or a comma list (or ``[a, b]``)."""
    out: dict[str, Any] = {}
    for key, text in _pairs(items, "--override").items():
        value = _yaml_value("--override", key, text)
        if not isinstance(value, list) and any(_sequence_field(t, key) for t in targets):
            value = [_yaml_value("--override", key, part.strip()) for part in text.split(",") if part.strip()]
        out[key] = value
    return out


def _targets(items: list[str]) -> list[str]:
    names = [t.strip() for item in items for t in item.split(",") if t.strip()] or ["rngd"]
    if len(set(names)) != len(names):
        raise UsageError(f"a target is given twice: {', '.join(names)}")
    return names


# ---- progress ----------------------------------------------------------------------------------


class Bar:
    """A transient progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, objective: str = "latency", *, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.label = label
        self.unit = UNITS.get(objective, "")
        self._bar: RichProgress | None = None
        self._task: Any = None

    def __enter__(self) -> Bar:
        if self.enabled:
            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[best]}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=None, best="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None

    def update(self, done: int, total: int, best: float | None, unit: str = "") -> None:
        if self._bar is None:
            return
        best_text = f"best {fmt(best, self.unit)}" if best is not None else ""
        description = f"{self.label} ({unit})" if unit else self.label
        self._bar.update(self._task, completed=done, total=total or None, best=best_text, description=description)

    def watch(self, cancel: Callable[[], bool]) -> Watch:
        """A `mapper.watch.Watch` for the engine: its reports move the bar (in the unit they count)."""
        watch = Watch(cancel=cancel)
        if self.enabled:
            watch.progress = lambda done, total, best: self.update(done, total, best, watch.unit)
        return watch

    def job(self, progress: dict[str, Any]) -> None:
        """A job's progress as the API reports it."""
        best = progress.get("best")
        self.update(
            int(progress.get("done") or 0),
            int(progress.get("total") or 0),
            float(best) if isinstance(best, int | float) else None,
            str(progress.get("unit") or ""),
        )


# ---- outcomes: printing, exit codes, baseline --------------------------------------------------


def failures(rows: list[Row]) -> list[tuple[int, str]]:
    """(exit code, reason) of everything that is not ok in the rows."""
    out: list[tuple[int, str]] = []
    for target, r, error in rows:
        if r is None:
            cancelled = (error or "").startswith("cancelled")
            out.append((EXIT_CANCELLED if cancelled else EXIT_FAILED, f"{target}: {error or 'no result'}"))
            continue
        if isinstance(r, WorkloadResult) and not r.complete:
            out.append((EXIT_CANCELLED, f"tuning of {r.workload} on {target} cancelled before every layer ended"))
        results = list(r.results.values()) if isinstance(r, WorkloadResult) else [r]
        labels: dict[str, str] = {}
        if isinstance(r, WorkloadResult):
            for lay in r.layers:
                labels.setdefault(lay.problem_hash, lay.label)
        for x in results:
            name = labels.get(x.problem_hash, x.problem)
            if x.stop_reason == "cancelled":  # no mapping yet is no verdict on the problem
                out.append((EXIT_CANCELLED, f"search cancelled: {name} on {target}"))
            elif not x.feasible:
                out.append((EXIT_FAILED, f"no feasible mapping of {name} on {target}"))
            if x.validation_passed is False:
                out.append((EXIT_FAILED, f"validation failed: {name} on {target}"))
    return out


def _dump(r: Result | None) -> Any:
    return None if r is None else r.model_dump(mode="json")


def print_rows(rows: list[Row], comparison: bool, as_json: bool) -> None:
    """The result (or comparison) as a table, or as JSON with ``--json``."""
    if as_json:
        if comparison:
            data = {"rows": [{"target": t, "result": _dump(r), "error": e} for t, r, e in rows]}
            typer.echo(json.dumps(data, indent=2))
        elif rows[0][1] is not None:
            typer.echo(rows[0][1].model_dump_json(indent=2))
        return
    console = Console()
    if comparison:
        show_comparison(console, rows)
        return
    r = rows[0][1]
    if isinstance(r, WorkloadResult):
        show_workload(console, r)
    elif r is not None:
        show_result(console, r)


def _tolerance_text(tolerance: float) -> str:
    return f"{tolerance:.4g}".rstrip("0").rstrip(".") if tolerance == 0 else f"{tolerance * 100:.4g}%"


def check_baseline(rows: list[Row], baseline: Path | None, tolerance: str, write_to: Path | None) -> int:
    """Compare with and/or write the baseline; print the verdicts on stderr; EXIT_REGRESSION or EXIT_OK."""
    tol = bl.parse_tolerance(tolerance)
    measured = [m for _, r, _ in rows if r is not None for m in bl.measured_of(r)]
    code = EXIT_OK
    if baseline is not None:
        verdicts = bl.compare(measured, bl.load(baseline), tol)
        for v in verdicts:
            m, unit = v.item, UNITS.get(v.item.objective, "")
            where = f"{m.target} {m.label}"
            if v.status == "regressed":
                _note(
                    f"regression: {where}: {m.objective} {fmt(m.value, unit)} > baseline {fmt(v.baseline, unit)} "
                    f"({v.change:+.1%}, tolerance {_tolerance_text(tol)})"
                )
            elif v.status == "infeasible":
                _note(f"regression: {where}: no feasible mapping, baseline {fmt(v.baseline, unit)}")
            elif v.status == "improved":
                _note(f"improved: {where}: {m.objective} {fmt(m.value, unit)} < baseline {fmt(v.baseline, unit)} "
                      f"({v.change:+.1%}); update the baseline with --write-baseline")  # fmt: skip
            elif v.status == "missing":
                _note(f"not in baseline: {where} (problem {m.problem_hash[:12]})")
            elif v.status == "objective-differs":
                _note(f"not compared: {where}: the baseline records another objective than {m.objective}")
        counts = {s: sum(1 for v in verdicts if v.status == s) for s in ("ok", "improved", "regressed", "infeasible")}
        compared = sum(counts.values())
        bad = counts["regressed"] + counts["infeasible"]
        _note(
            f"baseline {baseline.name}: {compared} compared, {bad} regressed, {counts['improved']} improved, "
            f"{len(verdicts) - compared} not in the baseline (tolerance {_tolerance_text(tol)})"
        )
        if bl.regressed(verdicts):
            code = EXIT_REGRESSION
    if write_to is not None:
        n = bl.write(write_to, measured)
        _note(f"baseline {write_to.name}: recorded {n} entr{'y' if n == 1 else 'ies'}")
    return code


def finish(
    rows: list[Row],
    *,
    comparison: bool,
    as_json: bool,
    baseline: Path | None,
    tolerance: str,
    write_baseline: Path | None,
    code: int = EXIT_OK,
) -> None:
    """Print the outcome, check the baseline, exit with the documented code (`code`: one already known)."""
    print_rows(rows, comparison, as_json)
    codes = [code]
    for code, reason in failures(rows):
        _note(("error: " if code == EXIT_FAILED else "") + reason)
        codes.append(code)
    with _user_errors():
        codes.append(check_baseline(rows, baseline, tolerance, write_baseline))
    worst = min((c for c in codes if c), default=EXIT_OK)
    if worst:
        raise typer.Exit(code=worst)


# ---- running tunings ---------------------------------------------------------------------------


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
) -> list[Row]:
    """Tune each target in this process; in a comparison a target that fails gives a row with its error."""
    from mapper.cache import resolve_factory, tune_cached
    from mapper.workloads import tune_layers
    from workload.spec import problem_from_dict

    if workload is not None:
        from workload.named import load

        problems = load(workload[0], **workload[1])
    else:
        assert specs is not None
        problems = [problem_from_dict(s) for s in specs]
    many = workload is not None or len(problems) > 1
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


@app.command(epilog=EXIT_CODES)
def tune(
    einsum: Annotated[str | None, typer.Option(help='einsum, e.g. "mk,kn->mn"')] = None,
    size: Annotated[list[str], typer.Option(help="axis size, e.g. m=512 (repeatable)")] = [],  # noqa: B006
    conv: Annotated[str | None, typer.Option(help='conv2d, e.g. "batch=1,in=64,out=64,h=56,w=56,k=3,s=1,p=1"')] = None,
    file: Annotated[Path | None, typer.Option(help="JSON/YAML problem file (one problem or a list)")] = None,
    workload: Annotated[str | None, typer.Option(help="named workload, e.g. resnet50")] = None,
    param: Annotated[list[str], typer.Option(help="workload parameter name=value (repeatable)")] = [],  # noqa: B006
    dtype: Annotated[str, typer.Option(help="input dtype")] = "bf16",
    weight: Annotated[str | None, typer.Option(help="weight input (index or name)")] = None,
    reduce_op: Annotated[str, typer.Option(help="add | mul | max | min (einsum problems)")] = "add",
    out_dtype: Annotated[str | None, typer.Option(help="output dtype (default: the accumulation type)")] = None,
    target: Annotated[
        list[str], typer.Option(help="target preset (see `mapper targets`); several make a comparison")
    ] = [],  # noqa: B006
    override: Annotated[
        list[str], typer.Option(help="hardware override name=value; a list field takes a,b,c (repeatable)")
    ] = [],  # noqa: B006
    objective: Annotated[list[str], typer.Option(help="latency, offchip_bytes, footprint, energy")] = [],  # noqa: B006
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
) -> None:
    """Find the best mapping of a problem (or every layer of a workload) on one target or several."""
    sources = [x for x in (einsum, conv, file, workload) if x]
    if len(sources) != 1:
        _fail("give exactly one of --einsum, --conv, --file or --workload")
    with _user_errors():
        targets = _targets(target)
        bl.parse_tolerance(tolerance)
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
        if workload:
            wl = (workload, {k: _yaml_value("--param", k, v) for k, v in _pairs(param, "--param").items()})
            name = workload
        elif file is not None:
            specs, name = read_problem_file(file), file.name
        else:
            specs, name = [spec_from_flags(einsum, size, conv, dtype, weight, reduce_op, out_dtype)], "tuning"
        if param and not workload:
            raise UsageError("--param goes with --workload")
        comparison = len(targets) > 1
        if server:
            client = make_client(server, token)
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
            else:
                assert specs is not None
                if len(specs) != 1:
                    raise UsageError(f"{name} holds {len(specs)} problems; a server tunes one problem or a workload")
                body["problem"] = specs[0]
            job = client.submit(body)
    if server:
        job_id = str(job["id"])
        _note(f"job {job_id} {job.get('state')}: {job.get('summary', '')}")
        if detach:
            typer.echo(json.dumps(job, indent=2) if as_json else job_id)
            return
        final = follow_job(client, job_id, wait=wait, label=name, objective=settings.objectives[0])
        end_of_job(
            client, final, as_json=as_json, baseline=baseline, tolerance=tolerance, write_baseline=write_baseline
        )
        return
    with _user_errors():
        try:
            rows = run_in_process(specs, wl, name, targets, settings, overrides, storage, workers, validate)
        except ImportError as e:
            raise UsageError(f"a target is not available in this build ({e})") from None
        except KeyboardInterrupt:
            _fail("interrupted", EXIT_INTERRUPTED)
    finish(
        rows, comparison=comparison, as_json=as_json, baseline=baseline, tolerance=tolerance,
        write_baseline=write_baseline,
    )  # fmt: skip


def _need_server(server: str | None, token: str | None) -> ApiClient:
    if not server:
        _fail("this command talks to a service: give --server URL (or set TM_SERVER)")
    return make_client(server, token)


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
    with _user_errors():
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
    with _user_errors():
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
    with _user_errors():
        job = client.cancel(job_id)
    if as_json:
        typer.echo(json.dumps(job, indent=2))
    else:
        typer.echo(f"job {job_id}: cancel requested (state: {job.get('state')})")


@app.command()
def targets(server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """List the target presets with their family and key figures."""
    if server:
        with _user_errors():
            data = make_client(server, token).targets()
        _print_listing("targets", data, as_json)
        return
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
    from rich.table import Table

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
def workloads(server: ServerOpt = None, token: TokenOpt = None, as_json: JsonOpt = False) -> None:
    """List the named workloads and their layer counts."""
    if server:
        with _user_errors():
            data = make_client(server, token).workloads()
        _print_listing("workloads", data, as_json)
        return
    from workload.named import describe, load, names

    rows = [{"workload": n, "layers": len(load(n)), "description": describe(n).splitlines()[0]} for n in names()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    Console().print(generic_table("workloads", rows))


def _print_listing(title: str, data: Any, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        Console().print(generic_table(title, data))


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
