"""Tenstorrent math fidelity: which mantissa bits of each operand the Tensix multipliers consume.

A mapping carries its fidelity in ``mapping.knobs["math_fidelity"]`` (the Tenstorrent target puts
it there). The executor emulates it where the sources pin the arithmetic down exactly:

- The Tensix matrix unit multiplies at most 5 bits of ``SrcA`` significand by 7 bits of ``SrcB``
  significand per fidelity phase (tt-isa-documentation, ``WormholeB0/TensixTile/TensixCoprocessor/
  MVMUL.md`` and ``ELWMUL.md``, summary; the project's hardware-facts.md §4.1, row "Fidelity per
  dtype").
- Which bits each phase uses is the functional model of ``ELWMUL.md`` (shared by ``MVMUL.md``),
  functions ``SrcAFidelityBits`` and ``SrcBFidelityBits``, on the float32 bit pattern of the value:
  ``SrcA``: even phases keep sign, exponent, the implicit 1 and the next four mantissa bits
  (mask ``0xfff80000``); odd phases the next five mantissa bits (``x - (x & 0xfff83fff)``).
  ``SrcB``: phases 0 and 1 keep sign, exponent, the implicit 1 and the next six mantissa bits
  (mask ``0xfffe0000``); phases 2 and 3 the next four (``x - (x & 0xfffe1fff)``).
- LoFi runs phase 0, HiFi2 phases 0-1, HiFi3 phases 0-2, HiFi4 phases 0-3 (hardware-facts.md §4.1,
  row "Math fidelity": LoFi = 1 phase ... HiFi4 = 4), and the phase order is SrcA MSBs x SrcB MSBs,
  SrcA LSBs x SrcB MSBs, SrcA MSBs x SrcB LSBs, SrcA LSBs x SrcB LSBs (tt-buda documentation,
  "Data Formats and Math Fidelity", section "Math Fidelity").
- A matmul unpacks its first operand (in0, the moving activations) to ``SrcB`` and its second
  (in1, the weights) to ``SrcA`` (tt-metal ``llk_unpack_AB_matmul_api.h``: "In0 -> srcB",
  "In1 -> srcA"; ``MVMUL.md``: ``Dst += SrcB @ SrcA``). The weight input of a problem is
  ``problem.weight`` (the second input by default), as in the cost models' GEMM view.

For bf16 operands the four phases together consume every significand bit (1+7 <= 1+4+5 for SrcA,
1+7 <= 1+6+4 for SrcB), so HiFi4 is the exact product. Each phase product is exact in float32
(at most 10 x 11 significand bits), and a sum of phases is bilinear, so the executor runs each
instruction tile as one float32 contraction per distinct operand-part pair, and the reference is
the exact (float64) sum of the same phase products.

What is not emulated, and why it does not matter here: the FPU flushes denormals to zero
(``MVMUL.md``; the validation inputs are normal numbers in [-2, 2]), and the order in which the
hardware adds phase products into ``Dst`` (the ISA calls its functional model "a rough guide" for
floating-point order and precision): the executor adds them in float32 within the instruction
tile, and the accumulation tolerance (`executor.tolerance`) covers that order.

Block-float operands (``bfloat8_b``, ``bfloat4_b``, `workload.blockfloat`) are emulated like bf16: a
datum has at most 7 significant bits (bfloat8_b; 3 for bfloat4_b) and tt-metal's own decoder
(``convert_bfp_to_u32`` in ``blockfloat_common.cpp``) renormalises it into a float with the leading 1
implicit, so the value is exact in the BF16 layout the source registers hold; the unpacker doing the same
renormalisation is an [ASSUMPTION] (SrcA/SrcB hold only sign-exponent-mantissa floats with an implicit
1, tt-isa ``SrcASrcB.md`` "Data types"), and the fidelity phases then take their bits like bf16's. It
agrees with hardware-facts.md §4.1, row "Fidelity per dtype" ("FP8/BFP4/BFP2 need only phase 0"): a
bfloat4_b significand (1+2 bits) fits phase 0 of both operands, so LoFi is exact on bfloat4_b x
bfloat4_b, and bfloat8_b (1+6 bits) fits SrcB's phase-0 part and SrcA's phases 0-1, so HiFi2 is exact
on bfloat8_b x bfloat8_b. `plan` finds such cases by checking that every phase left out multiplies an
all-zero part of one operand, and then reports the products as exact.

f32 operands are not emulated: they reach the multipliers as BF16 or TF32 depending on the unpacker
configuration (``MVMUL.md``, "Determine the data formats"), which a mapping does not record, so their
validation is reported as not checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costmodels.ir import Mapping
from workload.problem import Problem

#: Fidelity phases run by each fidelity (hardware-facts.md §4.1, row "Math fidelity").
PHASES: dict[str, int] = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}

#: Operand formats whose fidelity emulation is exact (lossless in SrcA/SrcB, tt-isa SrcASrcB.md "Data types";
#: the block floats through tt-metal's renormalising decoder, see the module docstring).
EMULATED_DTYPES: tuple[str, ...] = ("bf16", "bfloat8_b", "bfloat4_b")

_SRCA_HI, _SRCA_LO_REST = np.uint32(0xFFF80000), np.uint32(0xFFF83FFF)
_SRCB_HI, _SRCB_LO_REST = np.uint32(0xFFFE0000), np.uint32(0xFFFE1FFF)


def _masked(x: np.ndarray, mask: np.uint32) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32) & mask
    return bits.view(np.float32)


def srca_bits(x: np.ndarray, phase: int) -> np.ndarray:
    """``SrcAFidelityBits`` of tt-isa ELWMUL.md: the SrcA part multiplied in `phase` (float32)."""
    x = np.asarray(x, dtype=np.float32)
    if phase & 1 == 0:
        return _masked(x, _SRCA_HI)
    return (x - _masked(x, _SRCA_LO_REST)).astype(np.float32)


def srcb_bits(x: np.ndarray, phase: int) -> np.ndarray:
    """``SrcBFidelityBits`` of tt-isa ELWMUL.md: the SrcB part multiplied in `phase` (float32)."""
    x = np.asarray(x, dtype=np.float32)
    if phase & 2 == 0:
        return _masked(x, _SRCB_HI)
    return (x - _masked(x, _SRCB_LO_REST)).astype(np.float32)


def fidelity_of(mapping: Mapping) -> str | None:
    """The mapping's math fidelity knob, or None when it has none (targets without fidelity)."""
    value = mapping.knobs.get("math_fidelity")
    return None if value is None else str(value)


