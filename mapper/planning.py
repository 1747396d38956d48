"""How a search is planned: auto's choice and sub-space sizes, both from the space alone.

``auto`` enumerates the whole space (an exact, proven answer) when it has at most
`SearchSettings.enumerate_limit` points; otherwise it runs best-first branch and bound over the
structural choices (`mapper.strategies.BestFirst`: structures in ascending bound order, stopped by
the next bound; it proved more layers than TPE in the same or less time, and with several
objectives it returns the exact front where TPE's 200 trials did not, README "Search"); each
structure is a sub-space of at most `inner_size` points (`SearchSettings.inner_points`, or
`DEFAULT_INNER`, or `CELLS_INNER` where a structure's cells decide which points are scored). Neither
decision reads
a clock: the same request and seed take the same path and split the space the same way on any
machine, so a search that stops for a reason other than its time budget returns the same answer
anywhere (issue #12: two runs of one seed used to return 3,988 and 4,645 cycles because the
sub-space followed the measured scoring rate).

`probe` still measures the scorer (`TuneResult.scorer_rate`, for information only): under
``auto`` it scores the first chunk of the space, which an enumeration keeps as its first chunk.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from costmodels.protocol import SearchSpace, Target
from costmodels.structure_bound import StructureBulkBounded
from mapper.bounds import PROBLEM_FLOORED, CellOfPoints, bounded_by_cells
from mapper.enumerate import ChunkPlan, Enumeration, chunk_codes
from mapper.settings import SearchSettings
from workload.problem import Problem

#: points of a trial's sub-space when the settings do not fix them: a rule on the space, not the machine
#: (1 << 16 is what the rate-sized rule chose on every target of the benchmark, at 16-100 M points/s)
DEFAULT_INNER = 1 << 16
#: points of a best-first structure's sub-space where its cells decide which points are scored (`cells_decide`):
#: the structure is then the unit of bookkeeping (a bound vector, a cells test, a visit, a front merge), and four
#: times fewer of them cost fewer such steps, for some more points scored (a larger structure's open cells are
#: scored at its visit). Measured with rngd (`bench.cell_structures`, README "Structure size")
CELLS_INNER = 1 << 18


@dataclass
class Probe:
    """The scorer's measured speed on this problem; its chunk is the first chunk of an enumeration."""

    plan: ChunkPlan
    state: Enumeration
    blocks: int  # blocks of `plan` already scored
    overhead: float  # seconds of one call scoring a single point
    rate: float  # points per second of the probe chunk, net of the per-call overhead

    @property
    def complete(self) -> bool:
        return self.blocks >= self.plan.blocks

    def enumerate_seconds(self) -> float:
        """Predicted time to score the rest of the space in chunks."""
        left = self.plan.blocks - self.blocks
        calls = math.ceil(left / self.plan.per_chunk)
        return calls * self.overhead + left * self.plan.block / self.rate


def probe(problem: Problem, target: Target, space: SearchSpace, settings: SearchSettings) -> Probe:
    """Score the first `probe_points` points (and one point alone, twice) to measure the scorer on this problem."""
    plan = ChunkPlan(space, settings.chunk, block_limit=settings.probe_points)
    state = Enumeration(objectives=settings.objectives)
    one = chunk_codes(space, 0, 1)
    t0 = time.perf_counter()
    target.score_codes(problem, one)  # the first call may build per-problem tables: not the steady overhead
    t1 = time.perf_counter()
    target.score_codes(problem, one)
    t2 = time.perf_counter()
    blocks = min(plan.blocks_for(settings.probe_points), plan.blocks)
    codes = plan.codes(0, blocks)
    state.absorb(space, codes, target.score_codes(problem, codes))
    t3 = time.perf_counter()
    overhead = min(t1 - t0, t2 - t1)
    n = blocks * plan.block
    rate = n / max(t3 - t2 - overhead, (t3 - t2) / 4, 1e-9)
    state.seconds = t3 - t0
    return Probe(plan, state, blocks, overhead, rate)


def inner_size(settings: SearchSettings, target: Target | None = None) -> int:
    """Points per trial's or structure's sub-space: the setting, else `CELLS_INNER` for best-first on `target` where
    `cells_decide` holds, else `DEFAULT_INNER`; never a measured speed."""
    if settings.inner_points is not None:
        return settings.inner_points
    return CELLS_INNER if target is not None and cells_decide(settings, target) else DEFAULT_INNER


def cells_decide(settings: SearchSettings, target: Target) -> bool:
    """Whether a best-first structure's cells, not the structure, decide which of its points are scored: the
    search is bounded by cells (`mapper.bounds.bounded_by_cells`), the target places points in them
    (`CellOfPoints`) and lets the mapper split the space (not `StructureBulkBounded`, whose structures are its
    own), and the search does not end on the structures' own bound vectors: with latency beside objectives
    that the problem alone floors (`PROBLEM_FLOORED`: off-chip bytes), the ordered visits stop once the front
    dominates the next structure's latency bound beside those floors, before most structures are tested
    cell by cell, and finer structures make that stop finer (`bench.cell_structures` measured latency +
    off-chip bytes 1.22-1.65x slower with the larger structures on four of six rngd layers)."""
    objectives = settings.objectives
    ends_on_vectors = "latency" in objectives and all(o in PROBLEM_FLOORED for o in objectives if o != "latency")
    return (
        bounded_by_cells(objectives, target)
        and not ends_on_vectors
        and isinstance(target, CellOfPoints)
        and not isinstance(target, StructureBulkBounded)
    )


@dataclass
class Plan:
    """What `resolve_strategy` decided."""

    strategy: str
    probe: Probe | None
    inner_points: int


def resolve_strategy(settings: SearchSettings, space: SearchSpace, problem: Problem, target: Target) -> Plan:
    """The strategy to run (``auto`` resolved from the space's size alone), with its rate probe under ``auto``.

    The probe only informs (`TuneResult.scorer_rate`) and hands its scored chunk to an enumeration.
    """
    if settings.strategy != "auto":
        inner = inner_size(settings, target if settings.strategy == "bestfirst" else None)
        return Plan(settings.strategy, None, 0 if settings.strategy == "exhaustive" else inner)
    measured = probe(problem, target, space, settings)
    if measured.complete or space.size <= settings.enumerate_limit:
        return Plan("exhaustive", measured, 0)
    return Plan("bestfirst", measured, inner_size(settings, target))  # several objectives too: its front is exact
