"""Turn what a strategy found into a `TuneResult`: price, bound, render and validate the best mapping.

The best mapping is validated the way it runs (`executor.validate.validate_as_run`): an L1-sharded
Tenstorrent conv through its halo configuration, anything else through its loop nest. The
validation report's ``method`` names what ran (``halo``, ``full`` or ``proxy``), and a sharded conv
that fell back to its loop nest says why in the result's notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from costmodels.protocol import Choice, Target
from mapper.result import ParetoPoint, TrialCounts, TuneResult
from mapper.settings import BUDGET_STOPS, SearchSettings, StopReason
from workload.problem import Problem


@dataclass
class Found:
    """What a strategy found, before it is priced and validated."""

    strategy: str
    point: dict[str, Choice] | None
    values: tuple[float, ...] | None
    proven_optimal: bool
    stop_reason: StopReason
    trace: list[float | None]
    counts: TrialCounts
    front: list[tuple[dict[str, Choice], tuple[float, ...]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    trace_points: list[int] = field(default_factory=list)
    inner_points: int = 0
    rate: float | None = None


def validation_of(problem: Problem, mapping: Any, seed: int) -> tuple[dict[str, Any] | None, bool | None, str]:
    """Run the executor on the best mapping as it runs: (report as JSON data, passed, note).

    passed is True only for a mapping the executor checked and passed, False for a failed one and
    None when nothing was checked (a fidelity the executor does not emulate, a validation over the
    memory cap); the note then says why. A conv validated through its halo configuration says so
    (cores and remote sticks); one validated through its loop nest instead says why, whatever the
    verdict.
    """
    from executor.validate import ValidationTooLarge, validate_as_run

    try:
        report = validate_as_run(problem, mapping, seed=seed)
    except ValidationTooLarge as e:  # not a verdict on the mapping: it could not be checked within the cap
        return None, None, f"not validated: {e}"
    except Exception as e:  # the executor's failure must not lose the search result
        return None, False, f"validation raised {type(e).__name__}: {e}"
    data = report.model_dump(mode="json")
    how = f" [method: {report.method}]"
    if report.status == "not-checked":
        return data, None, f"validation {report.reason}{how}"
    if report.status == "failed":
        return data, False, f"validation failed: {report.reason}{how}"
    if report.method == "halo":
        return data, True, f"validation passed through the halo configuration ({report.notes[0]}){how}"
    fallback = next((n for n in report.notes if n.startswith("halo path not used")), "")
    return data, True, f"validation passed, {fallback}{how}" if fallback else ""


#: seconds past its budget from which a result says the search overran it (and why)
OVERRUN_NOTED = 0.2


def package_result(
    problem: Problem,
    target: Target,
    settings: SearchSettings,
    found: Found,
    *,
    key: str,
    problem_hash: str,
    version: str,
    overrides: dict[str, Any],
    seconds: float,
    validate: bool,
    pareto: list[ParetoPoint],
) -> TuneResult:
    """Price the best point with `Target.cost`, compare it with the roofline bound, and validate it."""
    notes = list(found.notes)
    bound = target.lower_bound(problem)
    mapping = cost = None
    values: dict[str, float] = {}
    gap: float | None = None
    render = ""
    validation: dict[str, Any] | None = None
    passed: bool | None = None
    if found.point is not None:
        mapping = target.mapping(problem, found.point)
        errs = target.check(problem, mapping)
        if errs:  # score_codes and check disagree: a model bug the conformance suite should catch
            notes.append("the scorer accepted a mapping check() rejects: " + "; ".join(v.message for v in errs))
        cost = target.cost(problem, mapping)
        values = {o: float(cost.objective(o)) for o in settings.objectives}
        gap = cost.gap
        render = target.render(problem, mapping)
        if validate:
            validation, passed, note = validation_of(problem, mapping, settings.seed)
            if note:
                notes.append(note)
    elif found.stop_reason in BUDGET_STOPS:  # not a verdict on the space: part of it was never searched
        notes.append(
            f"no feasible mapping found before the search stopped ({found.stop_reason}): the points scored were all "
            "infeasible (counts.top_violations says why) and the rest of the space was not searched"
            + ("" if found.stop_reason == "cancelled" else ": raise the budget (seconds, trials; patience 0 spends it)")
        )
    else:
        notes.append(
            "no feasible mapping in the target's search space: see counts.top_violations for what ruled them out"
        )
    budget = settings.max_seconds
    if seconds > 1.5 * budget and seconds - budget > OVERRUN_NOTED:  # (said, not hidden behind "seconds")
        notes.append(
            f"the search took {seconds:.2f} s against its {budget:g} s budget: the target's per-problem preparation "
            "(its space, tables and first bounds) and the first structure scored are not cut by the budget"
        )
    return TuneResult(
        key=key,
        problem_hash=problem_hash,
        problem=problem.summary(),
        target=target.name,
        family=target.family,
        overrides=overrides,
        cost_model_version=version,
        settings=settings,
        strategy=found.strategy,
        objectives=settings.objectives,
        point=found.point,
        mapping=mapping,
        cost=cost,
        values=values,
        lower_bound=bound,
        gap=gap,
        proven_optimal=found.proven_optimal and found.point is not None,
        stop_reason=found.stop_reason,
        trace=found.trace,
        trace_points=found.trace_points,
        inner_points=found.inner_points,
        scorer_rate=found.rate,
        counts=found.counts,
        pareto=pareto,
        validation=validation,
        validation_passed=passed,
        render=render,
        seconds=seconds,
        notes=notes,
    )
