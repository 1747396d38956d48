"""Validate a mapping: run it tile by tile and compare with the exact reference evaluation.

`validate` never materialises a problem whose validation would exceed the memory cap: it then
validates a proxy (`executor.proxy.shrink`) that keeps the mapping's structure with fewer outer
iterations, and says so in the report.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from costmodels.ir import Mapping, coverage_errors, flat_mapping
from costmodels.tenstorrent.halo import HaloConfig
from executor import proxy as proxy_mod
from executor.halo_exec import run_sharded_conv
from executor.tiled import TiledResult, run_mapping
from executor.tolerance import Tolerance, derive
from workload.problem import Problem
from workload.reference import cast_output, evaluate, random_inputs


class ValidationTooLarge(RuntimeError):
    """No structure-keeping proxy of the mapping fits the memory cap: validation would not be bounded."""


#: The proxy is shrunk until its estimate is below this share of the cap.
PROXY_TARGET = 0.75

#: A proxy whose estimate still exceeds the cap by this factor is not run (the estimate is an upper bound).
HARD_LIMIT_FACTOR = 4

#: Default memory cap of a validation run.
DEFAULT_CAP_BYTES = 256 * 1024 * 1024


class ValidationReport(BaseModel):
    """Outcome of one validation run."""

    model_config = ConfigDict(frozen=True)
    passed: bool
    method: Literal["full", "proxy"]
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


def compare(problem: Problem, result: TiledResult, ref: np.ndarray, abs_sum: np.ndarray | None) -> dict[str, object]:
    """Element-wise comparison of a tiled result with the exact reference (`evaluate` output)."""
    tol, reason = derive(problem)
    expected = cast_output(problem, ref)
    y = result.values.astype(np.float64)
    r = ref.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(y - r)
        if tol.exact:
            ok = result.values.astype(np.int64) == expected.astype(np.int64)
        else:
            bound = tol.atol + tol.rtol * np.abs(r)
            if abs_sum is not None and tol.sum_rtol:
                bound = bound + tol.sum_rtol * abs_sum
            e = expected.astype(np.float64)
            ok = (err <= bound) | (y == e) | (np.isnan(y) & np.isnan(e))
        ok &= result.written
        rel = err / np.maximum(np.abs(r), np.finfo(np.float64).tiny)
    err = np.where(np.isnan(err), np.inf, err)
    rel = np.where(np.isnan(rel), np.inf, rel)
    bad = np.argwhere(~ok)
    return {
        "passed": bool(ok.all()),
        "elements_compared": int(ok.size),
        "max_abs_error": float(err.max()) if err.size else 0.0,
        "max_rel_error": float(rel.max()) if rel.size else 0.0,
        "failing_elements": int(bad.shape[0]),
        "tolerance": tol,
        "tolerance_reason": reason,
        "first_failing_index": tuple(int(i) for i in bad[0]) if bad.size else None,
    }


def _abs_sum(problem: Problem, inputs: list[np.ndarray]) -> np.ndarray | None:
    """``sum |terms|`` per output element (the scale of add-accumulation rounding)."""
    if problem.reduce_op != "add" or derive(problem)[0].exact:
        return None
    return evaluate(problem, [np.abs(x.astype(np.float64)) for x in inputs]).astype(np.float64)


def validate(
    problem: Problem, mapping: Mapping, *, seed: int = 0, memory_cap_bytes: int = DEFAULT_CAP_BYTES
) -> ValidationReport:
    """Run `mapping` tile by tile on seeded random inputs and compare it with the reference.

    Args:
        problem: the problem.
        mapping: any mapping of it, from any target (broken ones included).
        seed: seed of the random inputs.
        memory_cap_bytes: above this estimated peak, a structure-keeping proxy is validated.
    """
    notes = [f"coverage: {e.message}" for e in coverage_errors(problem, mapping)]
    method: Literal["full", "proxy"] = "full"
    run_problem, run_mapping_ = problem, mapping
    if proxy_mod.estimate_bytes(problem, mapping) > memory_cap_bytes:
        # aim below the cap: the estimate can miss temporaries of unusual nests by a few percent
        run_problem, run_mapping_, more = proxy_mod.shrink(problem, mapping, int(memory_cap_bytes * PROXY_TARGET))
        notes += more
        method = "proxy"
        need = proxy_mod.estimate_bytes(run_problem, run_mapping_)
        if need > HARD_LIMIT_FACTOR * memory_cap_bytes:
            raise ValidationTooLarge(
                f"even the smallest proxy of this mapping needs about "
                f"{need / 2**20:,.0f} MiB to validate, over "
                f"{HARD_LIMIT_FACTOR} x the {memory_cap_bytes / 2**20:,.0f} MiB cap: raise memory_cap_bytes "
                "or validate a smaller instance of the problem"
            )
    inputs = random_inputs(run_problem, np.random.default_rng(seed))
    result = run_mapping(run_problem, run_mapping_, inputs)
    ref = evaluate(run_problem, inputs)
    fields = compare(run_problem, result, ref, _abs_sum(run_problem, inputs))
    fraction = run_problem.points / problem.points
    return ValidationReport(
        method=method,
        checked_fraction=fraction,
        validated_axes=dict(run_problem.axes),
        notes=tuple(notes),
        **fields,
    )


def validate_sharded_conv(
    problem: Problem, config: HaloConfig, *, seed: int = 0, memory_cap_bytes: int = DEFAULT_CAP_BYTES
) -> ValidationReport:
    """Run a sharded convolution from its halo configuration and compare it with the reference.

    Raises:
        ValueError: the convolution is too large to validate within `memory_cap_bytes`.
    """
    flat = flat_mapping(problem)
    if proxy_mod.estimate_bytes(problem, flat) > memory_cap_bytes:
        raise ValueError("this convolution exceeds the validation memory cap; validate a smaller batch or image")
    inputs = random_inputs(problem, np.random.default_rng(seed))
    result = run_sharded_conv(problem, config, inputs)
    ref = evaluate(problem, inputs)
    fields = compare(problem, result, ref, _abs_sum(problem, inputs))
    return ValidationReport(
        method="full",
        checked_fraction=1.0,
        validated_axes=dict(problem.axes),
        notes=(f"{config.num_cores} cores, {config.total_remote_sticks()} remote sticks",),
        **fields,
    )
