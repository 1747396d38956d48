"""AWS Trainium tensor engine target (family ``trainium``; presets ``trn1`` and ``trn2``).

One NKI ``nc_matmul`` per instruction tile: ``stationary.T @ moving`` from SBUF into a PSUM
bank, accumulated over contraction tiles (nki-nc_matmul.txt). The loop nest and its levels are
described in costmodels.trainium.mapping, the space in costmodels.trainium.space and the
formulas in costmodels.trainium.cost (the recipe of hardware-facts.md §2.2).

Scope decisions (documented and tested):

- integer inputs (i4/i8/i32) are rejected: nc_matmul takes float8/bfloat16/float16/tfloat32/
  float32 only (nki-nc_matmul.txt); the advice is to cast to bf16 (exact for 8- and 4-bit integers) first;
- unary reductions and max/min/mul reductions are rejected: they run on the Vector Engine,
  which this model does not price;
- convolutions go through im2col (no NKI conv primitive; hardware-facts.md §2.2, §5).

Scoring: the first time a problem is scored, its whole space is priced as one grid
(costmodels.trainium.scoring, the same formulas as `check`/`cost`) and kept with the space's coder
for the last few problems (`ProblemMemo`), when it has at most `subgrid.GRID_LIMIT` points; a
larger space (every tile count is offered: up to ~5e10 points) is priced by the sub-grids the
search asks for (`subgrid.SubgridScorer`, the same grid code on the product of the asked choices).
Search: the target names its structures (`structural_params`: the stationary input and the three
tiles) and bounds all of them at once (`structure_bounds`, `bounds.tile_bounds`), which best-first
branch and bound uses to prove the optimum over the whole space. `score_codes` gathers the three objectives from the
grid by each point's number in it (costmodels.trainium.scoring); `score_batch` encodes the value
columns to codes first (`choice_codes.score_values`). Every point of the space is priced, so there
are no general formulas for other values: a value outside the space is a ``ValueError`` naming
its parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from costmodels.choice_codes import SpaceCoder
from costmodels.energy import pricer
from costmodels.family import OBJECTIVES, FamilyTarget, knobs_violation, point_of
from costmodels.ir import Mapping, coverage_errors, flat_mapping
from costmodels.presets import load_preset
from costmodels.problem_memo import ProblemMemo
from costmodels.protocol import BatchScore, Choice, CostReport, LowerBound, Param, SearchSpace, Violation
from costmodels.trainium.bounds import TILE_PARAMS, EngineBound, footprint_floors, tile_bounds
from costmodels.trainium.cost import Evaluation, ProblemConsts, Quantities, evaluate, lower_bound_cycles
from costmodels.trainium.energy import operand_bytes, stall_stack
from costmodels.trainium.front_cells import CellMemo, cell_blocks, cell_of_points, structure_cells
from costmodels.trainium.hardware import ENERGY_LEVELS, TrainiumHardware
from costmodels.trainium.mapping import KNOBS, build_mapping, mapping_quantities, structure_errors
from costmodels.trainium.nest import Roles
from costmodels.trainium.render import render_mapping
from costmodels.trainium.repeats import repeated_structures
from costmodels.trainium.scoring import GridScorer, price_grid
from costmodels.trainium.space import EVERY, LADDER, build_space, double_row, problem_consts
from costmodels.trainium.subgrid import GRID_LIMIT, SubgridScorer
from costmodels.trainium.violations import NC_MATMUL_DTYPES, RULES, violation_messages
from costmodels.trainium.warm import warm_points
from workload import dtypes
from workload.problem import Problem

UNSUPPORTED = SearchSpace(params=(Param(name="unsupported", choices=("-",), doc="the problem cannot run here"),))


@dataclass(frozen=True)
class Prepared:
    """What scoring a problem needs: its space, the space's coder and the scorer over its priced grid."""

    reasons: tuple[Violation, ...]
    space: SearchSpace
    coder: SpaceCoder
    scorer: GridScorer | SubgridScorer | None  # None: the problem cannot run here (every point infeasible)
    floor: np.ndarray | None = None  # the priced grid's ``fill + max(te, dma)`` cycles (trainium/bounds.py)
    cells: CellMemo = field(default_factory=CellMemo)  # several objectives' cells of groups of structures
    repeats: list[np.ndarray] = field(default_factory=list)  # the structures that repeat another (flat), once asked


