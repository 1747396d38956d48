"""AWS Trainium tensor engine target (family ``trainium``; presets ``trn1`` and ``trn2``).

One NKI ``nc_matmul`` per instruction tile: ``stationary.T @ moving`` from SBUF into a PSUM
bank, accumulated over contraction tiles (nki-nc_matmul.txt). The loop nest and its levels are
described in costmodels.trainium.mapping, the space in costmodels.trainium.space and the
formulas in costmodels.trainium.cost (the recipe of hardware-facts.md §2.2).

Scope decisions (documented and tested):

- integer inputs (i4/i8/i32) are rejected: nc_matmul takes float8/bfloat16/float16/tfloat32/
  float32 only (nki-nc_matmul.txt); the advice is to cast to bf16 (exact for i8) first;
- unary reductions and max/min/mul reductions are rejected: they run on the Vector Engine,
  which this model does not price;
- convolutions go through im2col (no NKI conv primitive; hardware-facts.md §2.2, §5).

Scoring: the first time a problem is scored, its whole space is priced as one grid
(costmodels.trainium.scoring, the same formulas as `check`/`cost`) and kept with the space's coder
for the last few problems (`ProblemMemo`). `score_codes` gathers the three objectives from the
grid by each point's number in it (costmodels.trainium.scoring); `score_batch` encodes the value
columns to codes first (`choice_codes.score_values`). Every point of the space is priced, so there
are no general formulas for other values: a value outside the space is a ``ValueError`` naming
its parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from costmodels.choice_codes import SpaceCoder, score_values
from costmodels.ir import Mapping, coverage_errors, flat_mapping
from costmodels.presets import load_preset
from costmodels.problem_memo import ProblemMemo
from costmodels.protocol import BatchScore, Choice, CostReport, LowerBound, Param, SearchSpace, Violation
from costmodels.trainium.cost import Evaluation, ProblemConsts, Quantities, evaluate, lower_bound_cycles
from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.mapping import build_mapping, mapping_quantities, structure_errors
from costmodels.trainium.nest import Roles
from costmodels.trainium.render import render_mapping
from costmodels.trainium.scoring import GridScorer, price_grid
from costmodels.trainium.space import build_space, problem_consts
from costmodels.trainium.violations import violation_messages
from costmodels.trainium.warm import warm_points
from workload import dtypes
from workload.problem import Problem

_NC_MATMUL_DTYPES = ("f8e4m3", "f8e5m2", "bf16", "f16", "f32")
_KEEP_GRIDS = 4  # priced grids kept per target (each <= 24 bytes per point of the space)
_UNSUPPORTED = SearchSpace(params=(Param(name="unsupported", choices=("-",), doc="the problem cannot run here"),))


@dataclass(frozen=True)
class Prepared:
    """What scoring a problem needs: the coder of its space and the scorer over its priced grid."""

    coder: SpaceCoder
    scorer: GridScorer | None  # None: the problem cannot run here (every point infeasible)


class TrainiumTarget:
    """One Trainium preset: the Target protocol over the nc_matmul cost model."""

    family = "trainium"
    objectives: tuple[str, ...] = ("latency", "offchip_bytes", "footprint")

    def __init__(self, name: str, hardware: TrainiumHardware) -> None:
        self.name = name
        self.hardware = hardware
        self._prepared: ProblemMemo[Prepared] = ProblemMemo(self._prepare, size=_KEEP_GRIDS)

    # ---- problem level --------------------------------------------------------------------
    def supports(self, problem: Problem) -> list[Violation]:
        out: list[Violation] = []
        if not problem.is_binary:
            out.append(
                Violation(
                    code="unary",
                    message="a unary reduction has no second operand for the tensor engine; it runs on the Vector "
                    "Engine, which this model does not price: use a target with a vector model",
                )
            )
        if problem.reduce_op != "add":
            out.append(
                Violation(
                    code="reduce-op",
                    message=f"nc_matmul accumulates sums in PSUM; a {problem.reduce_op} reduction runs on the Vector "
                    "Engine, which this model does not price: use reduce op add",
                )
            )
        for op in problem.inputs:
            name = dtypes.canonical_dtype(op.dtype)
            if name not in _NC_MATMUL_DTYPES:
                out.append(
                    Violation(
                        code="dtype",
                        message=f"input {op.name} is {name}, but nc_matmul takes float8/bfloat16/float16/tfloat32/"
                        "float32 inputs only: cast it to bf16 (exact for i8) or f32",
                    )
                )
        return out

    def _consts(self, problem: Problem, roles: Roles) -> ProblemConsts:
        return problem_consts(self.hardware, problem, roles, supported=not self.supports(problem))

    def _double_row(self, problem: Problem) -> bool:
        fp8 = all(dtypes.canonical_dtype(o.dtype) in ("f8e4m3", "f8e5m2") for o in problem.inputs)
        return self.hardware.fp8_double_row and fp8

    # ---- space and mapping ----------------------------------------------------------------
    def space(self, problem: Problem) -> SearchSpace:
        if self.supports(problem):
            return _UNSUPPORTED
        return build_space(self.hardware, problem, self._double_row(problem))

    def mapping(self, problem: Problem, point: dict[str, Choice]) -> Mapping:
        if self.supports(problem):
            return flat_mapping(problem, target=self.name, level="nc_matmul")
        return build_mapping(problem, self.name, dict(point))

    # ---- check and cost -------------------------------------------------------------------
    def _evaluate(self, problem: Problem, mapping: Mapping) -> tuple[Roles, Quantities, Evaluation]:
        roles, q = mapping_quantities(problem, mapping)
        return roles, q, evaluate(self.hardware, self._consts(problem, roles), q)

    def check(self, problem: Problem, mapping: Mapping) -> list[Violation]:
        out = self.supports(problem)
        if out:
            return out
        structure = structure_errors(problem, mapping)
        if structure:
            return [Violation(code="structure", message=f"{e}: build the mapping with target.mapping(...)")
                    for e in structure]  # fmt: skip
        out += [
            Violation(code="coverage", message=f"{e.message}: every point must be visited exactly once")
            for e in coverage_errors(problem, mapping)
        ]
        roles, q, ev = self._evaluate(problem, mapping)
        out += violation_messages(self.hardware, self.name, problem, roles, q, ev, self._double_row(problem))
        return out

    def cost(self, problem: Problem, mapping: Mapping) -> CostReport:
        hw = self.hardware
        roles, _, ev = self._evaluate(problem, mapping)
        lb = self.lower_bound(problem)
        cycles = float(ev.cycles[0])
        stages = {"compute": float(ev.te[0]), "dma": float(ev.dma[0]), "evict": float(ev.evict[0]),
                  "fill": float(ev.fill[0])}  # fmt: skip
        c = self._consts(problem, roles)
        peak = hw.cores_per_chip * hw.peak_macs_per_cycle(fp32=c.fp32, double_row=c.double_row)
        notes = [
            f"{int(ev.n_inst[0])} nc_matmul per core at {ev.ii[0]:g} cycles each "
            "(nki-nc_matmul.txt, Estimated instruction cost)",
            "time = fill + max(tensor engine, steady DMA, PSUM eviction): double-buffered blocks (ASSUMPTION)",
        ]
        if any(len(problem.inputs[i].dims) and not all(d.is_plain() for d in problem.inputs[i].dims) for i in (0, 1)):
            notes.append("convolution priced as im2col GEMM (no NKI conv primitive; ASSUMPTION)")
        return CostReport(
            cycles=cycles,
            clock_hz=hw.te_clock_hz,
            bound=max(stages, key=lambda k: stages[k]),
            utilization=min(1.0, problem.macs / (peak * cycles)) if cycles > 0 else 0.0,
            bytes={"hbm": float(ev.hbm_chip[0]), "sbuf": float(ev.sbuf_bytes[0]), "psum": float(ev.psum_bytes[0])},
            breakdown=stages,
            lower_bound_cycles=lb.cycles,
            offchip_bytes=float(ev.hbm_chip[0]),
            footprint_bytes=float(ev.footprint[0]),
            notes=tuple(notes),
        )

    def lower_bound(self, problem: Problem) -> LowerBound:
        names = [dtypes.canonical_dtype(o.dtype) for o in problem.inputs]
        c = ProblemConsts(0, 0, 0, "f32" in names, self._double_row(problem), 0, 0, float(problem.macs), True)
        comp, mem = lower_bound_cycles(self.hardware, c, problem.min_bytes)
        why = "compute" if comp >= mem else "HBM bandwidth"
        return LowerBound(
            cycles=max(comp, mem),
            compute_cycles=comp,
            memory_cycles=mem,
            reason=f"{why}: {self.hardware.cores_per_chip} cores x peak MAC/cycle, {self.hardware.hbm_bytes_per_s:g} "
            "B/s HBM on every operand read once",
        )

    def score_batch(self, problem: Problem, columns: dict[str, np.ndarray]) -> BatchScore:
        """Points by value: encoded to codes and gathered (a value outside the space: ``ValueError``)."""
        prep = self._prepared.get(problem)
        if prep.scorer is None:
            return BatchScore.infeasible(len(next(iter(columns.values()))) if columns else 1, self.objectives)
        return score_values(prep.coder, columns, prep.scorer)

    def score_codes(self, problem: Problem, codes: dict[str, np.ndarray]) -> BatchScore:
        """Points by choice index, gathered from the problem's priced grid (`trainium.scoring`)."""
        prep = self._prepared.get(problem)
        if prep.scorer is None:
            return BatchScore.infeasible(len(next(iter(codes.values()))) if codes else 1, self.objectives)
        return prep.scorer(codes)

    def _prepare(self, problem: Problem) -> Prepared:
        """The coder of a problem's space and (when the problem runs here) the whole space priced."""
        space = self.space(problem)
        if self.supports(problem):
            return Prepared(SpaceCoder(space), None)
        grid = price_grid(self.hardware, problem, space, lambda r: self._consts(problem, r))
        return Prepared(SpaceCoder(space), GridScorer(grid))

    # ---- guidance and display -------------------------------------------------------------
    def warm_starts(self, problem: Problem) -> list[dict[str, Choice]]:
        space = self.space(problem)
        if self.supports(problem):
            return [{p.name: p.choices[0] for p in space.params}]
        return warm_points(problem, space, self.score_batch)

    def render(self, problem: Problem, mapping: Mapping) -> str:
        return render_mapping(self.hardware, self.name, problem, mapping)


def make_target(preset: str, overrides: dict[str, Any]) -> TrainiumTarget:
    """Build a Trainium target from a preset name and per-request overrides."""
    return TrainiumTarget(preset, load_preset(preset, TrainiumHardware, overrides))
