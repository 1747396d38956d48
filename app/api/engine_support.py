"""What the engine routes share: target lookup, problem building and describing, point and mapping checks.

Everything here is a thin adapter over the engine's public entry points (`costmodels.registry`,
`costmodels.presets`, `costmodels.protocol`, `costmodels.ir`, `workload`, `executor`). Whatever a
client can get wrong becomes a 404/422 problem detail naming the field; nothing a client sends
reaches the engine unchecked where the engine would fail with a 500 or run without bound.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any, TypeVar

from app.api.errors import NotFound, Unprocessable
from app.api.schemas_engine import (
    AxisInfo,
    BoundOut,
    CanonicalForm,
    Limits,
    OperandInfo,
    Support,
    Supported,
    TargetBound,
)
from app.settings import Settings
from costmodels.ir import Mapping, coverage_errors
from costmodels.presets import preset_family
from costmodels.protocol import Target
from costmodels.registry import get_target, target_names
from executor.validate import DEFAULT_CAP_BYTES
from workload import dtypes
from workload.canonical import canonical_form
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.problem import MAX_COEFF, Operand, Problem
from workload.spec import Conv2dSpec, EinsumSpec

log = logging.getLogger("tensormapper.api")

T = TypeVar("T")

#: Dtypes probed for `Supported` (every dtype of the README, in its order).
PROBE_DTYPES: tuple[str, ...] = ("i4", "i8", "i32", "f8e4m3", "f8e5m2", "bf16", "f16", "f32", "bfloat8_b", "bfloat4_b")
REDUCE_OPS: tuple[str, ...] = ("add", "mul", "max", "min")

#: Bounds on a client's mapping before any engine code walks it (`mapping_errors`).
MAX_LEVELS = 16
MAX_LOOPS = 64
MAX_LOOPS_PER_AXIS = 24
#: The loops of an axis may visit at most this many times its size (the rest is padding) ...
MAX_PADDING_FACTOR = 4
#: ... and at most this many points in all (each visit is an int64 in the coverage check).
MAX_AXIS_VISITS = 1 << 25


# ---- targets -----------------------------------------------------------------------------------


def known_targets() -> list[str]:
    return target_names()


def require_target(name: str, *, in_body: bool) -> str:
    """`name` if it is a known preset; else 404 (a path) or 422 naming the field (a body)."""
    known = known_targets()
    if name in known:
        return name
    detail = f"unknown target {name!r}: known targets are {', '.join(known)}"
    if in_body:
        raise Unprocessable(detail, field="target", hint=f"use one of {', '.join(known)}", known=known)
    raise NotFound(detail, known=known)


def make_target(name: str, overrides: dict[str, Any] | None = None) -> Target:
    """The target of a known preset with `overrides` (a bad override raises `ProblemError`: a 422)."""
    require_target(name, in_body=True)
    return get_target(name, overrides or {})


@cache
def preset_target(name: str) -> Target:
    """The preset's target without overrides, kept: its per-problem caches serve later requests."""
    return get_target(name)


def _probe(dtype: str, reduce_op: str = "add", unary: bool = False) -> Problem:
    if unary:
        return einsum("ij->i", {"i": 64, "j": 256}, dtype=dtype, reduce_op=reduce_op)
    return einsum("mk,kn->mn", {"m": 128, "k": 128, "n": 128}, dtype=dtype, weight=1, reduce_op=reduce_op)


def _accepts(target: Target, problem: Problem) -> bool:
    try:
        return not target.supports(problem)
    except Exception:  # a probe the model cannot even judge is not supported
        log.exception("supports() of %s raised on a probe problem", target.name)
        return False


@cache
def supported(name: str) -> Supported:
    """Which dtypes and reduce ops the preset's `supports()` accepts (probed once per preset)."""
    t = preset_target(name)
    return Supported(
        contraction=Support(
            dtypes=[d for d in PROBE_DTYPES if _accepts(t, _probe(d))],
            reduce_ops=[o for o in REDUCE_OPS if _accepts(t, _probe("bf16", o))],
        ),
        reduction=Support(
            dtypes=[d for d in PROBE_DTYPES if _accepts(t, _probe(d, unary=True))],
            reduce_ops=[o for o in REDUCE_OPS if _accepts(t, _probe("f32", o, unary=True))],
        ),
    )


