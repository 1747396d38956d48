"""Rewrites the search may choose instead of the problem as given: the folded stem (issue #13).

On a Tenstorrent target, with latency the only objective, a conv2d the fold applies to
(`workload.conv_fold.not_foldable`: a stride above 1, dilation 1, one group) is tuned twice: as given,
and folded into the stride-1 conv tt-metal runs ResNet-50's stem as. The folded answer costs its conv
plus the fold op (`fold_op_seconds`); the cheaper of the two answers, and the result's `transform`
field (`mapper.result.TransformChoice`) says which, with both prices. A folded answer is validated
against the ORIGINAL problem (`executor.folded.validate_folded`).

Where it is not offered, and why:

- other families: the fold op is priced from Tenstorrent figures only (hardware-facts.md §4.1); the
  other references describe no fold or space-to-depth op, so its cost there would be invented;
- several objectives, or one other than latency: only the fold's time is priced (no energy,
  off-chip bytes or footprint figure of the fold op), so a Pareto front would be wrong;
- a folded problem the target cannot run (its checks name why): the original answers.

Fold op pricing (`fold_op_seconds`). tt-metal's ``ttnn.fold`` (``ttnn/cpp/ttnn/operations/
data_movement/fold/fold.cpp`` @943190fec3ff) has two paths. An L1 height-sharded input is padded by a
halo op and rearranged core-locally (``fold_multi_core_program_factory.cpp``: each core copies its
shard's sticks into the folded order with NoC reads of its own L1, ``writer_cb2s_row_major.cpp``);
a DRAM input is padded and folded DRAM to DRAM (``fold_multi_core_dram_program_factory.cpp``). The
model follows where the target's placement option says the conv's input is:

- input from DRAM (the default: `TensixHardware.input_in_l1` off): the fold reads the input from DRAM
  and writes the folded input back, so the folded conv reads it from DRAM as the original reads its
  own: ``(input bytes + folded bytes) / DRAM bandwidth`` (hardware-facts.md §4.1, DRAM rows: 288 GB/s
  WH n150, 512 GB/s BH p150; the preset's ``dram_gb_per_s``);
- input already L1-sharded: each core reads and writes its share through its NoC <-> L1 port,
  ``max(input, folded) bytes / cores / l1_port_bytes_per_cycle`` (hardware-facts.md §4.1, NoC <-> L1
  row: 256 bit read + 256 bit write per cycle, so read and write overlap).

[ASSUMPTION] the fold moves the conv's input dtype (bytes from `workload.dtypes.nbytes`), no per-op
dispatch overhead is charged (the cost model charges none for any op), and the halo padding's extra
sticks are counted in the folded bytes (the folded tensor holds the padding).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from costmodels.protocol import Target
from mapper.result import TransformChoice, TuneResult
from mapper.settings import SearchSettings
from mapper.watch import Watch, as_watch
from workload import dtypes
from workload.conv2d import as_conv2d
from workload.conv_fold import ConvFold, folded_problem, not_foldable
from workload.problem import Problem

#: the objectives the fold op is priced for (module docstring)
FOLD_OBJECTIVES: tuple[str, ...] = ("latency",)

PRICING = (
    "fold op: DRAM read of the input and write of the folded input at the preset's DRAM bandwidth, or, with the "
    "input L1-sharded, core-local copies through the NoC <-> L1 port (hardware-facts.md §4.1; tt-metal ttnn fold.cpp)"
)


def fold_candidate(problem: Problem, target: Target, settings: SearchSettings) -> ConvFold | None:
    """The fold the search should also price for this request, or None (module docstring: where and why not)."""
    if target.family != "tenstorrent" or settings.objectives != FOLD_OBJECTIVES:
        return None
    params = as_conv2d(problem)
    if params is None or not_foldable(params) is not None:
        return None
    return ConvFold(params)


def fold_op_seconds(fold: ConvFold, problem: Problem, hardware: Any) -> float:
    """Seconds the fold op takes on a Tensix chip (module docstring, "Fold op pricing")."""
    dtype = problem.inputs[0].dtype
    read = dtypes.nbytes(dtype, fold.input_elements)
    write = dtypes.nbytes(dtype, fold.folded_elements)
    if hardware.input_in_l1:
        cycles = max(read, write) / hardware.cores / hardware.l1_port_bytes_per_cycle
    else:
        cycles = (read + write) / hardware.dram_bytes_per_cycle
    return float(cycles / hardware.clock_hz)


TuneFn = Callable[..., TuneResult]


def choose_fold(
    problem: Problem,
    target: Target,
    settings: SearchSettings,
    result: TuneResult,
    *,
    tune: TuneFn,
    overrides: dict[str, Any] | None,
    validate: bool,
    progress: Any = None,
) -> TuneResult:
    """`result` (the problem as given), or the folded answer when it is cheaper; either way saying so.

    `tune` is `mapper.search.tune`; it is called on the folded problem, which is stride 1, so it
    offers no fold of its own. Where a fold is offered `mapper.search.tune` packages `result`
    unvalidated, and only the chosen answer is validated here (`validate`): the original against
    itself, or the folded mapping against the original problem. While the folded form is searched,
    `progress` hears as ``best`` what the answer's latency would be: the folded conv's best plus the
    fold op, or the original's when that is lower (`_AnswerWatch`).
    """
    fold = fold_candidate(problem, target, settings)
    if fold is None:
        return result
    if result.stop_reason == "cancelled":  # a cancelled search starts no other
        return _validated(problem, result, validate=validate, seed=settings.seed)
    folded = folded_problem(problem, fold)
    if target.supports(folded):
        why = target.supports(folded)[0].message
        result = result.model_copy(update={"notes": [*result.notes, f"fold not priced: {target.name} {why}"]})
        return _validated(problem, result, validate=validate, seed=settings.seed)
    op = fold_op_seconds(fold, problem, getattr(target, "hardware", None))
    mine = result.best_value("latency")
    watch = as_watch(progress)
    answer_watch = None if watch is None else _AnswerWatch(watch, op, mine)
    other = tune(folded, target, settings, overrides=overrides, validate=False, progress=answer_watch)
    theirs = other.best_value("latency")
    chosen = theirs is not None and (mine is None or theirs + op < mine)
    choice = TransformChoice(
        name="fold",
        description=fold.describe(),
        chosen=chosen,
        original_latency=mine,
        transformed_latency=theirs,
        transform_latency=op,
        transformed_problem=folded.summary(),
        pricing=PRICING,
    )
    if not chosen:
        result = result.model_copy(update={"transform": choice, "notes": [*result.notes, choice.summary()]})
        return _validated(problem, result, validate=validate, seed=settings.seed)
    return _folded_answer(problem, fold, result, other, choice, validate=validate, seed=settings.seed)


class _AnswerWatch(Watch):
    """The caller's watch while the folded form is searched: ``best`` as the answer's latency would be.

    The folded search's best is its conv alone; the answer adds the fold op (`fold_op_seconds`) and
    keeps the original when that is cheaper, so a job's progress never shows a best the result
    does not have. Cancellation is the caller's.
    """

    def __init__(self, inner: Watch, op_seconds: float, original: float | None) -> None:
        super().__init__(cancel=inner.cancel)
        self.inner, self.op_seconds, self.original = inner, op_seconds, original

    def report(self, done: int, total: int, best: float | None, unit: str = "trials") -> None:
        self.unit = unit
        self.inner.report(done, total, answer_latency(best, self.op_seconds, self.original), unit)


def answer_latency(folded: float | None, op_seconds: float, original: float | None) -> float | None:
    """The latency the answer would have: the cheaper of the original and the folded conv plus the fold op."""
    options = [v for v in (original, None if folded is None else folded + op_seconds) if v is not None]
    return min(options) if options else None


def _validated(problem: Problem, result: TuneResult, *, validate: bool, seed: int) -> TuneResult:
    """`result` (the problem as given, packaged unvalidated) validated now that it is the answer."""
    if not validate or result.mapping is None:
        return result
    from mapper.report import validation_of

    data, passed, note = validation_of(problem, result.mapping, seed)
    notes = [*result.notes, note] if note else result.notes
    return result.model_copy(update={"validation": data, "validation_passed": passed, "notes": notes})


def _folded_answer(
    problem: Problem,
    fold: ConvFold,
    original: TuneResult,
    folded: TuneResult,
    choice: TransformChoice,
    *,
    validate: bool,
    seed: int,
) -> TuneResult:
    """The folded result as the answer to the original request: its key, its problem, validated against it."""
    notes = [
        choice.summary(),
        "point, mapping, cost, roofline bound and gap are the folded conv's; the latency value adds the fold op",
        *folded.notes,
    ]
    both = original.proven_optimal and folded.proven_optimal
    if not both:
        notes.append("not proven optimal: the original and the folded search must both be complete to compare them")
    update: dict[str, Any] = {
        "key": original.key,
        "problem_hash": original.problem_hash,
        "problem": original.problem,
        "overrides": original.overrides,
        "values": {**folded.values, "latency": choice.total_latency},
        "proven_optimal": both,
        "seconds": original.seconds + folded.seconds,
        "transform": choice,
        "validation": None,
        "validation_passed": None,
    }
    if validate and folded.mapping is not None:
        data, passed, note = _validation(problem, fold, folded, seed)
        update["validation"], update["validation_passed"] = data, passed
        notes.append(note)
    update["notes"] = notes
    return folded.model_copy(update=update)


def _validation(problem: Problem, fold: ConvFold, folded: TuneResult, seed: int) -> tuple[Any, bool | None, str]:
    """(report as JSON data, passed, note) of the folded mapping against the original problem."""
    from executor.folded import validate_folded
    from executor.validate import ValidationTooLarge

    assert folded.mapping is not None
    try:
        report = validate_folded(problem, fold, folded.mapping, seed=seed)
    except ValidationTooLarge as e:
        return None, None, f"not validated: {e}"
    except Exception as e:  # the executor's failure must not lose the search result
        return None, False, f"validation raised {type(e).__name__}: {e}"
    passed = True if report.status == "passed" else (False if report.status == "failed" else None)
    return (
        report.model_dump(mode="json"),
        passed,
        f"validation {report.status}: {report.reason} [method: {report.method}]",
    )
