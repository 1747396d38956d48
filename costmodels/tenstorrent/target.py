"""Tenstorrent Tensix targets (presets ``wormhole-n150``, ``blackhole-p150``).

A conv2d runs as ttnn runs it (tenstorrent-conv2d.md, hardware-facts.md §4.2): the output sticks
``N*Ho*Wo`` are sharded over the core grid (height, block or width sharding), a halo op gives each
core the padded input sticks its windows read (`costmodels.tenstorrent.halo`), and each core multiplies an
im2col activation block by its weights in 32x32 tiles at the chosen math fidelity. 1x1/stride-1
convs and other binary einsums are the matmul special case (no halo, no im2col). Unary
reductions are rejected.

The space is the legal one (issue #12; `costmodels.tenstorrent.space.build_space`): every core grid of
height, block and width sharding, splits that do not divide the rows or channels padded and priced
as padding, act_block_h and in0_block_w up to the L1 limit, less two proved dominance rules.

Each mapping also picks a memory placement: ``l1-sharded`` (operands resident in L1 shards, the
fast path when they fit) or ``dram-interleaved`` (blocks streamed from and to DRAM, so GEMMs and
convs of any size fit; `costmodels.tenstorrent.cost`).

Math fidelity changes numerics (LoFi multiplies only the top mantissa bits of bf16; the executor
emulates the phases for bf16 operands, `executor.fidelity`, and reports other cases as not
checked), so the fidelities searched are a preset setting, ``fidelities``: HiFi4 only by
default, as ttnn's conv default compute config (tenstorrent-conv2d.md, Compute Config). A request
may override it (e.g. ``{"fidelities": ["LoFi", "HiFi2", "HiFi4"]}``); the roofline bound then
uses the fastest fidelity allowed. Every cost report names the fidelity it priced.

Scoring many points: the whole space is priced once per problem as a table (`costmodels.tenstorrent.scoring`),
kept with the problem's GEMM view, space and coder in a `ProblemMemo`. `score_codes` gathers from
it by choice code; `score_batch` codes value columns first (`choice_codes.score_values`) and prices
values outside the space with the same formulas, point by point.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from costmodels.choice_codes import ScoreFn
from costmodels.family import OBJECTIVES, FamilyTarget, knobs_violation
from costmodels.ir import Mapping
from costmodels.presets import load_preset
from costmodels.problem_memo import ProblemMemo
from costmodels.protocol import BatchScore, Choice, CostReport, LowerBound, Violation
from costmodels.tenstorrent.bounds import TTStructureBound, structure_bound
from costmodels.tenstorrent.cost import PARAMS, Evaluation
from costmodels.tenstorrent.energy import level_bytes, operand_bytes, stall_stack
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.mapping import build_mapping, point_of
from costmodels.tenstorrent.render import render_mapping
from costmodels.tenstorrent.scoring import TTPrepared, score_general
from costmodels.tenstorrent.shape import TTShape
from costmodels.tenstorrent.space import evaluate_point
from costmodels.tenstorrent.violations import RULES, SUPPORTED_DTYPES, violations
from costmodels.tenstorrent.warm import warm_starts
from workload.problem import Problem


class TenstorrentTarget(FamilyTarget[TTPrepared]):
    """One Tenstorrent preset behind the `Target` protocol."""

    family = "tenstorrent"
    objectives = (*OBJECTIVES, "energy")

    def __init__(self, name: str, hardware: TensixHardware) -> None:
        super().__init__(name, hardware)
        self.hardware: TensixHardware = hardware
        self._bounds: ProblemMemo[TTStructureBound | None] = ProblemMemo(self._structure_bound, size=self.keep)

    def _prepare(self, problem: Problem) -> TTPrepared:
        """GEMM view, space, coder and priced table of a problem (each built on first use)."""
        return TTPrepared(problem, self.hardware, tuple(RULES.violations(problem, SUPPORTED_DTYPES)))

    def _score_codes(self, problem: Problem, prep: TTPrepared, codes: dict[str, np.ndarray]) -> BatchScore:
        return self._batch(prep.table.score(codes))

    def _score_values(self, problem: Problem, prep: TTPrepared) -> ScoreFn:
        return lambda cols: self._batch(score_general(prep.shape, self.hardware, cols, prep.energy))

    def _structure_bound(self, problem: Problem) -> TTStructureBound | None:
        prep = self.prepared(problem)
        return None if prep.reasons else structure_bound(prep.shape, self.hardware, prep.space)

    def structure_bound(self, problem: Problem, fixed_choices: dict[str, Choice]) -> float:
        """Seconds no feasible point with these fixed choices can beat (tenstorrent/bounds.py; `StructureBounded`)."""
        bound = self._bounds.get(problem)
        return 0.0 if bound is None else bound(fixed_choices)

    def _shape(self, problem: Problem) -> TTShape:
        return self.prepared(problem).shape

    def mapping(self, problem: Problem, point: dict[str, Choice]) -> Mapping:
        return build_mapping(problem, self._shape(problem), self.hardware, self.name, point)

    def _eval(self, problem: Problem, point: dict[str, Choice]) -> Evaluation:
        return evaluate_point(self._shape(problem), self.hardware, {k: point[k] for k in PARAMS})

    def check(self, problem: Problem, mapping: Mapping) -> list[Violation]:
        out = self.supports(problem)
        if out:
            return out
        point = point_of(mapping)
        if point is None:
            return [knobs_violation(mapping, PARAMS)]
        return violations(self._shape(problem), self.hardware, point, self._eval(problem, point))

    def lower_bound(self, problem: Problem) -> LowerBound:
        hw = self.hardware
        # every core at the fastest fidelity the policy allows (LoFi: 16 cycles per 32^3 tile product =
        # 2048 MAC/cycle; HiFi4: 64 cycles = 512), so the bound holds for every mapping check() accepts
        # (hardware-facts.md §4.1, FPU matmul and Math fidelity rows)
        fastest = min(hw.fidelities, key=lambda f: hw.tile_cycles[f])
        per_core = hw.tile_macs / hw.tile_cycles[fastest]
        compute = problem.macs / (hw.cores * per_core)
        memory = dram_floor_bytes(problem, hw) / hw.dram_bytes_per_cycle
        return LowerBound(
            cycles=max(compute, memory),
            compute_cycles=compute,
            memory_cycles=memory,
            reason=f"{hw.cores} cores x {per_core:.0f} MAC/cycle at {fastest} (fastest allowed fidelity); "
            f"{hw.dram_gb_per_s:g} GB/s DRAM for the minimum bytes"
            + (" not kept in L1 (input_in_l1 / output_in_l1)" if hw.input_in_l1 or hw.output_in_l1 else ""),
        )

    def cost(self, problem: Problem, mapping: Mapping) -> CostReport:
        point = point_of(mapping)
        if point is None:
            raise ValueError(knobs_violation(mapping, PARAMS).message)
        full = self._eval(problem, point).a
        a = {k: float(v[0]) for k, v in full.items()}
        hw = self.hardware
        lb = self.lower_bound(problem)
        stages = {
            "compute": a["t_comp"],
            "dram": a["t_dram"] + a["t_im2col"],
            "noc": a["t_reader"] + a["t_act"] + a["t_w"] + a["t_out"],
            "halo": a["t_halo"],
        }
        cycles = a["cycles"]
        util = problem.macs / (hw.cores * hw.peak_macs_per_cycle_core * cycles) if cycles > 0 else 0.0
        levels = {k: float(v) for k, v in level_bytes(a).items()}
        energy = self.prepared(problem).energy
        ops = operand_bytes(problem, full)
        fid = point["math_fidelity"]
        notes = [f"math fidelity {fid}" + ("" if fid == "HiFi4" else " (fewer mantissa bits than the HiFi4 default)")]
        notes.append(f"layout {point['layout']}: {int(a['cores'])} cores, {int(a['pm_t'])}x{int(a['pn_t'])} tiles each")
        if point["memory"] == "dram-interleaved":
            notes.append(
                f"dram-interleaved: {int(a['kblocks'])} K blocks of {int(a['abw_t'])} tiles, weights re-read "
                f"{int(a['nbh'])}x (once per output block along the rows)"
            )
        else:  # (a published sharded config's in0_block_w is not what K runs in here: say so)
            notes.append(
                f"l1-sharded: K in the layout's {int(a['kblocks'])} blocks of {int(a['abw_t'])} tiles (its channel "
                "shards and act_block_w_div; in0_block_w sets the K blocks of dram-interleaved only)"
            )
        if a["act_db_lost"]:
            notes.append(
                f"act double buffering requested but dropped: two {int(point['act_block_h'])}-row activation blocks "
                f"do not fit L1 beside the other buffers (a smaller act_block_h keeps it)"
            )
        if hw.input_in_l1 or hw.output_in_l1:
            notes.append(_placement_note(hw, a))
        return CostReport(
            cycles=cycles,
            clock_hz=hw.clock_hz,
            bound=max(stages, key=lambda k: stages[k]),
            utilization=min(1.0, util),
            bytes={"dram": a["dram_bytes"], "noc": a["noc_w_bytes"] + a["noc_act_bytes"], "l1": a["l1_bytes"],
                   "halo": a["halo_bytes"], "noc_weights": a["noc_w_bytes"], "noc_activations": a["noc_act_bytes"]},
            breakdown={**stages, "reader": a["t_reader"], "act_broadcast": a["t_act"], "weights": a["t_w"],
                       "writer": a["t_out"], "reshard": a["t_reshard"]},
            lower_bound_cycles=lb.cycles,
            offchip_bytes=a["dram_bytes"],
            footprint_bytes=a["footprint"],
            notes=tuple(notes),
            energy_pj=float(energy.total(levels)),
            energy_breakdown={k: float(v) for k, v in energy.parts(levels).items()},
            operand_bytes=ops,
            operand_energy=energy.operand_energy(ops),
            stall_stack=stall_stack(full),
        )  # fmt: skip

    def _batch(self, outs: tuple[np.ndarray, ...]) -> BatchScore:
        feas, lat, off, foot, pj = outs
        objectives = {"latency": lat, "offchip_bytes": off, "footprint": foot, "energy": pj}
        return BatchScore(feasible=feas, objectives=objectives)

    def warm_starts(self, problem: Problem) -> list[dict[str, Choice]]:
        prep = self.prepared(problem)
        if prep.reasons:
            return []
        return warm_starts(prep.shape, self.hardware, prep.space)

    def render(self, problem: Problem, mapping: Mapping) -> str:
        return render_mapping(self.name, mapping)


def dram_floor_bytes(problem: Problem, hw: TensixHardware) -> float:
    """Bytes every mapping moves through DRAM: each tensor once, less those the placement may keep in L1.

    A tensor asked to stay in L1 (``input_in_l1``: the activation, every input but the weight;
    ``output_in_l1``: the output) may cost no DRAM byte when it fits (`cost._placement`), so it is
    left out of the floor; the weight is always read from DRAM at least once. Without this the
    roofline counted bytes that stay in L1 and was above the optimum of such a layer (a 4x4/s4
    patchify kept in L1 on wormhole-n150: roofline 4.608 us, optimum 2.512 us).
    """
    kept = 0.0
    if hw.input_in_l1:
        kept += sum(b for i, b in enumerate(problem.input_bytes) if i != problem.weight)
    if hw.output_in_l1:
        kept += problem.output_bytes
    return max(0.0, problem.min_bytes - kept)


def _placement_note(hw: TensixHardware, a: dict[str, float]) -> str:
    """Where this layer's input came from and its output went (network placement options, issue #13)."""
    parts = []
    if hw.input_in_l1:
        src = f"L1 ({hw.input_layout or 'the mapping layout'})"
        kept = "kept" if a["in_kept"] else "spilled to DRAM (does not fit L1 with the live tensors)"
        parts.append(f"input from {src}: {kept}")
        if a["t_reshard"] > 0:
            parts.append(f"resharded over the NoC: {a['reshard_bytes']:.0f} B, {a['t_reshard']:.0f} cycles")
    if hw.output_in_l1:
        parts.append("output kept in L1" if a["out_kept"] else "output spilled to DRAM (does not fit L1)")
    return "; ".join(parts)


def make_target(preset: str, overrides: dict[str, Any]) -> TenstorrentTarget:
    """Build a Tenstorrent target from its preset file plus per-request overrides."""
    return TenstorrentTarget(preset, load_preset(preset, TensixHardware, overrides))