def _clock_of(t: Target) -> float | None:
    """The clock the target's cost reports count cycles at: priced on the first feasible warm start of a probe."""
    for dtype in ("bf16", "f16", "f32", "i8"):
        p = _probe(dtype)
        try:
            if t.supports(p):
                continue
            for point in t.warm_starts(p):
                m = t.mapping(p, point)
                if not t.check(p, m):
                    return float(t.cost(p, m).clock_hz)
        except Exception:  # an override that breaks the probe: no clock, so no seconds
            log.info("no clock for %s", t.name, exc_info=True)
            return None
    return None


@lru_cache(maxsize=64)
def _clock(name: str, overrides_json: str) -> float | None:
    overrides = json.loads(overrides_json)
    t = preset_target(name) if not overrides else get_target(name, overrides)
    return _clock_of(t)


def clock_hz(name: str, overrides: dict[str, Any] | None = None) -> float | None:
    """Clock of a preset (with overrides), or None if no probe mapping is feasible."""
    return _clock(name, json.dumps(overrides or {}, sort_keys=True))


def target_bound(name: str, problem: Problem) -> TargetBound:
    """A preset's roofline bound of `problem`, or its supports() violations."""
    t = preset_target(name)
    violations = t.supports(problem)
    bound = None if violations else BoundOut.of(t.lower_bound(problem), clock_hz(name))
    return TargetBound(
        target=name, family=preset_family(name), supported=not violations, violations=violations, lower_bound=bound
    )


# ---- problems ----------------------------------------------------------------------------------


def limits_of(settings: Settings) -> Limits:
    return Limits(
        max_axis_size=settings.max_axis_size,
        max_axes=settings.max_axes,
        max_coefficient=MAX_COEFF,
        max_macs=settings.max_macs,
        validation_memory_cap_bytes=DEFAULT_CAP_BYTES,
    )


def to_problem(spec: EinsumSpec | Conv2dSpec, settings: Settings, *, priced: bool = False) -> Problem:
    """Build the problem of a request's spec within the service's limits.

    A `ProblemError` (the engine's own limits included) becomes a 422 naming the token; a problem over
    the service's limits (settings, at or below the engine's) a 422 naming the setting that raises it.
    `priced`: the request maps or runs the problem, so its MACs count against TM_MAX_MACS too (the
    cost models' spaces and checks grow with the problem; a roofline bound does not).
    """
    problem = spec.to_problem()
    if priced and problem.macs > settings.max_macs:
        raise Unprocessable(
            f"the problem's {problem.macs:.3g} MACs exceed this service's limit of {settings.max_macs:g}",
            field="problem",
            limit="tm_max_macs",
            hint="map a smaller instance (fewer or smaller axes), or raise the limit with TM_MAX_MACS",
        )
    if len(problem.axes) > settings.max_axes:
        raise Unprocessable(
            f"{len(problem.axes)} axes exceed this service's limit of {settings.max_axes}",
            field="problem",
            limit="tm_max_axes",
            hint="merge axes that are always used together, or raise the limit with TM_MAX_AXES",
        )
    for axis, size in problem.axes.items():
        if size > settings.max_axis_size:
            raise Unprocessable(
                f"axis {axis} size {size} exceeds this service's limit of {settings.max_axis_size}",
                field=f"problem.sizes.{axis}",
                limit="tm_max_axis_size",
                hint="split the axis into two, or raise the limit with TM_MAX_AXIS_SIZE",
            )
    return problem


def _index(op: Operand) -> str:
    return f"{op.name}[{', '.join(str(d) for d in op.dims)}]"


def einsum_spec(problem: Problem) -> EinsumSpec:
    """The problem in the structured einsum form: POSTing it back builds an equal problem."""
    lhs = ", ".join(_index(o) for o in problem.inputs)
    pad = {o.name: [(lo, hi) for lo, hi in o.pads()] for o in problem.inputs if any(lo or hi for lo, hi in o.pads())}
    return EinsumSpec(
        expr=f"{lhs} -> {_index(problem.output)}",
        sizes=dict(problem.axes),
        dtype={o.name: o.dtype for o in problem.inputs},
        out_dtype=problem.output.dtype,
        reduce_op=problem.reduce_op,
        weight=problem.weight,
        pad=pad or None,
        label=problem.label,
    )


