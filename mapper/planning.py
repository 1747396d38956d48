"""How a search is planned from the scorer's measured speed: the rate probe, auto's choice, sub-space sizes.

The analytic models are cheap but not free, and their speed differs per target and problem, so
the mapper measures before it decides: `probe` scores one point alone (the per-call overhead) and
the first chunk of the space (the rate; that chunk is kept as the first chunk of an enumeration,
so it is never scored twice). ``auto`` enumerates the whole space (an exact, proven answer) when
it has at most `SearchSettings.enumerate_limit` points - a rule on the space, not on the machine,
so the same seeded request takes the same path anywhere - unless the measured rate says the
enumeration would not fit the request's own ``max_seconds``; otherwise it runs TPE with each
trial's sub-space sized to about `SearchSettings.trial_seconds` of scoring.

The sub-space size of the TPE path follows the measured rate; the result records it
(`TuneResult.inner_points`, `scorer_rate`), and fixing ``inner_points`` in the settings makes a
seeded TPE search reproducible on any machine.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from costmodels.protocol import SearchSpace, Target
from mapper.enumerate import ChunkPlan, Enumeration, chunk_codes
from mapper.settings import SearchSettings
from workload.problem import Problem

#: bounds of a sub-space sized from the measured rate, and the size used when no rate was measured
MIN_INNER, MAX_INNER, DEFAULT_INNER = 64, 1 << 16, 4096


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


def inner_size(settings: SearchSettings, measured: Probe | None) -> int:
    """Points per trial's sub-space: the setting, or sized from the measured rate.

    The sub-space is sized so scoring it takes about `trial_seconds`, or the scorer's per-call
    overhead if that is longer (so at least half of a trial's scoring time is useful work),
    rounded down to a power of two so small timing noise rarely changes the split.
    """
    if settings.inner_points is not None:
        return settings.inner_points
    if settings.multi_objective or measured is None:
        return 0 if settings.multi_objective else DEFAULT_INNER
    seconds = max(settings.trial_seconds, measured.overhead)
    want = max(MIN_INNER, min(MAX_INNER, int(measured.rate * seconds)))
    return 1 << (want.bit_length() - 1)


@dataclass
class Plan:
    """What `resolve_strategy` decided."""

    strategy: str
    probe: Probe | None
    inner_points: int


def resolve_strategy(settings: SearchSettings, space: SearchSpace, problem: Problem, target: Target) -> Plan:
    """The strategy to run, and the rate probe when one was needed.

    ``auto`` enumerates spaces of at most `enumerate_limit` points (unless the measured rate says that
    would overrun ``max_seconds``); otherwise it runs TPE.
    """
    needs_rate = settings.strategy == "auto" or (
        settings.inner_points is None and settings.strategy != "exhaustive" and not settings.multi_objective
    )
    measured = probe(problem, target, space, settings) if needs_rate else None
    if settings.strategy != "auto":
        return Plan(settings.strategy, measured, inner_size(settings, measured))
    assert measured is not None
    if measured.complete or (
        space.size <= settings.enumerate_limit and measured.enumerate_seconds() <= settings.max_seconds
    ):
        return Plan("exhaustive", measured, 0)
    return Plan("tpe", measured, inner_size(settings, measured))
