"""How long `POST /v1/mappings/validate` may run: a size check up front, a deadline while it runs.

A validation runs the mapping's loop nest in numpy inside the API process (`executor.validate`),
so its time is bounded three ways, each with a problem detail that says what to change:

- **up front** (422, before any work): the sequential reduction steps (`MAX_VALIDATION_STEPS`,
  each a numpy call) the executor will walk, after it shortens a reduction over its own step limit
  (`executor.proxy.shorten`: so only a mapping whose steps it cannot shorten, irregular strides, is
  refused here), and the iteration points the run computes, padding included, on the proxy
  the executor would run for a problem over its memory cap (`TM_MAX_VALIDATION_POINTS`);
- **while running** (503): a run still going after `TM_VALIDATION_SECONDS` is answered as timed
  out. A numpy run cannot be stopped from outside, so it finishes in the background and keeps its
  validation slot (`TM_MAX_VALIDATIONS`) until then: at most that many runs ever share the CPU;
- **concurrency** (429): no free slot, retry after ``Retry-After`` (app.api.routes.mappings).

Every refusal points at ``mapper validate FILE`` (the same request body, run on the client's own
machine with no limit) and at running a smaller instance of the problem with the same mapping.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import TypeVar

from app.api.errors import Unprocessable, ValidationTimedOut
from app.settings import Settings
from costmodels.ir import Mapping
from executor import proxy
from executor.validate import DEFAULT_CAP_BYTES, DEFAULT_MAX_STEPS, PROXY_TARGET
from workload.problem import Problem

T = TypeVar("T")

#: Sequential reduction steps the executor may take for one request (each is one numpy call over the tile).
MAX_VALIDATION_STEPS = 1 << 16

#: What every refusal suggests instead.
OFFLINE_HINT = (
    "validate a smaller instance of the problem with the same loop structure, or save this request body to a "
    "file and run `mapper validate FILE` on your own machine (no time limit; --max-steps runs more of a long "
    "reduction than the executor's default before it validates a proxy)"
)


def reduction_steps(problem: Problem, mapping: Mapping) -> int:
    """Sequential reduction steps the executor walks: the temporal loops of reduced axes outside the instruction
    tile, after it shortens a reduction over its default step limit to a proxy (`executor.proxy.shorten`, as
    `executor.validate` does; loops of irregular strides are not shortened)."""
    steps = proxy.reduction_steps(problem, mapping)
    if steps > DEFAULT_MAX_STEPS:
        short_problem, short_mapping, _ = proxy.shorten(problem, mapping, DEFAULT_MAX_STEPS)
        steps = proxy.reduction_steps(short_problem, short_mapping)
    return steps


def executed_points(problem: Problem, mapping: Mapping) -> tuple[int, bool]:
    """(iteration points the executor computes, padding included; whether on a proxy).

    A problem over the executor's memory cap runs on the proxy `executor.validate` builds; this
    builds it with the same cap and target share, ignoring the fidelity operand sets that only
    make the real proxy smaller, so the count is an upper estimate."""
    run_problem, run_mapping = problem, mapping
    proxied = proxy.estimate_bytes(problem, mapping) > DEFAULT_CAP_BYTES
    if proxied:
        run_problem, run_mapping, _ = proxy.shrink(problem, mapping, int(DEFAULT_CAP_BYTES * PROXY_TARGET))
    return math.prod(run_mapping.padded_size(axis) for axis in run_problem.axes), proxied


def check_validation_size(problem: Problem, mapping: Mapping, settings: Settings) -> None:
    """Raise a 422 problem when the run would take more steps or points than a request may."""
    steps = reduction_steps(problem, mapping)
    if steps > MAX_VALIDATION_STEPS:
        raise Unprocessable(
            f"the mapping takes {steps} sequential reduction steps that the executor cannot shorten (irregular "
            f"strides), over the {MAX_VALIDATION_STEPS} a request may run",
            field="mapping",
            hint="move reduction loops into the innermost level (the instruction tile), or " + OFFLINE_HINT,
        )
    points, proxied = executed_points(problem, mapping)
    if points > settings.max_validation_points:
        on = " (on the proxy a problem over the executor's memory cap runs on)" if proxied else ""
        raise Unprocessable(
            f"the run would compute {points:,} iteration points{on}, over this service's limit of "
            f"{settings.max_validation_points:,}",
            field="mapping",
            limit="max_validation_points",
            hint=OFFLINE_HINT + "; the operator raises the limit with TM_MAX_VALIDATION_POINTS",
        )


def run_with_deadline(work: Callable[[], T], slots: threading.BoundedSemaphore, settings: Settings) -> T:
    """`work()` on a thread of its own, which releases one of `slots` (already acquired) when it ends.

    Its result or exception comes back if it ends within `settings.validation_seconds`; else a 503
    problem, while the run goes on to its end in the background, holding its slot (module docstring)."""
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(work())
        except BaseException as e:  # handed to the waiting request (or dropped, if it gave up)
            errors.append(e)
        finally:
            slots.release()

    thread = threading.Thread(target=run, name="tm-validate", daemon=True)
    thread.start()
    thread.join(settings.validation_seconds)
    if thread.is_alive():
        raise ValidationTimedOut(
            f"the validation did not finish within this service's {settings.validation_seconds:g} s "
            "(TM_VALIDATION_SECONDS); it goes on in the background and holds a validation slot until it ends",
            limit="validation_seconds",
            hint=OFFLINE_HINT,
        )
    if errors:
        raise errors[0]
    return results[0]
