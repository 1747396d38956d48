"""``mapper tune ... --html FILE``: write the result's HTML report (`report`) to a file.

In-process, the report is rendered here from the rows and the problems that were tuned; with
``--server`` it is the service's own page (``GET /v1/tunings/{id}/report``), fetched as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.cli.common import Row, UsageError, _note
from app.client import ApiClient, ApiError
from costmodels.registry import get_target
from mapper.workloads import WorkloadResult
from workload.problem import Problem


def problems_of(specs: list[Any] | None, workload: tuple[str, dict[str, Any]] | None) -> list[Problem]:
    """The problems `mapper tune` tuned, rebuilt from its flags the way `run_in_process` builds them."""
    from workload.spec import problem_from_dict

    if workload is not None:
        from workload.named import load

        return load(workload[0], **workload[1])
    assert specs is not None
    return [problem_from_dict(s) for s in specs]


def render_rows(rows: list[Row], problems: list[Problem], overrides: dict[str, Any]) -> str:
    """One result's report, or a comparison's (one section per target)."""
    from report import comparison_report, tune_report, workload_report  # matplotlib only when a report is asked

    targets = {t: get_target(t, overrides) for t, r, _ in rows if r is not None}
    if len(rows) == 1 and rows[0][1] is not None:
        name, r, _ = rows[0]
        if isinstance(r, WorkloadResult):
            return workload_report(r, problems, targets[name])
        assert r is not None
        return tune_report(r, problems[0], targets[name])
    return comparison_report(rows, problems, targets)


def check_path(path: Path) -> None:
    """Refuse, before any search, a report path whose folder does not exist."""
    if not path.parent.is_dir():
        raise UsageError(f"--html {path}: the folder {path.parent} does not exist; create it or choose another path")


def write_html(path: Path, html: str) -> None:
    try:
        path.write_text(html, encoding="utf-8")
    except OSError as e:
        raise UsageError(
            f"cannot write the report to {path}: {e.strerror or e}; choose a writable --html path"
        ) from None
    _note(f"report written to {path}")


def fetch_report(client: ApiClient, job_id: str, path: Path) -> None:
    """Save the service's report page of a job; a job without a result gets a note, not a report."""
    try:
        html = client.report(job_id)
    except ApiError as e:
        if e.status not in (404, 409):
            raise
        _note(f"no report written: {e.one_line()}")
        return
    write_html(path, html)
