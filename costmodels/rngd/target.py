"""The RNGD contraction engine target (family ``rngd``): protocol glue over the space, cost and render modules.

contraction-engine-rngd.txt is the reference; hardware-facts.md §1 gives the numbers and the cost
recipe. `check` and `cost` evaluate the same numpy formulas (`rngd.cost.evaluate`) on one point;
`score_codes` gathers the stage terms from tables over the space's choices (`rngd.scoring`) by the
points' choice codes, and `score_batch` encodes value columns into codes (`choice_codes`), sending
values outside the space to the per-point formulas. The space, its coder and the tables are
prepared once per problem (`ProblemMemo`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from costmodels.cancel import checkpoint
from costmodels.choice_codes import ScoreFn, SpaceCoder
from costmodels.dominance import ScreenedCells
from costmodels.energy import pricer
from costmodels.family import OBJECTIVES, FamilyTarget, knobs_violation, point_of
from costmodels.ir import Mapping, coverage_errors
from costmodels.presets import load_preset
from costmodels.protocol import BatchScore, Choice, CostReport, LowerBound, SearchSpace, Violation
from costmodels.rngd.bounds import TermBound
from costmodels.rngd.cost import bound_of, evaluate, lower_bound_cycles, utilization
from costmodels.rngd.energy import level_bytes, operand_bytes, stall_stack
from costmodels.rngd.factors import factors
from costmodels.rngd.front_bound import FrontCells
from costmodels.rngd.hardware import ENERGY_LEVELS, RngdHardware
from costmodels.rngd.mapping import POINT_KEYS, as_columns, build_mapping
from costmodels.rngd.render import render_mapping
from costmodels.rngd.scoring import Tables, build_tables, score_codes
from costmodels.rngd.space import build_space, roles_of
from costmodels.rngd.violations import supports_violations, violation_messages
from costmodels.rngd.warm import warm_points
from workload.problem import Problem

CHUNK = 1 << 17  # points per vectorised pass of the generic path (bounds memory: about 80 arrays per pass)


@dataclass(frozen=True)
class Prepared:
    """What a target keeps per problem: its space and coder, and the term tables (None: generic path).

    An unsupported problem keeps only the reasons (``space`` and ``coder`` None).
    """

    reasons: tuple[Violation, ...]
    space: SearchSpace | None = None
    coder: SpaceCoder | None = None
    tables: Tables | None = None
    bound: list[TermBound] = field(default_factory=list)  # built on the first `structure_bound` call
    cells: list[FrontCells] = field(default_factory=list)  # built on the first `structure_front_cells` call


class RngdTarget(FamilyTarget[Prepared]):
    """One RNGD preset (with overrides) implementing the `Target` protocol."""

    family = "rngd"
    objectives = (*OBJECTIVES, "energy")

    def __init__(self, name: str, hardware: RngdHardware) -> None:
        super().__init__(name, hardware)
        self.hw = hardware

    def _reasons(self, problem: Problem) -> tuple[Violation, ...]:
        return tuple(supports_violations(problem, self.hw))

    def _prepare(self, problem: Problem) -> Prepared:
        reasons = self._reasons(problem)
        if reasons:
            return Prepared(reasons)
        space = build_space(problem, self.hw)
        checkpoint()  # a search cancelled meanwhile stops here (`costmodels.cancel`), not after the tables
        coder = SpaceCoder(space)
        checkpoint()
        return Prepared(reasons, space, coder, build_tables(problem, self.hw, space))

    # ---- the space --------------------------------------------------------------------------
    def mapping(self, problem: Problem, point: dict[str, Choice]) -> Mapping:
        f = factors(problem, self.hw, as_columns(point))
        return build_mapping(problem, self.name, f, point, self.hw.packet_elements(roles_of(problem).in_dtype))

    # ---- feasibility and price ----------------------------------------------------------------
    def check(self, problem: Problem, mapping: Mapping) -> list[Violation]:
        out = self.supports(problem)
        if out:
            return out
        point = point_of(mapping, POINT_KEYS)
        if point is None:
            return [knobs_violation(mapping, POINT_KEYS)]
        try:
            res = evaluate(problem, self.hw, as_columns(point))
        except (KeyError, ValueError, TypeError) as e:
            return [Violation(code="alignment", message=f"the mapping's knobs do not describe an RNGD point ({e})")]
        out += violation_messages(problem, self.hw, point, res)
        out += self._alignment(problem, mapping, point)
        return out

    def _alignment(self, problem: Problem, mapping: Mapping, point: dict[str, Choice]) -> list[Violation]:
        """Computation mappings aligned (contraction-engine-rngd.txt, Constraints, Mapping alignment)."""
        errs = coverage_errors(problem, mapping)
        if errs:
            return [
                Violation(
                    code="alignment",
                    message="the computation mapping does not cover the problem exactly once "
                    f"({errs[0].message}), so the Reducer would combine misaligned packets: rebuild it from its knobs",
                )
            ]
        canon = self.mapping(problem, point)
        if canon.levels != mapping.levels or canon.fill != mapping.fill:
            return [
                Violation(
                    code="alignment",
                    message="the Stream Adapter's computation mapping (from the knobs) differs from the loop nest "
                    "given for the TRF Sequencer; both must match exactly: rebuild the mapping from its knobs",
                )
            ]
        if mapping.acc_dtype != problem.acc_dtype:
            return [
                Violation(
                    code="alignment",
                    message=f"accumulation in {mapping.acc_dtype}: the Reducer widens outputs automatically "
                    f"(i4/i8 -> i32, f8/bf16 -> f32), so this problem accumulates in {problem.acc_dtype}",
                )
            ]
        return []

    def _evaluate(self, problem: Problem, mapping: Mapping) -> dict[str, np.ndarray]:
        point = point_of(mapping, POINT_KEYS)
        if point is None:
            raise ValueError(knobs_violation(mapping, POINT_KEYS).message)
        return evaluate(problem, self.hw, as_columns(point))

    def cost(self, problem: Problem, mapping: Mapping) -> CostReport:
        res = self._evaluate(problem, mapping)
        point = point_of(mapping, POINT_KEYS)
        assert point is not None  # _evaluate raised otherwise
        cycles = float(res["cycles"][0])
        lb = self.lower_bound(problem)
        breakdown = {
            k: float(res[k][0])
            for k in ("compute", "stream", "vector", "tree", "drain_last", "fill", "dma", "reduction", "ce")
        }
        levels = {k: float(v[0]) for k, v in level_bytes(res).items()}
        energy = pricer(self.hw.energy, problem, ENERGY_LEVELS)
        ops = operand_bytes(problem, self.hw, as_columns(point), res)
        notes = (
            f"placement: {mapping.knobs.get('placement')}",
            "ASSUMPTION: TRF fill at 8 B/cycle (sub-context read_size), hardware-facts.md §1.2 step 3",
            "ASSUMPTION: output drain overlaps compute except the last accumulation group (§1.2 step 2)",
            "ASSUMPTION: one DMA startup exposed; HBM bounds the DMA rate (§1.2 step 4)",
            "stream at 32 B/cycle per slice fetch; the seed's 256 B/cycle is a DMN-interleaved DMA figure (§1.1)",
        )
        return CostReport(
            cycles=cycles,
            clock_hz=self.hw.clock_hz,
            bound=bound_of(res),
            utilization=float(utilization(problem, self.hw, res["cycles"])[0]),
            bytes=levels,
            breakdown=breakdown,
            lower_bound_cycles=lb.cycles,
            offchip_bytes=float(res["offchip"][0]),
            footprint_bytes=float(res["footprint"][0]),
            notes=notes,
            energy_pj=float(energy.total(levels)),
            energy_breakdown={k: float(v) for k, v in energy.parts(levels).items()},
            operand_bytes=ops,
            operand_energy=energy.operand_energy(ops),
            stall_stack=stall_stack(self.hw, res, bool(point["double_buffer"])),
        )

    def lower_bound(self, problem: Problem) -> LowerBound:
        compute, memory = lower_bound_cycles(problem, self.hw)
        reason = (
            f"{self.hw.slices} slices x {self.hw.rows} rows x {self.hw.packet_elements(roles_of(problem).in_dtype)} "
            f"MAC/cycle; HBM {self.hw.hbm_bytes_per_second / 1e12:g} TB/s for {problem.min_bytes:.0f} bytes"
        )
        return LowerBound(cycles=max(compute, memory), compute_cycles=compute, memory_cycles=memory, reason=reason)

    def structure_bound(self, problem: Problem, fixed_choices: dict[str, Choice]) -> float:
        """Seconds no feasible point of the structure can beat (`rngd.bounds`; `StructureBounded`).

        Without tables (the generic scoring path) or support, the whole problem's roofline.
        """
        prep = self.prepared(problem)
        if prep.space is None or prep.tables is None:
            return self.lower_bound(problem).cycles / self.hw.clock_hz
        if not prep.bound:
            prep.bound.append(TermBound(prep.space, prep.tables, self.hw))
        return prep.bound[0](fixed_choices)

    def _front_cells(self, problem: Problem) -> FrontCells | None:
        """The problem's cell bounds (`rngd.front_bound`), built on first use; None on the generic path."""
        prep = self.prepared(problem)
        if prep.space is None or prep.tables is None:
            return None
        if not prep.bound:
            prep.bound.append(TermBound(prep.space, prep.tables, self.hw))
        if not prep.cells:
            prep.cells.append(FrontCells(prep.bound[0]))
        return prep.cells[0]

    def structure_front_cells(
        self, problem: Problem, fixed_choices: dict[str, Choice], objectives: tuple[str, ...]
    ) -> np.ndarray | None:
        """Bound vectors of the structure's cells for several objectives (`rngd.front_bound`); None: no cells."""
        cells = self._front_cells(problem)
        return None if cells is None else cells(fixed_choices, objectives)

    def structure_front_cells_screened(
        self, problem: Problem, fixed_choices: dict[str, Choice], objectives: tuple[str, ...], front: np.ndarray | None
    ) -> ScreenedCells | None:
        """`structure_front_cells` with the stage-1 rows `front` dominates at their row vectors, and which rows are
        the cells' own (`rngd.front_bound.FrontCells.screened`; `mapper.bound_hooks.FrontCellScreened`)."""
        cells = self._front_cells(problem)
        got = None if cells is None else cells.screened(fixed_choices, objectives, front)
        return None if got is None else ScreenedCells(*got)

    def structure_front_dominated(
        self, problem: Problem, fixed_choices: dict[str, Choice], objectives: tuple[str, ...], front: np.ndarray
    ) -> bool:
        """True when `front` dominates every row vector of the structure, so every cell
        (`rngd.front_bound.FrontCells.dominated`; `mapper.bounds.FrontCellScreened`)."""
        cells = self._front_cells(problem)
        return cells is not None and cells.dominated(fixed_choices, objectives, front)

    def structure_cell_of_points(
        self,
        problem: Problem,
        fixed_choices: dict[str, Choice],
        codes: dict[str, np.ndarray],
        objectives: tuple[str, ...] = (),
    ) -> np.ndarray | None:
        """Each point's cell in `structure_front_cells` (the structure's points as code columns)."""
        cells = self._front_cells(problem)
        return None if cells is None else cells.cell_of_points(fixed_choices, codes)

    def _score_values(self, problem: Problem, prep: Prepared) -> ScoreFn:
        return lambda cols: self._general(problem, cols)

    def _score_codes(self, problem: Problem, prep: Prepared, codes: dict[str, np.ndarray]) -> BatchScore:
        """Points of the space by their codes: gathered from the tables, or decoded for the generic path."""
        if prep.tables is None:
            assert prep.coder is not None
            return self._general(problem, prep.coder.decode(codes))
        n = len(codes["double_buffer"])
        res = score_codes(self.hw, prep.tables, codes, n)
        return BatchScore(feasible=res.pop("feasible"), objectives=res)

    def _general(self, problem: Problem, columns: dict[str, np.ndarray]) -> BatchScore:
        """The per-point formulas (`rngd.cost.evaluate`) in chunks: any values, inside the space or not."""
        n = len(next(iter(columns.values())))
        if n == 0:
            return BatchScore.infeasible(0, self.objectives)
        parts = [
            evaluate(problem, self.hw, {k: np.asarray(v)[i : i + CHUNK] for k, v in columns.items()})
            for i in range(0, n, CHUNK)
        ]
        keys = ("feasible", "cycles", "offchip", "footprint", "dm_chip", "trf_chip")
        res = {k: np.concatenate([p[k] for p in parts]) for k in keys}
        ok = res["feasible"]
        lat = res["cycles"] / self.hw.clock_hz
        energy = pricer(self.hw.energy, problem, ENERGY_LEVELS).column(level_bytes(res), ~ok)
        return BatchScore(
            feasible=ok,
            objectives={
                "latency": np.where(ok, lat, np.inf),
                "offchip_bytes": np.where(ok, res["offchip"], np.inf),
                "footprint": np.where(ok, res["footprint"], np.inf),
                "energy": energy,
            },
        )

    def warm_starts(self, problem: Problem) -> list[dict[str, Choice]]:
        prep = self.prepared(problem)
        if prep.space is None:
            return []
        return warm_points(
            problem, self.hw, prep.space, self.score_batch, lambda fixed: self.structure_bound(problem, fixed)
        )

    def render(self, problem: Problem, mapping: Mapping) -> str:
        return render_mapping(problem, mapping)


def make_target(preset: str, overrides: dict[str, Any]) -> RngdTarget:
    """Build the target of an RNGD preset with per-request overrides (e.g. ``{"slices_per_cluster": 64}``)."""
    return RngdTarget(preset, load_preset(preset, RngdHardware, overrides))
