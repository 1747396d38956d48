"""Per-layer tables of a network plan: each conv's best latency per (layout, memory) and input/output placement.

`layer_table` enumerates a conv layer's whole space with the target's own scorer once per
placement combination (input in L1 or DRAM, output kept in L1 or written to DRAM) and keeps the
best point per (layout, memory placement). `conv_tables` builds them for every conv step of a
chain, once per distinct (layer, live bytes, placements), reporting progress and honouring a
cancel through a `mapper.watch.Watch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from costmodels.protocol import Choice, Target
from mapper.cache import TargetFactory
from mapper.enumerate import ChunkPlan
from mapper.layout_chain import Step
from mapper.watch import Watch
from workload.problem import Problem

#: memory placements in the order the tables use
MEMORY = ("l1-sharded", "dram-interleaved")
#: the placement combinations priced per layer: (input in L1, output in L1)
COMBOS = ((False, False), (False, True), (True, False), (True, True))


class PlanCancelled(Exception):
    """The caller's `Watch` asked the plan to stop before it was complete."""


@dataclass
class LayerTable:
    """One layer's best latency (s) per (layout, memory) for each placement combination, and the points."""

    layouts: list[str]
    best: dict[tuple[bool, bool], np.ndarray]  # combo -> (n_layouts, 2) seconds (inf: none feasible)
    points: dict[tuple[bool, bool], dict[tuple[int, int], dict[str, Choice]]] = field(default_factory=dict)


def placed_target(
    factory: TargetFactory, preset: str, overrides: dict[str, Any], cache: dict[str, Target], **placed: Any
) -> Target:
    """The target with placement overrides (`input_in_l1`, `output_in_l1`, `l1_live_bytes`, ...), built once."""
    ov = {**overrides, **placed}
    key = repr(sorted(ov.items()))
    if key not in cache:
        cache[key] = factory(preset, ov)
    return cache[key]


def layer_table(
    problem: Problem,
    preset: str,
    overrides: dict[str, Any],
    live_per_core: int,
    combos: tuple[tuple[bool, bool], ...],
    factory: TargetFactory,
    cache: dict[str, Target],
    watch: Watch | None = None,
) -> LayerTable:
    """Enumerate the layer's whole space once per placement combination; keep the best per (layout, memory)."""
    layouts: list[str] = []
    best: dict[tuple[bool, bool], np.ndarray] = {}
    points: dict[tuple[bool, bool], dict[tuple[int, int], dict[str, Choice]]] = {}
    for combo in combos:
        t = placed_target(
            factory, preset, overrides, cache, input_in_l1=combo[0], output_in_l1=combo[1], l1_live_bytes=live_per_core
        )
        space = t.space(problem)
        names = [p.name for p in space.params]
        lay_p = space.params[names.index("layout")]
        mem_p = space.params[names.index("memory")]
        layouts = [str(c) for c in lay_p.choices]
        mem_index = np.array([MEMORY.index(str(m)) for m in mem_p.choices])
        arr = np.full((len(layouts), 2), np.inf)
        pts: dict[tuple[int, int], dict[str, Choice]] = {}
        plan = ChunkPlan(space, 1 << 16)
        for b0, b1 in plan.bounds():
            if watch is not None and watch.cancelled():
                raise PlanCancelled
            codes = plan.codes(b0, b1)
            s = t.score_codes(problem, codes)
            lat = np.where(s.feasible, s.objectives["latency"], np.inf)
            group = np.asarray(codes["layout"]) * 2 + mem_index[np.asarray(codes["memory"])]
            order = np.lexsort((lat, group))
            g_sorted = group[order]
            heads = order[np.r_[True, g_sorted[1:] != g_sorted[:-1]]]  # each group's fastest, first on ties
            for i in heads[lat[heads] < arr.reshape(-1)[group[heads]]]:  # those that beat the earlier chunks
                j, m = divmod(int(group[i]), 2)
                arr[j, m] = lat[i]
                pts[(j, m)] = {p.name: p.choices[int(codes[p.name][i])] for p in space.params}
        best[combo] = arr
        points[combo] = pts
    return LayerTable(layouts=layouts, best=best, points=points)


def conv_tables(
    steps: list[Step],
    preset: str,
    overrides: dict[str, Any],
    factory: TargetFactory,
    cores: int,
    watch: Watch | None = None,
) -> list[LayerTable | None]:
    """The table of every conv step (None for the other steps), each distinct one enumerated once."""
    cache: dict[str, Target] = {}
    memo: dict[tuple[str, int, bool, bool], LayerTable] = {}
    tables: list[LayerTable | None] = []
    convs = sum(1 for s in steps if s.is_conv)
    for s in steps:
        if not isinstance(s.item, Problem):
            tables.append(None)
            continue
        combos = tuple(c for c in COMBOS if (s.in_l1 or not c[0]) and (s.out_l1 or not c[1]))
        live = -(-s.live_bytes // cores)
        key = (s.item.model_dump_json(exclude={"label"}), live, s.in_l1, s.out_l1)
        if key not in memo:
            memo[key] = layer_table(s.item, preset, overrides, live, combos, factory, cache, watch)
        tables.append(memo[key])
        if watch is not None:
            watch.report(sum(1 for t in tables if t is not None), convs, None, unit="plan layers")
    return tables
