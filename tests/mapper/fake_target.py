"""A small fake target for the mapper's tests (a test double of the `Target` protocol).

`FakeMatmulTarget` prices plain matmuls ``mk,kn->mn`` on an imaginary 64x64 PE array with a
256 KiB buffer. Its numbers come from nowhere: they only need to make some points infeasible
(buffer capacity, K-tile limit), give the stationary-operand choice a real effect, and agree
between the scalar (`check`/`cost`) and vectorised (`score_batch`) paths, which share one
numpy formula; `score_codes` decodes the choice indices and calls `score_batch`, so subclasses that
override `score_batch` see every batch the mapper scores. `test_fake_target.py` holds the
double to the same contract as real targets.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel

from costmodels.choice_codes import SpaceCoder
from costmodels.ir import Level, Loop, Mapping, coverage_errors
from costmodels.protocol import BatchScore, Choice, CostReport, LowerBound, Param, SearchSpace, Violation
from workload import dtypes
from workload.einsum import einsum
from workload.problem import Problem


class FakeHardware(BaseModel):
    pe: int = 64
    sram_bytes: int = 256 * 1024
    max_tk: int = 256
    bytes_per_cycle: float = 64.0
    clock_hz: float = 1e9
    tile_overhead: int = 32


def _tiles(size: int) -> tuple[int, ...]:
    out, t = [], 8
    while t < 2 * size and t <= 1024:
        out.append(t)
        t *= 2
    return tuple(out) or (size,)


class FakeMatmulTarget:
    """Test double: a toy matmul engine (see the module docstring)."""

    family = "fake"
    objectives: tuple[str, ...] = ("latency", "offchip_bytes", "footprint")

    def __init__(self, name: str = "fake", **overrides: Any) -> None:
        self.name = name
        self.hardware = FakeHardware(**overrides)

    # ---- protocol ------------------------------------------------------------------------
    def supports(self, problem: Problem) -> list[Violation]:
        if set(problem.axes) != {"m", "n", "k"} or problem.free_axes != ("m", "n") or not problem.is_binary:
            return [Violation(code="not-matmul", message="the fake target only runs mk,kn->mn")]
        return []

    def space(self, problem: Problem) -> SearchSpace:
        a = problem.axes
        return SearchSpace(
            params=(
                Param(name="stationary", choices=("A", "B")),
                Param(name="tm", choices=_tiles(a["m"])),
                Param(name="tn", choices=_tiles(a["n"])),
                Param(name="tk", choices=_tiles(a["k"])),
            )
        )

    def mapping(self, problem: Problem, point: dict[str, Choice]) -> Mapping:
        a = problem.axes
        tm, tn, tk = int(point["tm"]), int(point["tn"]), int(point["tk"])
        outer = {ax: math.ceil(a[ax] / t) for ax, t in (("m", tm), ("n", tn), ("k", tk))}
        order = ("n", "m", "k") if point["stationary"] == "B" else ("m", "n", "k")
        return Mapping(
            target=self.name,
            levels=(
                Level(name="dram", loops=tuple(Loop(axis=ax, factor=outer[ax]) for ax in order)),
                Level(
                    name="tile", loops=(Loop(axis="m", factor=tm), Loop(axis="n", factor=tn), Loop(axis="k", factor=tk))
                ),
            ),
            acc_dtype=problem.acc_dtype,
            fill={"A": {"k": "zero"}, "B": {"k": "zero"}},
            knobs=dict(point),
        )

    def _formula(self, problem: Problem, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        hw, a = self.hardware, problem.axes
        e = dtypes.info(problem.inputs[0].dtype).bytes
        oe = dtypes.info(problem.output.dtype).bytes
        tm, tn, tk = (np.asarray(cols[c], dtype=np.float64) for c in ("tm", "tn", "tk"))
        stat_b = np.asarray(cols["stationary"]) == "B"
        mt, nt, kt = np.ceil(a["m"] / tm), np.ceil(a["n"] / tn), np.ceil(a["k"] / tk)
        footprint = (tm * tk + tk * tn) * e + tm * tn * 4
        per_tile = np.ceil(tm / hw.pe) * np.ceil(tn / hw.pe) * tk + hw.tile_overhead
        compute = mt * nt * kt * per_tile
        a_bytes, b_bytes = mt * tm * kt * tk * e, kt * tk * nt * tn * e
        offchip = np.where(stat_b, a_bytes * nt + b_bytes, a_bytes + b_bytes * mt) + a["m"] * a["n"] * oe
        cycles = np.maximum(compute, offchip / hw.bytes_per_cycle) + (tm * tk + tk * tn) * e / hw.bytes_per_cycle
        return {
            "sram": footprint > hw.sram_bytes,
            "tk": tk > hw.max_tk,
            "footprint": footprint,
            "compute": compute,
            "offchip": offchip,
            "cycles": cycles,
        }

    def check(self, problem: Problem, mapping: Mapping) -> list[Violation]:
        out = self.supports(problem)
        if out:
            return out
        f = self._formula(problem, {k: np.asarray([v]) for k, v in mapping.knobs.items()})
        if f["sram"][0]:
            out.append(
                Violation(
                    code="sram-capacity",
                    message=f"tiles need {f['footprint'][0] / 1024:.0f} KiB, {self.hardware.sram_bytes // 1024} KiB "
                    "available: use smaller tm, tn or tk",
                )
            )
        if f["tk"][0]:
            out.append(Violation(code="tk-limit", message=f"tk above {self.hardware.max_tk}: split K further"))
        out.extend(Violation(code="coverage", message=e.message) for e in coverage_errors(problem, mapping))
        return out

    def cost(self, problem: Problem, mapping: Mapping) -> CostReport:
        f = self._formula(problem, {k: np.asarray([v]) for k, v in mapping.knobs.items()})
        lb = self.lower_bound(problem)
        cycles = float(f["cycles"][0])
        return CostReport(
            cycles=cycles,
            clock_hz=self.hardware.clock_hz,
            bound="compute" if f["compute"][0] * self.hardware.bytes_per_cycle >= f["offchip"][0] else "dma",
            utilization=min(1.0, problem.macs / (self.hardware.pe**2 * cycles)),
            bytes={"dram": float(f["offchip"][0])},
            breakdown={"compute": float(f["compute"][0])},
            lower_bound_cycles=lb.cycles,
            offchip_bytes=float(f["offchip"][0]),
            footprint_bytes=float(f["footprint"][0]),
        )

    def lower_bound(self, problem: Problem) -> LowerBound:
        c = problem.macs / self.hardware.pe**2
        m = problem.min_bytes / self.hardware.bytes_per_cycle
        return LowerBound(cycles=max(c, m), compute_cycles=c, memory_cycles=m, reason="roofline")

    def score_batch(self, problem: Problem, columns: dict[str, np.ndarray]) -> BatchScore:
        f = self._formula(problem, columns)
        feasible = ~(f["sram"] | f["tk"])
        inf = np.where(feasible, 1.0, np.inf)
        return BatchScore(
            feasible=feasible,
            objectives={
                "latency": f["cycles"] / self.hardware.clock_hz * inf,
                "offchip_bytes": f["offchip"] * inf,
                "footprint": f["footprint"] * inf,
            },
        )

    def score_codes(self, problem: Problem, codes: dict[str, np.ndarray]) -> BatchScore:
        return self.score_batch(problem, SpaceCoder(self.space(problem)).decode(codes))

    def warm_starts(self, problem: Problem) -> list[dict[str, Choice]]:
        sp = {p.name: p.choices for p in self.space(problem).params}
        pick = {
            k: max(c for c in sp[k] if c <= 128) if any(c <= 128 for c in sp[k]) else sp[k][0]
            for k in ("tm", "tn", "tk")
        }
        return [{"stationary": "B", **pick}, {"stationary": "A", "tm": 10**6, "tn": 8, "tk": 8}]

    def render(self, problem: Problem, mapping: Mapping) -> str:
        return " / ".join(
            f"{lv.name}: " + " ".join(f"{lp.axis}{lp.factor}" for lp in lv.loops) for lv in mapping.levels
        )


def fake_target(preset: str = "fake", overrides: dict[str, Any] | None = None) -> FakeMatmulTarget:
    """Factory with the shape of `costmodels.registry.get_target` (picklable for worker processes)."""
    return FakeMatmulTarget(preset, **(overrides or {}))


def matmul(m: int = 512, n: int = 512, k: int = 512) -> Problem:
    return einsum("mk,kn->mn", {"m": m, "n": n, "k": k}, dtype="bf16", weight=1)
