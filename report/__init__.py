"""Self-contained HTML reports of tuning results: results in, an HTML string out (no I/O).

`tune_report` renders one problem's `TuneResult`, `workload_report` a `WorkloadResult` with its
layers' problems. Pictures are inline SVG drawn with matplotlib's SVG backend; the page has no
script and names no other host, and every picture has a table or sentence with its numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from costmodels.protocol import Target
from mapper.result import TuneResult
from mapper.workloads import WorkloadResult
from report.page import page
from report.tuning import tune_body
from report.workload_page import workload_body
from workload.problem import Problem

__all__ = ["comparison_report", "tune_report", "workload_report"]


def tune_report(result: TuneResult, problem: Problem, target: Target | None = None) -> str:
    """The report of one problem's result; `target` (the result's preset) adds the Tenstorrent core grid."""
    return page(f"Tuning report: {problem.label or 'problem'} on {result.target}", tune_body(result, problem, target))


def workload_report(result: WorkloadResult, problems: Sequence[Problem], target: Target | None = None) -> str:
    """The report of a workload; `problems` are its layers in order (`result.layers`)."""
    return page(f"Workload report: {result.workload} on {result.target}", workload_body(result, problems, target))


def comparison_report(
    rows: Sequence[tuple[str, TuneResult | WorkloadResult | None, str | None]],
    problems: Sequence[Problem],
    targets: dict[str, Target] | None = None,
) -> str:
    """One section per target of a comparison: its report, or the reason it has none."""
    from report.page import esc, scoped

    parts = []
    for i, (name, r, error) in enumerate(rows):
        t = (targets or {}).get(name)
        if r is None:
            inner = f"<p>{esc(error or 'no result')}</p>"
        elif isinstance(r, WorkloadResult):
            inner = workload_body(r, problems, t)
        else:
            inner = tune_body(r, problems[0], t)
        inner = scoped(inner, f"t{i}.")  # each target's sections and pictures keep ids of their own
        parts.append(f'<section id="target-{esc(name)}"><h2>Target {esc(name)}</h2>{inner}</section>')
    return page(f"Comparison report: {', '.join(n for n, _, _ in rows)}", "".join(parts))