def srca_index(problem: Problem) -> int:
    """Index of the input unpacked to SrcA (the weight, in1); the other one goes to SrcB."""
    return problem.weight if problem.weight is not None else 1


def operand_sets(mapping: Mapping) -> int:
    """Contractions per instruction tile the emulation of the mapping's fidelity runs (see `plan`)."""
    return 2 if fidelity_of(mapping) == "HiFi3" else 1


@dataclass(frozen=True)
class Plan:
    """How a fidelity is run: the operand parts multiplied, as (inputs for one contraction) pairs."""

    fidelity: str
    pairs: tuple[tuple[np.ndarray, ...], ...]  # each: the inputs of one contraction; results are summed
    exact: bool  # the phases cover every significand bit: the products are the exact ones

    dtypes: tuple[str, ...] = ("bf16",)  # the operand formats, for the description

    def describe(self) -> str:
        formats = " x ".join(self.dtypes)
        if self.exact:
            return f"math fidelity {self.fidelity}: every {formats} significand bit multiplied (exact products)"
        return (
            f"math fidelity {self.fidelity} emulated on {formats} operands: {PHASES[self.fidelity]} phase(s) of "
            "5-bit SrcA x 7-bit SrcB significand products (tt-isa ELWMUL.md SrcAFidelityBits/SrcBFidelityBits); "
            "the reference is the exact sum of the same phase products"
        )


def unsupported(problem: Problem, mapping: Mapping) -> str | None:
    """Why the mapping's fidelity cannot be emulated (the reason validation is not checked), or None."""
    fid = fidelity_of(mapping)
    if fid is None:
        return None
    if fid not in PHASES:
        return f"math fidelity {fid!r} is unknown (LoFi, HiFi2, HiFi3, HiFi4) and not emulated"
    if not problem.is_binary or problem.reduce_op != "add":
        return f"{fid} not emulated: math fidelity is modelled for binary sums of products only"
    others = sorted({o.dtype for o in problem.inputs if o.dtype not in EMULATED_DTYPES})
    if others:
        return (
            f"{fid} not emulated on {', '.join(others)} operands: the Tensix source registers hold them as BF16 or "
            "TF32 depending on the unpacker configuration, which the mapping does not record"
        )
    return None


def plan(problem: Problem, mapping: Mapping, inputs: list[np.ndarray]) -> Plan | None:
    """The operand parts to multiply for the mapping's fidelity; None when it has no fidelity knob.

    Call `unsupported` first: this assumes an emulated fidelity and dtype.
    """
    fid = fidelity_of(mapping)
    if fid is None:
        return None
    formats = tuple(o.dtype for o in problem.inputs)
    phases = range(PHASES[fid])
    if len(phases) == 4:  # for bf16 the four phases consume every bit: a*b exactly
        return Plan(fid, (tuple(inputs),), exact=True, dtypes=formats)
    ia = srca_index(problem)
    ib = 1 - ia
    a = np.asarray(inputs[ia]).astype(np.float32)
    b = np.asarray(inputs[ib]).astype(np.float32)
    # group the phases by the SrcB part they use; within a group the SrcA parts add up exactly
    pairs: list[tuple[np.ndarray, ...]] = []
    for b_phase, a_phases in ((0, [p for p in phases if p in (0, 1)]), (2, [p for p in phases if p in (2, 3)])):
        if not a_phases:
            continue
        a_part = srca_bits(a, a_phases[0])
        for p in a_phases[1:]:
            a_part = (a_part + srca_bits(a, p)).astype(np.float32)
        b_part = srcb_bits(b, b_phase)
        pair: list[np.ndarray] = [np.empty(0)] * 2
        pair[ia], pair[ib] = a_part, b_part
        pairs.append(tuple(pair))
    if all(_vanishes(a, b, p) for p in range(len(phases), 4)):
        # every phase left out multiplies a part that is zero (bfloat4_b at LoFi, bfloat8_b at HiFi2): exact products
        return Plan(fid, (tuple(inputs),), exact=True, dtypes=formats)
    return Plan(fid, tuple(pairs), exact=False, dtypes=formats)


def _vanishes(a: np.ndarray, b: np.ndarray, phase: int) -> bool:
    """Is the product of `phase` zero for every operand pair (its SrcA part or its SrcB part is all zero)?"""
    return not np.any(srca_bits(a, phase)) or not np.any(srcb_bits(b, phase))