def axes_of(problem: Problem) -> list[AxisInfo]:
    free = set(problem.free_axes)
    return [AxisInfo(name=a, size=s, role="free" if a in free else "reduced") for a, s in problem.axes.items()]


def operands_of(problem: Problem) -> list[OperandInfo]:
    out = []
    for i, o in enumerate(problem.operands):
        role = "output" if i == len(problem.inputs) else ("weight" if i == problem.weight else "input")
        out.append(
            OperandInfo(
                name=o.name,
                role=role,
                index=_index(o),
                dtype=o.dtype,
                shape=list(problem.shape(o)),
                padded_shape=list(problem.padded_shape(o)),
                pad=[(lo, hi) for lo, hi in o.pads()],
                bytes=problem.operand_bytes(o),
            )
        )
    return out


def canonical_of(problem: Problem) -> CanonicalForm:
    return CanonicalForm.model_validate(canonical_form(problem))


# ---- points and mappings -----------------------------------------------------------------------


def mapping_errors(problem: Problem, mapping: Mapping) -> list[str]:
    """Why `mapping` is not a mapping of `problem` (empty when it covers the problem exactly once).

    Cheap bounds come first (level and loop counts, how far an axis's loops overshoot its size,
    the accumulator type), so that the coverage check never walks an unbounded loop nest.
    """
    loops = mapping.loops()
    if len(mapping.levels) > MAX_LEVELS:
        return [f"{len(mapping.levels)} levels exceed the limit of {MAX_LEVELS}"]
    if len(loops) > MAX_LOOPS:
        return [f"{len(loops)} loops exceed the limit of {MAX_LOOPS}"]
    errs: list[str] = []
    try:
        dtypes.canonical_dtype(mapping.acc_dtype)
    except ValueError as e:
        errs.append(f"acc_dtype {mapping.acc_dtype!r}: {e}")
    unknown = sorted({lp.axis for _, lp in loops if lp.axis not in problem.axes})
    if unknown:
        errs.append(f"loops over {', '.join(unknown)}, which the problem lacks (its axes: {', '.join(problem.axes)})")
    for axis, size in problem.axes.items():
        lps = mapping.axis_loops(axis)
        visits = math.prod(lp.factor for lp in lps)
        if len(lps) > MAX_LOOPS_PER_AXIS:
            errs.append(f"axis {axis} has {len(lps)} loops, over the limit of {MAX_LOOPS_PER_AXIS}")
        elif visits > max(MAX_PADDING_FACTOR * size, size + 64) or visits > MAX_AXIS_VISITS:
            errs.append(
                f"the loops over {axis} visit {visits} points for its size {size}: "
                f"their factors should multiply to about {size} (at most {MAX_PADDING_FACTOR}x, the rest is padding)"
            )
    if errs:
        return errs
    return [e.message for e in coverage_errors(problem, mapping)]


def require_mapping_of(problem: Problem, mapping: Mapping) -> None:
    """422 unless `mapping` visits every point of `problem` exactly once."""
    errs = mapping_errors(problem, mapping)
    if errs:
        raise Unprocessable(
            f"the mapping does not match the problem: {'; '.join(errs[:5])}"
            + (f" (and {len(errs) - 5} more)" if len(errs) > 5 else ""),
            field="mapping",
            hint="send a mapping of this problem (e.g. the `mapping` that evaluate returns for a point of its space)",
            errors=errs,
        )


def guarded(target: Target, verb: str, fn: Callable[[], T], *, what: str = "mapping") -> T:
    """Run a target method on a client's input; input the model cannot read is a 422, not a 500."""
    try:
        return fn()
    except (ProblemError, Unprocessable):
        raise
    except Exception as e:  # the IR (or the overrides) is the client's: a shape the model does not expect
        log.info("%s could not %s a client's %s", target.name, verb, what, exc_info=True)
        hints = {
            "mapping": f"send a mapping {target.name} produces (evaluate a point of its space; reuse its `mapping`)",
            "point": "send a point of the target's space, or check the overrides",
            "problem": "check the overrides (GET /v1/targets/{name} lists each field with its default)",
        }
        raise Unprocessable(
            f"target {target.name} cannot {verb} this {what} ({type(e).__name__}: {e})",
            field=what,
            hint=hints.get(what, "see the request schema at /docs"),
        ) from None
