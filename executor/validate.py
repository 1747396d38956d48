"""Validate a mapping: run it tile by tile and compare with the exact reference evaluation.

`validate` never materialises a problem whose validation would exceed the memory cap: it then
validates a proxy (`executor.proxy.shrink`) that keeps the mapping's structure with fewer outer
iterations, and says so in the report. Its time is bounded too: a mapping (or its memory proxy)
that walks more than `max_steps` reduction steps (`executor.proxy.reduction_steps`: the temporal
reduction loops, run one step at a time) is validated on a proxy over a shorter reduction
(`executor.proxy.shorten`); the report's method is then ``proxy``, its reason ends "on a proxy
(... of the points; over the N-step limit)" and a note gives the steps and the loops shortened.
A mapping whose steps no proxy can bring under `HARD_LIMIT_FACTOR` times the limit (irregular
strides) is refused as too large, like one over the memory cap, unless it misses or repeats points:
it then fails on its coverage alone, its numbers not run (``elements_compared`` 0, and the reason
says so).

`validate_as_run` validates a mapping the way it runs: an L1-sharded Tenstorrent conv through its
halo configuration (`validate_sharded_conv`, method ``halo``: each core builds its buffer from
padding, local and remote sticks and computes its output sticks from it), everything else through
its loop nest (`validate`). A sharded conv falls back to its loop nest, and the report says why,
when the halo executor cannot judge it: a math fidelity other than the exact one or a narrower
accumulator than the problem's (the halo executor multiplies exact products and accumulates in the
problem's type), or a halo run over the memory cap (the loop nest then runs on a proxy).

The verdict is three-valued (`ValidationReport.status`, with its `reason`):

- ``failed``: the mapping does not cover the iteration space exactly once (`coverage_errors`,
  whether or not the numbers show it: a repeated tile of a max reduction does not), or some
  output element lies outside the tolerance of the mapping's accumulator (`tolerance.derive`),
  or the mapping accumulates in a narrower format than the problem declares and some element
  lies outside the problem's bound (the reason then tells this precision loss from a wrong result),
  or, for block-float inputs or a fidelity that drops bits, some element lies outside the formats'
  a-priori bound around the exact result of the unpacked inputs (`executor.format_bound`; the
  tolerance reason names that bound and how much of it the result used);
- ``not-checked``: the mapping computes in a way the executor does not emulate (a Tenstorrent
  math fidelity on operands `executor.fidelity` cannot model); the numbers are still reported;
- ``passed``: none of the above. ``passed`` is True only then.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from costmodels.ir import Mapping, coverage_errors, flat_mapping
from costmodels.tenstorrent.halo import HaloConfig
from executor import fidelity as fidelity_mod
from executor import numerics
from executor import proxy as proxy_mod
from executor.halo_exec import run_sharded_conv
from executor.judgement import Status, compare, format_verdict, judge, narrower_accumulator, reference_abs_sum, verdict
from executor.tiled import run_mapping
from executor.tolerance import Tolerance, derive
from workload import dtypes
from workload.block_layout import block_packing
from workload.problem import Problem
from workload.reference import evaluate, random_inputs


class ValidationTooLarge(RuntimeError):
    """No structure-keeping proxy of the mapping fits the memory cap: validation would not be bounded."""


#: The proxy is shrunk until its estimate is below this share of the cap.
PROXY_TARGET = 0.75

#: A proxy whose estimate still exceeds the cap by this factor is not run (the estimate is an upper bound).
HARD_LIMIT_FACTOR = 4

#: Default memory cap of a validation run.
DEFAULT_CAP_BYTES = 256 * 1024 * 1024

#: Default limit on the reduction steps a validation run walks one at a time (each costs tens of
#: microseconds whatever the tile's size, so 4,096 steps stay within a fraction of a second).
DEFAULT_MAX_STEPS = 4096


#: how the numbers were produced: the whole loop nest, a proxy of it, or the halo configuration
Method = Literal["full", "proxy", "halo"]


class ValidationReport(BaseModel):
    """Outcome of one validation run.

    `passed` is True only when `status` is ``passed``: a mapping the executor could not check is
    ``not-checked`` (never passed), and `reason` says why, or what failed, or what was checked.
    """

    model_config = ConfigDict(frozen=True)
    passed: bool
    status: Status
    reason: str
    method: Method
    elements_compared: int
    checked_fraction: float
    max_abs_error: float
    max_rel_error: float
    failing_elements: int
    tolerance: Tolerance
    tolerance_reason: str
    first_failing_index: tuple[int, ...] | None
    validated_axes: dict[str, int]
    notes: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> ValidationReport:
        if self.passed != (self.status == "passed"):
            raise ValueError(f"passed={self.passed} contradicts status {self.status!r}")
        return self


def validate(
    problem: Problem,
    mapping: Mapping,
    *,
    seed: int = 0,
    memory_cap_bytes: int = DEFAULT_CAP_BYTES,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> ValidationReport:
    """Run `mapping` tile by tile on seeded random inputs and compare it with the reference.

    Args:
        problem: the problem.
        mapping: any mapping of it, from any target (broken ones included).
        seed: seed of the random inputs.
        memory_cap_bytes: above this estimated peak, a structure-keeping proxy is validated.
        max_steps: above this many reduction steps, a proxy over a shorter reduction is validated.
    """
    coverage = [e.message for e in coverage_errors(problem, mapping)]
    notes = [f"coverage: {m}" for m in coverage]
    not_emulated = fidelity_mod.unsupported(problem, mapping)
    method: Method = "full"
    run_problem, run_mapping_ = problem, mapping
    # each extra operand set of an emulated fidelity (HiFi3 has two) holds its own padded operands
    cap = memory_cap_bytes if not_emulated else memory_cap_bytes // fidelity_mod.operand_sets(mapping)
    if proxy_mod.estimate_bytes(problem, mapping) > cap:
        # aim below the cap: the estimate can miss temporaries of unusual nests by a few percent
        run_problem, run_mapping_, more = proxy_mod.shrink(problem, mapping, int(cap * PROXY_TARGET))
        notes += more
        method = "proxy"
        need = proxy_mod.estimate_bytes(run_problem, run_mapping_)
        if need > HARD_LIMIT_FACTOR * cap:
            raise ValidationTooLarge(
                f"even the smallest proxy of this mapping needs about "
                f"{need / 2**20:,.0f} MiB to validate, over "
                f"{HARD_LIMIT_FACTOR} x the {memory_cap_bytes / 2**20:,.0f} MiB cap: raise memory_cap_bytes "
                "or validate a smaller instance of the problem"
            )
    why = ["over the memory cap"] if method == "proxy" else []
    if proxy_mod.reduction_steps(run_problem, run_mapping_) > max_steps:
        run_problem, run_mapping_, more = proxy_mod.shorten(run_problem, run_mapping_, max_steps)
        notes += more
        method, why = "proxy", [*why, f"over the {max_steps:,}-step limit"]
        left = proxy_mod.reduction_steps(run_problem, run_mapping_)
        if left > HARD_LIMIT_FACTOR * max_steps:
            text = (
                f"even the shortest proxy of this mapping walks {left:,} reduction steps, over "
                f"{HARD_LIMIT_FACTOR} x the {max_steps:,}-step limit"
            )
            if coverage:  # failed whatever the numbers say: report it so, unrun (a repeated-tile mutant)
                return _coverage_only(problem, mapping, coverage, [*notes, text])
            raise ValidationTooLarge(f"{text}: raise max_steps or validate a smaller instance of the problem")
    originals = random_inputs(run_problem, np.random.default_rng(seed), pack_blocks=False)
    inputs = _packed(run_problem, originals)
    phases = None if not_emulated else fidelity_mod.plan(run_problem, run_mapping_, inputs)
    operand_sets = [list(pair) for pair in phases.pairs] if phases is not None else [inputs]
    result = run_mapping(run_problem, run_mapping_, inputs)  # emulates the same fidelity phases
    fields, status, reason = judge(
        problem, run_problem, mapping, (originals, inputs), operand_sets, result, phases, coverage, not_emulated, notes
    )
    if method == "proxy":
        reason += f" on a proxy ({run_problem.points / problem.points:.3g} of the points; {' and '.join(why)})"
    fields.pop("within")
    fraction = run_problem.points / problem.points
    return ValidationReport(
        passed=status == "passed",
        status=status,
        reason=reason,
        method=method,
        checked_fraction=fraction,
        validated_axes=dict(run_problem.axes),
        notes=tuple(notes),
        **fields,
    )


def _coverage_only(problem: Problem, mapping: Mapping, coverage: list[str], notes: list[str]) -> ValidationReport:
    """The failed report of a mapping that misses or repeats points, whose numbers were too long to run."""
    tol, why = derive(problem, mapping.acc_dtype)
    return ValidationReport(
        passed=False,
        status="failed",
        reason="coverage: " + "; ".join(coverage) + f" (numbers not run: {notes[-1]})",
        method="proxy",
        elements_compared=0,
        checked_fraction=0.0,
        max_abs_error=0.0,
        max_rel_error=0.0,
        failing_elements=0,
        tolerance=tol,
        tolerance_reason=why,
        first_failing_index=None,
        validated_axes={},
        notes=tuple(notes),
    )


def _packed(problem: Problem, originals: list[np.ndarray]) -> list[np.ndarray]:
    """The inputs a run reads: block-float inputs packed (`workload.blockfloat`) where tt-metal packs them
    (`workload.block_layout.block_packing`), the others as they are."""
    return [
        numerics.to_storage(x, o.dtype, block_packing(problem, i)) if dtypes.is_block(o.dtype) else x
        for i, (o, x) in enumerate(zip(problem.inputs, originals, strict=True))
    ]


def halo_estimate_bytes(problem: Problem, config: HaloConfig) -> int:
    """Upper estimate of the peak memory of `validate_sharded_conv`.

    The inputs, the reference (with its im2col temporary) and the comparison, as `proxy.estimate_bytes`
    counts them for the flat loop nest, plus the largest core's halo buffer and its gathered windows
    (``out sticks x Kh x Kw x G x Ci`` in the compute type, twice for the contraction's copy).
    """
    params = config.params
    compute = numerics.compute_dtype(problem).itemsize
    window = params.kernel[0] * params.kernel[1] * params.in_channels
    outs = max((c.out_end - c.out_start for c in config.cores), default=0)
    per_core = config.max_buffer_sticks() * params.in_channels * compute + 2 * outs * window * compute
    return proxy_mod.estimate_bytes(problem, flat_mapping(problem)) + per_core


def validate_sharded_conv(
    problem: Problem,
    config: HaloConfig,
    *,
    seed: int = 0,
    memory_cap_bytes: int = DEFAULT_CAP_BYTES,
    mapping: Mapping | None = None,
) -> ValidationReport:
    """Run a sharded convolution from its halo configuration and compare it with the reference.

    With `mapping` (the mapping the configuration was built from), its coverage is checked too:
    a loop nest that misses or repeats a point fails whatever the halo run computes.

    Raises:
        ValueError: the convolution is too large to validate within `memory_cap_bytes`.
    """
    need = halo_estimate_bytes(problem, config)
    if need > memory_cap_bytes:
        raise ValueError(
            f"this convolution's halo validation needs about {_mib(need)} MiB, over the "
            f"{_mib(memory_cap_bytes)} MiB cap; validate a smaller batch or image"
        )
    coverage = [e.message for e in coverage_errors(problem, mapping)] if mapping is not None else []
    originals = random_inputs(problem, np.random.default_rng(seed), pack_blocks=False)
    inputs = _packed(problem, originals)
    result = run_sharded_conv(problem, config, inputs)
    ref = evaluate(problem, inputs)
    abs_sum = reference_abs_sum(problem, [inputs])
    fields = compare(problem, result, ref, abs_sum)
    ran = mapping or flat_mapping(problem)
    status, reason = verdict(problem, ran, fields, coverage, None)
    notes: list[str] = []
    # the halo executor multiplies exact products (`_halo_unfit` sends lossy fidelities to the loop nest)
    status, reason = format_verdict(
        problem, ran, (originals, inputs), result, fields, abs_sum, True, (status, reason), notes
    )
    fields.pop("within")
    remote = f"{config.num_cores} cores, {config.total_remote_sticks()} remote sticks"
    return ValidationReport(
        passed=status == "passed",
        status=status,
        reason=f"{reason} (halo configuration: {remote})",
        method="halo",
        checked_fraction=1.0,
        validated_axes=dict(problem.axes),
        notes=(remote, *(f"coverage: {m}" for m in coverage), *notes),
        **fields,
    )


def validate_as_run(
    problem: Problem,
    mapping: Mapping,
    *,
    seed: int = 0,
    memory_cap_bytes: int = DEFAULT_CAP_BYTES,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> ValidationReport:
    """Validate `mapping` the way it runs (module docstring): an L1-sharded Tenstorrent conv through its
    halo configuration, anything else, or a sharded conv the halo path cannot judge, through its loop nest.

    A fallback is named in the report: its first note (and the end of its reason) says that the
    halo path was not used and why.
    """
    from costmodels.tenstorrent.halo_of import halo_config_of

    config, _ = halo_config_of(problem, mapping)
    if config is None:
        return validate(problem, mapping, seed=seed, memory_cap_bytes=memory_cap_bytes, max_steps=max_steps)
    why = _halo_unfit(problem, mapping, config, memory_cap_bytes)
    if why is None:
        return validate_sharded_conv(problem, config, seed=seed, memory_cap_bytes=memory_cap_bytes, mapping=mapping)
    report = validate(problem, mapping, seed=seed, memory_cap_bytes=memory_cap_bytes, max_steps=max_steps)
    note = f"halo path not used: {why}; validated through the loop nest ({report.method})"
    return report.model_copy(update={"reason": f"{report.reason}; {note}", "notes": (note, *report.notes)})


def _halo_unfit(problem: Problem, mapping: Mapping, config: HaloConfig, cap: int) -> str | None:
    """Why the halo executor cannot judge `mapping` (None when it can)."""
    fid = fidelity_mod.fidelity_of(mapping)
    if fid is not None and fid != "HiFi4":
        return (
            f"math fidelity {fid}: the halo executor multiplies exact products, the loop-nest executor "
            "emulates the fidelity's phases"
        )
    if fid is not None and fidelity_mod.unsupported(problem, mapping):
        return f"{fidelity_mod.unsupported(problem, mapping)}"
    if narrower_accumulator(problem, mapping.acc_dtype):
        return (
            f"the mapping accumulates in {mapping.acc_dtype}, the halo executor in the problem's "
            f"{problem.acc_dtype}; the loop-nest executor emulates the narrower accumulator"
        )
    need = halo_estimate_bytes(problem, config)
    if need > cap:
        return (
            f"the halo run needs about {_mib(need)} MiB, over the {_mib(cap)} MiB cap "
            "(the loop nest can run on a proxy)"
        )
    return None


def _mib(n: float) -> str:
    """Bytes as MiB: whole above 10 MiB, three significant digits below."""
    v = n / 2**20
    return f"{v:,.0f}" if v >= 10 else f"{v:.3g}"
