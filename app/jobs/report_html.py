"""A finished job's result as the HTML report (`report`), for `GET /v1/tunings/{id}/report`.

The report needs the problems the job tuned: they are rebuilt from the stored request (the same
`prepare` the API ran when the job was created), and the targets from their presets and the
request's overrides.
"""

from __future__ import annotations

from typing import Any

from app.jobs.models import TuningRequest
from app.jobs.runner import ComparisonResult, prepare
from costmodels.registry import get_target
from mapper.result import TuneResult
from mapper.workloads import WorkloadResult


def job_report_html(kind: str, request: dict[str, Any], raw: str) -> str:
    """The report page of a job of `kind` (tune, workload, comparison) whose result JSON is `raw`."""
    from report import comparison_report, tune_report, workload_report  # matplotlib on the first report only

    prep = prepare(TuningRequest.model_validate(request))
    overrides = prep.overrides
    if kind == "tune":
        result = TuneResult.model_validate_json(raw)
        return tune_report(result, prep.problems[0], get_target(result.target, overrides))
    if kind == "workload":
        wl = WorkloadResult.model_validate_json(raw)
        return workload_report(wl, prep.problems, get_target(wl.target, overrides))
    comparison = ComparisonResult.model_validate_json(raw)
    rows = [(row.target, row.result, row.error) for row in comparison.rows]
    targets = {row.target: get_target(row.target, overrides) for row in comparison.rows if row.result is not None}
    return comparison_report(rows, prep.problems, targets)
