"""Rewrites the search may choose instead of the problem as given: the folded stem (issue #13).

On a Tenstorrent target, with latency the only objective, a conv2d the fold applies to
(`workload.conv_fold.not_foldable`: a stride above 1, dilation 1, one group) has two forms: as
given, and folded into the stride-1 conv tt-metal runs ResNet-50's stem as. The folded answer costs
its conv plus the fold op (`fold_op_seconds`); the cheaper of the two answers, and the result's
`transform` field (`mapper.result.TransformChoice`) says which, with both prices, or with the
bound of the form that was not searched because its bound shows it cannot win ("Bounding the second
form" below). A folded answer is validated against the ORIGINAL problem (`executor.folded.validate_folded`).

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

Bounding the second form (`tune_with_fold`). Each form has a bound ``B``: the Tensix structure
bound of its whole space, ``target.structure_bound(problem, {})`` (`costmodels.tenstorrent.bounds`:
the smallest bound over every cell of the space, each cell's bound at most the latency of any
feasible point of the cell, placement options and live L1 bytes included; shown admissible on
random problems by tests/costmodels/test_structure_bounds.py). So ``B_orig <= O`` and ``B_fold <=
F``, where O and F are the optima as given and folded, and the folded answer is chosen iff ``F + op
< O`` (the fold op ``op`` depends on the problem only). The form with the lower ``B`` (the folded
one's plus ``op``) is searched first, ties to the original; the other is searched only when its
bound leaves it a chance:

- original first, optimum O: if ``B_fold + op >= O`` then ``F + op >= O``: the folded form cannot
  win, it is not searched and the original answers (what the full comparison answers);
- folded first, answer ``T = F + op``: if ``B_orig >= T`` then ``O >= T``: the original cannot beat
  it and the folded answers (the full comparison would keep the original on an exact tie ``O = T``).

Both tests are taken with `mapper.bounds.RTOL` (``bound * (1 + RTOL) >= best``, as every bound test
of the mapper), so the answer is the full comparison's within that tolerance. The roofline
``target.lower_bound`` is not used: it counts DRAM bytes a placement option keeps in L1, so with
``input_in_l1`` it can exceed the optimum (a 4x4/s4 patchify on wormhole-n150 in L1: roofline
4.608 us, optimum 2.512 us). The skipped form's latency is None in `TransformChoice`, its bound
given; the answer is proven optimal when the searched form's search is (the skipped one is proven
worse by its bound).

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


def form_bound_seconds(problem: Problem, target: Target) -> float:
    """Seconds no feasible mapping of `problem` on `target` beats: the structure bound of its whole space.

    ``structure_bound(problem, {})`` ("Bounding the second form" in the module docstring), 0 for a
    target without one (nothing is bounded out).
    """
    hook = getattr(target, "structure_bound", None)
    return float(hook(problem, {})) if hook is not None else 0.0


def second_form_loses(bound: float, best: float) -> bool:
    """True when a form whose answer is at least `bound` cannot beat `best` (beyond `mapper.bounds.RTOL`)."""
    from mapper.bounds import StructureBounds

    return StructureBounds.bounded_out(bound, best)


def tune_with_fold(
    problem: Problem,
    target: Target,
    settings: SearchSettings,
    *,
    as_given: TuneFn,
    tune: TuneFn,
    overrides: dict[str, Any] | None,
    validate: bool,
    progress: Any = None,
    bound_first: bool = True,
) -> TuneResult:
    """The answer to `problem`: as given, or folded when that is cheaper (module docstring), saying which.

    `as_given` searches the problem as given and packages it (`mapper.search.tune_as_given`); `tune`
    is `mapper.search.tune`, called on the folded problem (stride 1: it offers no fold of its own).
    Where a fold is offered both are packaged unvalidated and only the answer is validated here
    (`validate`): the original against itself, or the folded mapping against the original problem.
    `bound_first` (the default): the form with the lower bound is searched first and the other only
    when its bound leaves it a chance ("Bounding the second form"); False searches both forms whole
    (the benchmarks' "before" and their side-by-side prices).
    """
    fold = fold_candidate(problem, target, settings)
    if fold is None:
        return as_given(problem, target, settings, overrides=overrides, validate=validate, progress=progress)
    folded = folded_problem(problem, fold)
    if target.supports(folded):
        result = as_given(problem, target, settings, overrides=overrides, validate=False, progress=progress)
        why = target.supports(folded)[0].message
        result = result.model_copy(update={"notes": [*result.notes, f"fold not priced: {target.name} {why}"]})
        return _validated(problem, result, validate=validate, seed=settings.seed)
    op = fold_op_seconds(fold, problem, getattr(target, "hardware", None))
    b_orig, b_fold = form_bound_seconds(problem, target), form_bound_seconds(folded, target)
    watch = as_watch(progress)
    choice = TransformChoice(
        name="fold", description=fold.describe(), chosen=False, original_latency=None, transformed_latency=None,
        transform_latency=op, transformed_problem=folded.summary(), pricing=PRICING, original_bound=b_orig,
        transformed_bound=b_fold,
    )  # fmt: skip
    other: TuneResult | None = None
    if bound_first and b_fold + op < b_orig:  # the folded form first: the original may be bounded out
        other = tune(folded, target, settings, overrides=overrides, validate=False,
                     progress=None if watch is None else _AnswerWatch(watch, op, None))  # fmt: skip
        theirs = other.best_value("latency")
        choice = choice.model_copy(update={"transformed_latency": theirs})
        if theirs is not None and (other.stop_reason == "cancelled" or second_form_loses(b_orig, theirs + op)):
            choice = choice.model_copy(update={"chosen": True})
            return _folded_answer(problem, fold, None, other, choice, target=target, settings=settings,
                                  overrides=overrides, validate=validate)  # fmt: skip
    later = progress if watch is None or other is None else _AnswerWatch(watch, 0.0, choice.total_latency)
    result = as_given(problem, target, settings, overrides=overrides, validate=False, progress=later)
    mine = result.best_value("latency")
    choice = choice.model_copy(update={"original_latency": mine})
    if other is None:
        if result.stop_reason == "cancelled":  # a cancelled search starts no other
            return _validated(problem, result, validate=validate, seed=settings.seed)
        if bound_first and mine is not None and second_form_loses(b_fold + op, mine):
            result = result.model_copy(update={"transform": choice, "notes": [*result.notes, choice.summary()]})
            return _validated(problem, result, validate=validate, seed=settings.seed)
        answer_watch = None if watch is None else _AnswerWatch(watch, op, mine)
        other = tune(folded, target, settings, overrides=overrides, validate=False, progress=answer_watch)
        choice = choice.model_copy(update={"transformed_latency": other.best_value("latency")})
    theirs = choice.transformed_latency
    chosen = theirs is not None and (mine is None or theirs + op < mine)
    choice = choice.model_copy(update={"chosen": chosen})
    if not chosen:
        result = result.model_copy(update={"transform": choice, "notes": [*result.notes, choice.summary()]})
        return _validated(problem, result, validate=validate, seed=settings.seed)
    return _folded_answer(problem, fold, result, other, choice, target=target, settings=settings,
                          overrides=overrides, validate=validate)  # fmt: skip


def tune_both_forms(problem: Problem, target: Target, settings: SearchSettings | None = None) -> TuneResult:
    """`mapper.search.tune` with both forms searched whole (``bound_first=False``), unvalidated: both prices known."""
    from mapper.search import check_request, tune, tune_as_given

    settings = settings or SearchSettings()
    check_request(problem, target, settings)
    return tune_with_fold(problem, target, settings, as_given=tune_as_given, tune=tune, overrides=None,
                          validate=False, bound_first=False)  # fmt: skip


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
    original: TuneResult | None,
    folded: TuneResult,
    choice: TransformChoice,
    *,
    target: Target,
    settings: SearchSettings,
    overrides: dict[str, Any] | None,
    validate: bool,
) -> TuneResult:
    """The folded result as the answer to the original request: its key, its problem, validated against it.

    `original` is None when the problem as given was not searched (bounded out, or the search cancelled).
    """
    from mapper.keys import cache_key, cost_model_version, problem_hash

    notes = [
        choice.summary(),
        "point, mapping, cost, roofline bound and gap are the folded conv's; the latency value adds the fold op",
        *folded.notes,
    ]
    if original is None:
        bounded = folded.stop_reason != "cancelled"
        both = folded.proven_optimal and bounded
        if not bounded:
            notes.append("cancelled: the problem as given was not searched")
    else:
        both = original.proven_optimal and folded.proven_optimal
    if not both:
        notes.append("not proven optimal: the original and the folded search must both be complete to compare them")
    update: dict[str, Any] = {
        "key": cache_key(problem, target.name, dict(overrides or {}), cost_model_version(target), settings),
        "problem_hash": problem_hash(problem),
        "problem": problem.summary(),
        "overrides": dict(overrides or {}),
        "values": {**folded.values, "latency": choice.total_latency},
        "proven_optimal": both,
        "seconds": (original.seconds if original is not None else 0.0) + folded.seconds,
        "transform": choice,
        "validation": None,
        "validation_passed": None,
    }
    if validate and folded.mapping is not None:
        data, passed, note = _validation(problem, fold, folded, settings.seed)
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