class TrainiumTarget(FamilyTarget[Prepared]):
    """One Trainium preset: the Target protocol over the nc_matmul cost model."""

    family = "trainium"
    objectives = (*OBJECTIVES, "energy")
    keep = 4  # priced grids kept per target (each <= 24 bytes per point of the space)

    def __init__(self, name: str, hardware: TrainiumHardware) -> None:
        super().__init__(name, hardware)
        self.hardware: TrainiumHardware = hardware
        #: the tiles `build_space` offers: `space.EVERY`, every tile count (rule T1, the default), or
        #: `space.LADDER`, the smaller space offered before, from the ``tile_space`` override
        self.tiles: str = EVERY if hardware.tile_space == "every" else LADDER
        self._bounds: ProblemMemo[EngineBound | None] = ProblemMemo(self._engine_bound, size=self.keep)
        self._tile_bounds: ProblemMemo[np.ndarray | None] = ProblemMemo(self._tile_bound_cycles, size=self.keep)

    def _reasons(self, problem: Problem) -> tuple[Violation, ...]:
        return tuple(RULES.violations(problem, NC_MATMUL_DTYPES))

    def _prepare(self, problem: Problem) -> Prepared:
        """The space and its coder and (when the problem runs here) the whole space priced."""
        reasons = self._reasons(problem)
        if reasons:
            return Prepared(reasons, UNSUPPORTED, SpaceCoder(UNSUPPORTED), None)
        space = build_space(problem, self.hardware, tiles=self.tiles)
        consts = self._run_consts(problem)
        if space.size > GRID_LIMIT:  # priced by the sub-grids a search asks for (costmodels.trainium.subgrid)
            return Prepared(reasons, space, SpaceCoder(space), SubgridScorer(problem, self.hardware, space, consts))
        grid = price_grid(problem, self.hardware, space, consts)
        return Prepared(reasons, space, SpaceCoder(space), GridScorer(grid), grid.floor)

    def _run_consts(self, problem: Problem) -> Callable[[Roles], ProblemConsts]:
        return lambda r: problem_consts(problem, self.hardware, r, supported=True)

    def _score_codes(self, problem: Problem, prep: Prepared, codes: dict[str, np.ndarray]) -> BatchScore:
        """Points by choice index, gathered from the problem's priced grid (`trainium.scoring`)."""
        assert prep.scorer is not None
        return prep.scorer(codes)

    def _engine_bound(self, problem: Problem) -> EngineBound | None:
        prep = self.prepared(problem)
        if prep.reasons or prep.floor is None:
            return None
        return EngineBound(space=prep.space, floor=prep.floor, clock_hz=self.hardware.te_clock_hz)

    def _tile_bound_cycles(self, problem: Problem) -> np.ndarray | None:
        prep = self.prepared(problem)
        if prep.reasons:
            return None
        return tile_bounds(problem, self.hardware, prep.space, self._run_consts(problem))

    def structural_params(self, problem: Problem) -> tuple[str, ...]:
        """The structures of best-first search: the stationary input and the three tiles (`StructureBulkBounded`)."""
        return TILE_PARAMS

    def structure_bounds(self, problem: Problem, names: tuple[str, ...]) -> np.ndarray:
        """Seconds no feasible point beats, for every combination of the `names` choices (C order; `tile_bounds`).

        Parameters outside `TILE_PARAMS` are not used by the bound: it is the same along them.

        Raises:
            ValueError: a name that is not a parameter of the problem's space.
        """
        space = self.space(problem)
        choices = {p.name: p.choices for p in space.params}
        unknown = [n for n in names if n not in choices]
        if unknown:
            raise ValueError(f"no parameter {unknown[0]!r} in this space: its parameters are {sorted(choices)}")
        shape = tuple(len(choices[n]) for n in names)
        cycles = self._tile_bounds.get(problem)
        if cycles is None:
            return np.zeros(shape)
        drop = tuple(i for i, n in enumerate(TILE_PARAMS) if n not in names)
        kept = [n for n in TILE_PARAMS if n in names]
        reduced = cycles.min(axis=drop) if drop else cycles
        # kept axes in the order of `names`, size 1 along the other names, then broadcast
        moved = np.transpose(reduced, [kept.index(n) for n in names if n in kept])
        view = moved.reshape(tuple(len(choices[n]) if n in kept else 1 for n in names))
        return np.broadcast_to(view, shape) / self.hardware.te_clock_hz

    def structure_bound(self, problem: Problem, fixed_choices: dict[str, Choice]) -> float:
        """Seconds no feasible point with these fixed choices can beat (trainium/bounds.py; `StructureBounded`).

        The larger of `tile_bounds` (the fixed tiles' closed form) and, where the whole space is
        priced, `EngineBound` (read from the grid): both are admissible.
        """
        cycles = self._tile_bounds.get(problem)
        if cycles is None:
            return 0.0
        choices = {p.name: p.choices for p in self.space(problem).params}
        unknown = sorted(set(fixed_choices) - set(choices))
        if unknown:
            raise ValueError(f"no parameter {unknown[0]!r} in this space: its parameters are {sorted(choices)}")
        for name, value in fixed_choices.items():
            if value not in choices[name]:
                raise ValueError(f"{name}={value!r} is not a choice of this space: {choices[name]}")
        index: list[int | slice] = []
        for name in TILE_PARAMS:
            if name in fixed_choices:
                index.append(choices[name].index(fixed_choices[name]))
            else:
                index.append(slice(None))
        closed = float(np.min(cycles[tuple(index)])) / self.hardware.te_clock_hz
        grid = self._bounds.get(problem)
        return closed if grid is None else max(closed, grid(fixed_choices))

    def structure_front_cells(
        self, problem: Problem, fixed_choices: dict[str, Choice], objectives: tuple[str, ...]
    ) -> np.ndarray | None:
        """Bound vectors of the structure's cells, its core splits (`trainium.front_cells`); None: no cells."""
        prep = self.prepared(problem)
        if prep.reasons:
            return None
        consts = self._run_consts(problem)
        return structure_cells(problem, self.hardware, prep.space, consts, fixed_choices, objectives, prep.cells)

    def structure_objective_floors(self, problem: Problem, names: tuple[str, ...], objective: str) -> np.ndarray | None:
        """Footprint bytes no point of each tile structure holds fewer of (`bounds.footprint_floors`); None for
        other names or objectives (`mapper.bounds.StructureObjectiveFloors`)."""
        prep = self.prepared(problem)
        if prep.reasons or names != TILE_PARAMS or objective != "footprint":
            return None
        choices = {p.name: p.choices for p in prep.space.params}
        return footprint_floors(problem, self.hardware, choices, self._run_consts(problem))

    def structure_cell_of_points(
        self,
        problem: Problem,
        fixed_choices: dict[str, Choice],
        codes: dict[str, np.ndarray],
        objectives: tuple[str, ...] = (),
    ) -> np.ndarray | None:
        """Each point's cell in `structure_front_cells`: its own core split (`trainium.front_cells.cell_of_points`)."""
        prep = self.prepared(problem)
        if prep.reasons:
            return None
        return cell_of_points(problem, prep.space, fixed_choices, codes, prep.cells, objectives)

    def structure_front_cell_blocks(
        self,
        problem: Problem,
        names: tuple[str, ...],
        objectives: tuple[str, ...],
        front: np.ndarray | None = None,
        live: np.ndarray | None = None,
    ) -> Iterator[tuple[int, np.ndarray]] | None:
        """Every structure's cells, a run of structures at a time (`trainium.front_cells.cell_blocks`)."""
        prep = self.prepared(problem)
        if prep.reasons:
            return None
        consts = self._run_consts(problem)
        repeats = None if front is None else self.structure_repeats(problem, names)  # (kept for the problem)
        return cell_blocks(problem, self.hardware, prep.space, consts, names, objectives, front, live, repeats)

    def structure_repeats(self, problem: Problem, names: tuple[str, ...]) -> np.ndarray | None:
        """Which structures of `names` (`bounds.TILE_PARAMS` only, else None) repeat another point for point
        (`trainium.repeats.repeated_structures`, flat): `structure_front_cell_blocks` leaves them out given a front."""
        prep = self.prepared(problem)
        if prep.reasons or names != TILE_PARAMS:
            return None
        if not prep.repeats:  # (kept: every search of the problem asks)
            got = repeated_structures(problem, {p.name: p.choices for p in prep.space.params}).reshape(-1)
            got.flags.writeable = False
            prep.repeats.append(got)
        return prep.repeats[0]

    def _consts(self, problem: Problem, roles: Roles) -> ProblemConsts:
        return problem_consts(problem, self.hardware, roles, supported=not self.supports(problem))

    # ---- mapping ----------------------------------------------------------------------------
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
        if point_of(mapping, KNOBS) is None:
            return [knobs_violation(mapping, KNOBS)]
        structure = structure_errors(problem, mapping)
        if structure:
            return [Violation(code="structure", message=f"{e}: build the mapping with target.mapping(...)")
                    for e in structure]  # fmt: skip
        out += [
            Violation(code="coverage", message=f"{e.message}: every point must be visited exactly once")
            for e in coverage_errors(problem, mapping)
        ]
        roles, q, ev = self._evaluate(problem, mapping)
        out += violation_messages(problem, self.hardware, self.name, roles, q, ev, double_row(problem, self.hardware))
        return out

    def cost(self, problem: Problem, mapping: Mapping) -> CostReport:
        hw = self.hardware
        roles, q, ev = self._evaluate(problem, mapping)
        lb = self.lower_bound(problem)
        cycles = float(ev.cycles[0])
        stages = {"compute": float(ev.te[0]), "dma": float(ev.dma[0]), "evict": float(ev.evict[0]),
                  "fill": float(ev.fill[0])}  # fmt: skip
        c = self._consts(problem, roles)
        levels = {"hbm": float(ev.hbm_chip[0]), "sbuf": float(ev.sbuf_bytes[0]), "psum": float(ev.psum_bytes[0])}
        energy = pricer(hw.energy, problem, ENERGY_LEVELS)
        ops = operand_bytes(problem, roles, c, q, ev)
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
            bytes=levels,
            breakdown=stages,
            lower_bound_cycles=lb.cycles,
            offchip_bytes=float(ev.hbm_chip[0]),
            footprint_bytes=float(ev.footprint[0]),
            notes=tuple(notes),
            energy_pj=float(energy.total(levels)),
            energy_breakdown={k: float(v) for k, v in energy.parts(levels).items()},
            operand_bytes=ops,
            operand_energy=energy.operand_energy(ops),
            stall_stack=stall_stack(ev),
        )

    def lower_bound(self, problem: Problem) -> LowerBound:
        names = [dtypes.canonical_dtype(o.dtype) for o in problem.inputs]
        c = ProblemConsts(0, 0, 0, "f32" in names, double_row(problem, self.hardware), 0, 0, float(problem.macs), True)
        comp, mem = lower_bound_cycles(self.hardware, c, problem.min_bytes)
        why = "compute" if comp >= mem else "HBM bandwidth"
        return LowerBound(
            cycles=max(comp, mem),
            compute_cycles=comp,
            memory_cycles=mem,
            reason=f"{why}: {self.hardware.cores_per_chip} cores x peak MAC/cycle, {self.hardware.hbm_bytes_per_s:g} "
            "B/s HBM on every operand read once",
        )

    # ---- guidance and display -------------------------------------------------------------
    def warm_starts(self, problem: Problem) -> list[dict[str, Choice]]:
        space = self.space(problem)
        if self.supports(problem):
            return [{p.name: p.choices[0] for p in space.params}]
        return warm_points(problem, space, self.score_batch)

    def render(self, problem: Problem, mapping: Mapping) -> str:
        return render_mapping(problem, self.hardware, self.name, mapping)


def make_target(preset: str, overrides: dict[str, Any]) -> TrainiumTarget:
    """Build a Trainium target from a preset name and per-request overrides."""
    return TrainiumTarget(preset, load_preset(preset, TrainiumHardware, overrides))
