"""Tenstorrent math fidelity: which fidelities the executor can check.

A mapping carries its fidelity in ``mapping.knobs["math_fidelity"]`` (the Tenstorrent target puts
it there). The Tensix multipliers consume at most 5 bits of SrcA and 7 bits of SrcB significand
per fidelity phase (tt-isa-documentation ``MVMUL.md``; hardware-facts.md §4.1, rows "Math
fidelity" and "Fidelity per dtype"); HiFi4 runs all four phases, which for bf16 operands
multiplies every significand bit: the exact product the executor computes. Every other fidelity,
and any fidelity on other operand formats, is not emulated: its validation is not checked.
"""

from __future__ import annotations

from costmodels.ir import Mapping
from workload.problem import Problem

#: Fidelity phases run by each fidelity (hardware-facts.md §4.1, row "Math fidelity").
PHASES: dict[str, int] = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}


def fidelity_of(mapping: Mapping) -> str | None:
    """The mapping's math fidelity knob, or None when it has none (targets without fidelity)."""
    value = mapping.knobs.get("math_fidelity")
    return None if value is None else str(value)


def unsupported(problem: Problem, mapping: Mapping) -> str | None:
    """Why the mapping's fidelity cannot be emulated (the reason validation is not checked), or None."""
    fid = fidelity_of(mapping)
    if fid is None:
        return None
    if fid not in PHASES:
        return f"math fidelity {fid!r} is unknown (LoFi, HiFi2, HiFi3, HiFi4) and not emulated"
    if fid != "HiFi4":
        return f"{fid} not emulated"
    others = sorted({o.dtype for o in problem.inputs if o.dtype != "bf16"})
    if others:
        return f"{fid} not emulated on {', '.join(others)} operands"
    return None
