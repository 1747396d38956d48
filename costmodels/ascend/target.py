"""The Ascend target family (presets ``ascend-910b`` for A2/A3, ``ascend-a5``).

Binary problems run as TMATMUL on the AI (cube) cores (ascend/space.py, ascend/cost.py); unary reductions run
as TROWPROD / TROWSUM / TROWMAX / TROWMIN on the vector cores (ascend/vector.py). Both paths
price points with one set of numpy formulas, used by `cost` for one point and by
`score_codes` / `score_batch` for many. The per-problem work is prepared once and kept in a
`ProblemMemo` (ascend/scoring.py); `score_batch` encodes its value columns to choice codes
(`choice_codes.score_values`) and prices points with a value outside the space from tables
built over the values they hold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from costmodels.ascend import cost as cc
from costmodels.ascend.bounds import box, cube_structure_bound
from costmodels.ascend.energy import cube_operand_bytes, cube_stall_stack, vector_operand_bytes, vector_stall_stack
from costmodels.ascend.floors import FRONT_FLOORED, cube_structure_floors, cube_structure_front_floors
from costmodels.ascend.hardware import AscendHardware
from costmodels.ascend.mapping import cube_mapping, vector_mapping
from costmodels.ascend.render import render_mapping
from costmodels.ascend.scoring import Prepared
from costmodels.ascend.space import CUBE_PARAMS, CubeSetup
from costmodels.ascend.vector import VECTOR_PARAMS, VectorSetup, vector_peak_cycles
from costmodels.ascend.violations import cube_tile_rules, vector_tile_rules
from costmodels.ascend.warm import cube_warm_starts, vector_warm_starts
from costmodels.choice_codes import ScoreFn
from costmodels.family import OBJECTIVES, FamilyTarget, knobs_violation, point_of, rows
from costmodels.ir import Mapping, coverage_errors
from costmodels.presets import load_preset
from costmodels.protocol import BatchScore, Choice, CostReport, LowerBound, Violation
from workload.problem import Problem

#: Most warm starts offered: one per largest grid (at most 45 on a benchmark layer: ascend/warm.py) and the tile
#: variants after them.
WARM_STARTS = 64
#: floor tables of several objectives kept per problem (one per set of fixed names and objectives)
FRONT_FLOOR_TABLES = 4
#: the parameters whose choices cut a structure into cells (`structure_front_cells`), where it leaves them free: the
#: ones the floors are cheap over (one table of every structure's cells in 5-29 ms on the benchmark layers) and that
#: split a structure's least latency from its least value of another objective. The M and N tiles and the N tiles per
#: L1 tile always (`bench.two_objectives` on both presets, the four against the M and N tiles alone, separate runs on
#: 2026-11-27: latency + footprint 1.5-1.9x faster, latency + energy 1.0-1.3x; on llama7b-prefill attn.scores the
#: open cells hold 3% of the space's points instead of 13% against the exact latency + footprint front, counted once
#: by hand outside `bench/`); more by the objectives asked, `CELL_NAMES_OF`
CELL_NAMES = ("base_m", "base_n", "l1_n")
#: the cell parameters an objective adds: footprint double buffering (it doubles the buffers), energy the M tiles
#: per L1 tile (they set how often each operand is read from GM again, against the latency of the larger L1 tile:
#: on ResNet-50 layer1.0.conv1 with latency + energy the rounds priced 28,800 points instead of 162,360 on
#: ascend-910b and 38,340 instead of 324,720 on ascend-a5; with footprint or off-chip bytes either one costs more
#: cells than it saves points, `bench.two_objectives` runs by hand on 2026-11-27)
CELL_NAMES_OF = {"footprint": ("double_buffer",), "energy": ("l1_m",)}


def cell_names(objectives: tuple[str, ...]) -> frozenset[str]:
    """The parameters whose choices cut a structure into cells for these objectives (`CELL_NAMES`, `CELL_NAMES_OF`)."""
    return frozenset(CELL_NAMES).union(*(CELL_NAMES_OF.get(o, ()) for o in objectives))


class AscendTarget(FamilyTarget[Prepared]):
    """One Ascend preset behind the `Target` protocol."""

    family = "ascend"
    objectives = (*OBJECTIVES, "energy")
    keep = 4

    def __init__(self, name: str, hardware: AscendHardware) -> None:
        super().__init__(name, hardware)
        self.hardware: AscendHardware = hardware

    def _prepare(self, problem: Problem) -> Prepared:
        return Prepared(problem, self.hardware, self.name)

    def _score_codes(self, problem: Problem, prep: Prepared, codes: dict[str, np.ndarray]) -> BatchScore:
        return self._scores(prep.scores(codes, rows(codes)))

    def _score_values(self, problem: Problem, prep: Prepared) -> ScoreFn:
        general = prep.cube_values if problem.is_binary else prep.vector_values
        return lambda cols: self._scores(general(cols))

    # ---- problem level ----------------------------------------------------------------------
    def _cube(self, problem: Problem) -> CubeSetup:
        return self.prepared(problem).cube

    def _vector(self, problem: Problem) -> VectorSetup:
        return self.prepared(problem).vector

    def mapping(self, problem: Problem, point: dict[str, Choice]) -> Mapping:
        if problem.is_binary:
            return cube_mapping(self._cube(problem), self.name, point)
        return vector_mapping(self._vector(problem), self.name, point)

    def lower_bound(self, problem: Problem) -> LowerBound:
        """Peak cube (or vector) rate of the whole chip, and the aggregate HBM rate for min_bytes."""
        hw = self.hardware
        mem = problem.min_bytes / (hw.aic_cores * hw.hbm_bytes_per_cycle_per_core)
        if problem.is_binary:
            s = self._cube(problem)
            peak = hw.aic_cores * hw.fractal_m * s.k0 * hw.fractal_n / s.repeats
            comp = problem.macs / peak
            what = f"{peak:g} MAC/cycle on {hw.aic_cores} AI cores"
        else:
            comp = vector_peak_cycles(self._vector(problem))
            what = f"one {hw.vector_repeat_bytes} B repeat per cycle on {hw.aiv_cores} vector cores"
        reason = f"compute ({what}) bound" if comp >= mem else "HBM bound (minimum bytes at the aggregate rate)"
        return LowerBound(cycles=max(comp, mem), compute_cycles=comp, memory_cycles=mem, reason=reason)

    def structure_bound(self, problem: Problem, fixed_choices: dict[str, Choice]) -> float:
        """Seconds no feasible point with these fixed choices can beat (ascend/bounds.py; `StructureBounded`)."""
        prep = self.prepared(problem)
        if prep.reasons:
            return 0.0
        if problem.is_binary:
            return cube_structure_bound(prep, fixed_choices)
        box(prep, fixed_choices)  # the same errors for choices outside the space
        return self.lower_bound(problem).cycles / self.hardware.clock_hz

    def structure_floors(self, problem: Problem, names: tuple[str, ...]) -> np.ndarray:
        """Seconds at most each structure's `structure_bound`, every structure of `names` at once
        (ascend/floors.py; `mapper.bounds.StructureFloored`)."""
        prep = self.prepared(problem)
        if problem.is_binary and not prep.reasons:
            return cube_structure_floors(prep, names)
        shape = tuple(len(p.choices) for n in names for p in prep.space.params if p.name == n)
        floor = 0.0 if prep.reasons else self.lower_bound(problem).cycles / self.hardware.clock_hz
        return np.full(shape, floor)

    def structure_front_cells(
        self, problem: Problem, fixed_choices: dict[str, Choice], objectives: tuple[str, ...]
    ) -> np.ndarray | None:
        """The structure's cells, one per combination of the `cell_names` parameters of `objectives` it leaves free (the
        M and N instruction tiles and the N tiles per L1 tile; double buffering with footprint, the M tiles per L1 tile
        with energy; one cell when it fixes them all): a floor of
        each objective over the cell's points (ascend/floors.py, `cube_structure_front_floors`;
        `mapper.bounds.FrontCellBounded`), in the C order of those parameters' choices (the space's order).
        Read from the floors of every cell of every structure of the same fixed names, computed in one numpy
        pass on first use. None for row reductions and objectives not floored here.

        Raises:
            ValueError: a fixed choice names no parameter of the space, or a value it does not offer.
        """
        got = self._cell_table(problem, fixed_choices, objectives)
        if got is None:
            return None
        table, at, per = got
        return table[at * per : (at + 1) * per]

    def structure_front_cell_table(
        self, problem: Problem, names: tuple[str, ...], objectives: tuple[str, ...]
    ) -> np.ndarray | None:
        """`structure_front_cells` of every structure of `names` (in the space's order) at once: (structures x
        cells x objectives), the table those rows are read from (`mapper.bounds.FrontCellTable`). None for row
        reductions, objectives not floored here and names out of the space's order."""
        prep = self.prepared(problem)
        order = [p.name for p in prep.space.params]
        if not problem.is_binary or prep.reasons or not set(names) <= set(order):
            return None
        if list(names) != [n for n in order if n in names]:
            return None
        got = self._cell_table(
            problem, {p.name: p.choices[0] for p in prep.space.params if p.name in names}, objectives
        )
        if got is None:
            return None
        table, _, per = got
        return table.reshape(-1, per, len(objectives))

    def point_floors(
        self, problem: Problem, codes: dict[str, np.ndarray], objectives: tuple[str, ...]
    ) -> dict[str, np.ndarray] | None:
        """Each point's footprint, exactly where it is feasible (`mapper.bounds.PointFloored`): a few table fields that
        no core grid changes (`Prepared.footprint_grid`), one gather for any number of points. None for row
        reductions and without footprint among `objectives`."""
        prep = self.prepared(problem)
        if "footprint" not in objectives or not problem.is_binary or prep.reasons:
            return None
        grid = prep.footprint_grid
        at = np.ravel_multi_index(tuple(codes[n] for n in prep.names[: grid.ndim]), grid.shape)
        return {"footprint": np.take(grid.reshape(-1), at)}

    def point_floor_names(self, problem: Problem, objectives: tuple[str, ...]) -> tuple[str, ...] | None:
        """Every parameter but the core grid (`point_floors` reads the footprint grid over the others); None where it
        floors nothing (`mapper.bounds.PointFloored`)."""
        prep = self.prepared(problem)
        if "footprint" not in objectives or not problem.is_binary or prep.reasons:
            return None
        return tuple(prep.names[: prep.footprint_grid.ndim])

    def structure_cell_of_points(
        self,
        problem: Problem,
        fixed_choices: dict[str, Choice],
        codes: dict[str, np.ndarray],
        objectives: tuple[str, ...] = (),
    ) -> np.ndarray | None:
        """Each point's row in `structure_front_cells` (the structure's points as code columns;
        `mapper.bounds.CellOfPoints`): the C-order index of its choices of the free `cell_names` parameters of
        `objectives`."""
        prep = self.prepared(problem)
        if not problem.is_binary or prep.reasons:
            return None
        names = cell_names(objectives)
        free = [p for p in prep.space.params if p.name in names and p.name not in fixed_choices]
        if not free:
            return np.zeros(len(next(iter(codes.values()))), dtype=np.intp)
        cols = tuple(codes[p.name] for p in free)
        kept = prep.cells_of
        if kept is not None and len(kept[0]) == len(cols) and all(a is b for a, b in zip(kept[0], cols, strict=True)):
            return kept[1]  # the same (read-only) columns as the last structure's
        at = np.ravel_multi_index(cols, [len(p.choices) for p in free])
        if all(not c.flags.writeable for c in cols):  # columns a caller may not change under the kept answer
            prep.cells_of = (cols, at)
        return at

    def _cell_table(
        self, problem: Problem, fixed_choices: dict[str, Choice], objectives: tuple[str, ...]
    ) -> tuple[np.ndarray, int, int] | None:
        """(the floors of every cell of every structure of the fixed names, the structure's number, its cells)."""
        prep = self.prepared(problem)
        if not problem.is_binary or prep.reasons or not set(objectives) <= FRONT_FLOORED:
            return None
        lo, _ = box(prep, fixed_choices)
        params = [(d, p) for d, p in enumerate(prep.space.params) if p.name in fixed_choices]
        cells = cell_names(objectives)
        free = [p for p in prep.space.params if p.name in cells and p.name not in fixed_choices]
        names = tuple(p.name for _, p in params) + tuple(p.name for p in free)
        key = (names, tuple(objectives))
        table = prep.front_floors.get(key)
        if table is None:
            table = cube_structure_front_floors(prep, names, tuple(objectives))
            if len(prep.front_floors) >= FRONT_FLOOR_TABLES:
                prep.front_floors.pop(next(iter(prep.front_floors)))
            prep.front_floors[key] = table
        at = int(np.ravel_multi_index([lo[d] for d, _ in params], [len(p.choices) for _, p in params])) if params else 0
        return table, at, int(np.prod([len(p.choices) for p in free], dtype=np.int64))

    # ---- point level ------------------------------------------------------------------------
    @staticmethod
    def _columns(problem: Problem, mapping: Mapping) -> dict[str, np.ndarray] | None:
        point = point_of(mapping, CUBE_PARAMS if problem.is_binary else VECTOR_PARAMS)
        if point is None:
            return None
        return {n: np.asarray([v], dtype=object) for n, v in point.items()}

    def check(self, problem: Problem, mapping: Mapping) -> list[Violation]:
        out = self.supports(problem)
        out += [Violation(code="coverage", message=e.message) for e in coverage_errors(problem, mapping)]
        cols = self._columns(problem, mapping)
        if cols is None:
            return [*out, knobs_violation(mapping, CUBE_PARAMS if problem.is_binary else VECTOR_PARAMS)]
        if problem.is_binary:
            prep = self.prepared(problem)
            try:
                f, t = prep.cube_point(cols)
            except ValueError as e:  # a core grid that is not BxMxN, or a per-axis side of the wrong length
                return [*out, Violation(code="core-grid", message=str(e))]
            out += cc.cube_violations(prep.cube, prep.consts, f, t)
            out += cube_tile_rules(problem, self.hardware, mapping, prep.cube.k0)
        else:
            _, t, _ = self.prepared(problem).vector_terms(cols)
            if not bool(t["ub"][0] <= self.hardware.ub_bytes):
                dn = " and the DN tile as loaded (transposed by TTRANS)" if self._vector(problem).transposed else ""
                out.append(
                    Violation(
                        code="ub-capacity",
                        message=f"UB needs {float(t['ub'][0]) / 1024:g} KiB for the src, tmp and dst tiles{dn}, "
                        f"{self.hardware.ub_bytes / 1024:g} KiB available: reduce row_block or col_block",
                    )
                )
            out += vector_tile_rules(problem, self.hardware, mapping)
        return out

    def cost(self, problem: Problem, mapping: Mapping) -> CostReport:
        cols = self._columns(problem, mapping)
        if cols is None:
            raise ValueError("the mapping lacks this target's point parameters; build it with mapping()")
        hw = self.hardware
        lb = self.lower_bound(problem)
        if problem.is_binary:
            f, t = self.prepared(problem).cube_point(cols)
            pick = cc.cube_report_terms(f, t)
        else:
            _, t, _ = self.prepared(problem).vector_terms(cols)
            pick = {k: float(v[0]) for k, v in t.items() if getattr(v, "ndim", 0) == 1}
        cycles = pick["cycles"]
        if problem.is_binary:
            breakdown = {k: pick[k] for k in ("cube", "mte2", "mte1", "fix", "hbm")}
            bound = cc.cube_bound(pick)
            levels = {"hbm": pick["offchip"], "gm": pick["gm_bytes"], "l1": pick["gm_bytes"]}
            levels |= {"l0a": pick["l0a_bytes"], "l0b": pick["l0b_bytes"], "l0c": pick["l0c_bytes"]}
            ops = cube_operand_bytes(problem, f, pick, levels)
            steps = pick["blocks"] * float(np.asarray(f["nk"]).reshape(-1)[0])
            stack = cube_stall_stack(pick, steps, bool(np.asarray(f["db"]).reshape(-1)[0]))
            notes: tuple[str, ...] = (
                f"{int(pick['tiles'])} TMATMULs per core on {int(pick['cores_used'])} AI cores",
                "inputs L2-resident: MTE2 at the L2 rate" if self._cube(problem).l2_resident else "MTE2 at HBM rate",
                "FIX overlaps compute" if pick["fix_overlap"] else "FIX serialised (one accumulator set fills L0C)",
            )
            if pick["b_resident"]:
                notes += ("block loops B-resident: N blocks outermost, each B chunk stays in L1 across the M blocks",)
            peak_cycles = lb.compute_cycles
        else:
            breakdown = {k: pick[k] for k in ("vector", "mte2", "mte3", "hbm")}
            names = {"vector": "vector", "mte2": "dma", "mte3": "dma", "hbm": "dma"}
            bound = names[max(breakdown, key=lambda k: breakdown[k])]
            levels = {"hbm": pick["offchip"], "ub": pick["ub_in"] + pick["ub_out"]}
            ops = vector_operand_bytes(problem, pick)
            stack = vector_stall_stack(pick, bool(np.asarray(cols["double_buffer"]).reshape(-1)[0]))
            vs = self._vector(problem)
            notes = (f"{vs.instruction} on {int(pick['cores_used'])} vector cores",)
            if vs.transposed:
                notes += (
                    f"{pick['transpose']:,.0f} cycles of TTRANS: the input's contiguous axis "
                    f"{vs.contiguous_axis} is kept, and {vs.instruction} reduces the rows of an ND (row-major) "
                    "tile (pto-trowprod.txt, Tile layout of src), so each loaded tile is transposed first "
                    "[ASSUMPTION: priced as one vector pass over the tile; see costmodels/ascend/vector.py]",
                )
            peak_cycles = lb.compute_cycles
        energy = self.prepared(problem).energy
        return CostReport(
            cycles=cycles,
            clock_hz=hw.clock_hz,
            bound=bound,
            utilization=min(1.0, peak_cycles / cycles) if cycles > 0 else 0.0,
            bytes=levels,
            breakdown=breakdown,
            lower_bound_cycles=lb.cycles,
            offchip_bytes=pick["offchip"],
            footprint_bytes=pick["footprint"],
            notes=notes,
            energy_pj=float(energy.total(levels)),
            energy_breakdown={k: float(v) for k, v in energy.parts(levels).items()},
            operand_bytes=ops,
            operand_energy=energy.operand_energy(ops),
            stall_stack=stack,
        )

    def _scores(self, res: dict[str, np.ndarray]) -> BatchScore:
        return BatchScore(feasible=res["ok"], objectives={o: res[o] for o in self.objectives})

    def warm_starts(self, problem: Problem) -> list[dict[str, Choice]]:
        """Rules of thumb first (PTO's recommended base tiles lead for TMATMUL); the rest feasible-first,
        at most `WARM_STARTS` (ascend/warm.py: one per largest grid, then tile variants)."""
        space = self.space(problem)
        starts = cube_warm_starts(self._cube(problem), space) if problem.is_binary else vector_warm_starts(space)
        head, rest = (starts[:1], starts[1:]) if problem.is_binary else ([], starts)
        if rest:
            cols = {n: np.asarray([p[n] for p in rest], dtype=object) for n in space.names()}
            ok = self.score_batch(problem, cols).feasible
            rest = [p for p, f in zip(rest, ok, strict=True) if f] + [p for p, f in zip(rest, ok, strict=True) if not f]
        return (head + rest)[:WARM_STARTS]

    def render(self, problem: Problem, mapping: Mapping) -> str:
        return render_mapping(problem, self.hardware, self.name, mapping)


def make_target(preset: str, overrides: dict[str, Any]) -> AscendTarget:
    """Build an Ascend target from its preset file plus per-request overrides."""
    return AscendTarget(preset, load_preset(preset, AscendHardware, overrides))
