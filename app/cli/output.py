"""What `mapper tune` prints: result tables or JSON, the exit code a result earns, the baseline gate."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from app import baseline as bl
from app.cli.common import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REGRESSION,
    Result,
    Row,
    _note,
    _user_errors,
    out_console,
)
from mapper.display import UNITS, fmt, show_comparison, show_result, show_workload
from mapper.settings import BUDGET_STOPS
from mapper.watch import Watch
from mapper.workloads import WorkloadResult


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
            elif not x.feasible and x.stop_reason in BUDGET_STOPS:  # (part of the space never searched)
                stopped = f"found before the search stopped ({x.stop_reason}); the rest of its space was not searched"
                out.append(
                    (EXIT_FAILED, f"no feasible mapping of {name} on {target} {stopped}: raise --seconds or --trials")
                )
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
    console = out_console()
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
