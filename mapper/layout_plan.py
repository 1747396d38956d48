"""Whole-network layout choice on Tenstorrent targets: one layout per layer, chosen jointly (issue #13).

A workload is a list of layers in execution order. Between two consecutive layers whose tensors
match (the output of one is the input of the next: a *chain edge*), the activation may stay
L1-sharded (`costmodels.tenstorrent.cost`, placement options): keeping the layout costs nothing,
changing it costs a reshard over the NoC (`costmodels.tenstorrent.reshard`, priced from
hardware-facts.md §4.1 NoC row), and a layer whose tensors do not fit L1 spills to DRAM and pays
the traffic. Where the tensors do not match (an op the workload does not list, such as ResNet's
max pool, or a projection shortcut that reads the block input), the edge goes through DRAM.

Residual branches (`chain_of`): layers sharing a label prefix up to the last dot (torchvision's
``layer1.0.conv1``, ``layer1.0.conv2`` ... form block ``layer1.0``) are a residual block; the
block's input stays alive in L1 for the skip connection while the block's other layers run
(tenstorrent-conv2d.md, "CNN Models: ResNet-50": the skip connection adds the block input to its
output), and a layer that does not read its predecessor's output (the projection shortcut) keeps
that output alive for the add. Their bytes are spread over the grid's cores
([ASSUMPTION] evenly) and passed to the layer as ``l1_live_bytes``, so they shrink what fits.
The projection shortcut reads the block input from DRAM ([ASSUMPTION], conservative: its layout is
not tracked through the block).

The choice is exact over this chain (`plan_layouts`): dynamic programming over the state of each
chain edge (in DRAM, or in L1 in one of the producer's layouts), each layer priced at its best
mapping per (layout, memory placement) for each combination of input and output placement, by
enumerating its whole space with the target's own scorer. `brute_force` enumerates every layout
sequence instead (tests compare the two on small chains).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from costmodels.protocol import Choice, Target
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.reshard import reshard_matrix
from costmodels.tenstorrent.shape import tt_shape
from mapper.cache import TargetFactory
from mapper.enumerate import ChunkPlan
from workload import dtypes
from workload.conv2d import as_conv2d
from workload.problem import Problem

#: memory placements in the order the tables use
MEMORY = ("l1-sharded", "dram-interleaved")
#: the placement combinations priced per layer: (input in L1, output in L1)
COMBOS = ((False, False), (False, True), (True, False), (True, True))


@dataclass(frozen=True)
class Link:
    """How one layer connects to the previous ones."""

    chained: bool  # reads the previous layer's output (a chain edge)
    live_bytes: int  # bytes of other tensors alive in L1 while it runs (whole tensors, all cores)


def _tensors(p: Problem) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(input dims, output dims) of a conv layer as NHWC, None for other problems."""
    c = as_conv2d(p)
    if c is None:
        return None
    return (c.batch, c.input_height, c.input_width, c.in_channels), (
        c.batch,
        c.output_height,
        c.output_width,
        c.out_channels,
    )


def _nbytes(dims: tuple[int, ...], dtype: str) -> int:
    return int(np.prod(dims)) * int(dtypes.info(dtype).bytes)


def chain_of(problems: list[Problem]) -> list[Link]:
    """Chain edges and residual liveness of a layer list (see the module docstring)."""
    ts = [_tensors(p) for p in problems]
    blocks = [p.label.rsplit(".", 1)[0] if "." in p.label else None for p in problems]
    first: dict[str, int] = {}
    for i, b in enumerate(blocks):
        if b is not None:
            first.setdefault(b, i)
    links: list[Link] = []
    for i in range(len(problems)):
        t = ts[i]
        prev = ts[i - 1] if i > 0 else None
        chained = t is not None and prev is not None and prev[1] == t[0]
        live = 0
        b = blocks[i]
        if t is not None and b is not None and sum(1 for x in blocks if x == b) > 1:
            f = first[b]
            ft = ts[f]
            reads_block_input = not chained and ft is not None and ft[0] == t[0]  # the projection shortcut
            if ft is not None and i != f and not reads_block_input:
                live += _nbytes(ft[0], problems[f].inputs[0].dtype)  # the block input, kept for the skip
            if not chained and i > 0 and blocks[i - 1] == b and prev is not None:
                live += _nbytes(prev[1], problems[i - 1].output.dtype)  # the main branch's output, kept for the add
        links.append(Link(chained=chained, live_bytes=live))
    return links


@dataclass
class LayerTable:
    """One layer's best latency (s) per (layout, memory) for each placement combination, and the points."""

    layouts: list[str]
    best: dict[tuple[bool, bool], np.ndarray]  # combo -> (n_layouts, 2) seconds (inf: none feasible)
    points: dict[tuple[bool, bool], dict[tuple[int, int], dict[str, Choice]]] = field(default_factory=dict)


def _target(
    factory: TargetFactory, preset: str, overrides: dict[str, Any], cache: dict[str, Target], **placed: Any
) -> Target:
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
) -> LayerTable:
    """Enumerate the layer's whole space once per placement combination; keep the best per (layout, memory)."""
    layouts: list[str] = []
    best: dict[tuple[bool, bool], np.ndarray] = {}
    points: dict[tuple[bool, bool], dict[tuple[int, int], dict[str, Choice]]] = {}
    for combo in combos:
        t = _target(
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
            codes = plan.codes(b0, b1)
            s = t.score_codes(problem, codes)
            lat = np.where(s.feasible, s.objectives["latency"], np.inf)
            group = np.asarray(codes["layout"]) * 2 + mem_index[np.asarray(codes["memory"])]
            order = np.lexsort((lat, group))
            g_sorted = group[order]
            heads = order[np.r_[True, g_sorted[1:] != g_sorted[:-1]]]
            for i in heads:
                v = lat[i]
                j, m = divmod(int(group[i]), 2)
                if v < arr[j, m]:
                    arr[j, m] = v
                    pts[(j, m)] = {p.name: p.choices[int(codes[p.name][i])] for p in space.params}
        best[combo] = arr
        points[combo] = pts
    return LayerTable(layouts=layouts, best=best, points=points)


class PlannedLayer(BaseModel):
    """One layer of the joint plan."""

    model_config = ConfigDict(frozen=True)
    index: int
    label: str
    layout: str
    memory: str
    input: str = Field(description="dram, l1 (same layout) or 'l1 from <layout>' (resharded)")
    output: str = Field(description="dram or l1")
    seconds: float = Field(description="the layer's time in the plan, its reshard included")
    reshard_seconds: float
    reshard_bytes: float
    alone_seconds: float = Field(description="the layer's optimum alone (input and output in DRAM)")
    live_bytes_per_core: int
    point: dict[str, Choice]


class NetworkPlan(BaseModel):
    """The joint layout choice of a workload on a Tenstorrent target, beside layer-by-layer choices."""

    model_config = ConfigDict(frozen=True)
    layers: list[PlannedLayer]
    total_seconds: float = Field(description="joint optimum: every layer, its reshards and spills")
    layer_by_layer_seconds: float = Field(description="each layer's optimum alone, input and output in DRAM")
    greedy_seconds: float = Field(
        description="layer by layer with activations kept in L1: each layer takes its cheapest choice given the "
        "previous one's (as ttnn's auto-shard picks per layer)"
    )
    reshards: int
    reshard_seconds: float
    spilled_edges: int = Field(description="chain edges that go through DRAM in the joint plan")
    rule: str = Field(description="what the plan models and assumes (see mapper.layout_plan)")


def _tables(
    problems: list[Problem], preset: str, overrides: dict[str, Any], factory: TargetFactory
) -> tuple[list[Link], list[LayerTable], Target]:
    links = chain_of(problems)
    cache: dict[str, Target] = {}
    base = factory(preset, overrides)
    cores = base.hardware.cores  # type: ignore[attr-defined]
    memo: dict[tuple[str, int, bool, bool], LayerTable] = {}
    tables = []
    n = len(problems)
    for i, p in enumerate(problems):
        chained_out = i + 1 < n and links[i + 1].chained
        combos = tuple(c for c in COMBOS if (links[i].chained or not c[0]) and (chained_out or not c[1]))
        live = -(-links[i].live_bytes // cores)
        key = (p.model_dump_json(exclude={"label"}), live, links[i].chained, chained_out)
        if key not in memo:
            memo[key] = layer_table(p, preset, overrides, live, combos, factory, cache)
        tables.append(memo[key])
    return links, tables, base


def _reshard(problem: Problem, src: list[str], dst: list[str], target: Target) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, bytes) of resharding the layer's input from each producer layout to each of its layouts."""
    hw = cast(TensixHardware, target.hardware)
    shape = tt_shape(problem, hw.tile)
    cyc, moved = reshard_matrix(shape.in_sticks, shape.in_channels, shape.in_bytes, src, dst, hw)
    return cyc / hw.clock_hz, moved


def plan_layouts(
    problems: list[Problem],
    preset: str,
    overrides: dict[str, Any] | None = None,
    factory: TargetFactory | None = None,
) -> NetworkPlan:
    """The joint layout choice (exact over the chain: dynamic programming, see the module docstring)."""
    from mapper.cache import resolve_factory

    factory = resolve_factory(factory)
    links, tables, base = _tables(problems, preset, dict(overrides or {}), factory)
    n = len(problems)
    inf = np.inf
    # state of the edge into layer i: index 0 = DRAM, 1 + j = L1 in layout j of layer i-1
    value = np.array([0.0])
    back: list[tuple[np.ndarray, ...]] = []
    reshards: list[tuple[np.ndarray, np.ndarray] | None] = []
    for i, p in enumerate(problems):
        tb = tables[i]
        nl = len(tb.layouts)
        chained_out = i + 1 < n and links[i + 1].chained
        if i > 0 and links[i].chained and value.size > 1:
            rs, rb = _reshard(p, tables[i - 1].layouts, tb.layouts, base)
        else:
            rs, rb = np.zeros((max(value.size - 1, 0), nl)), np.zeros((max(value.size - 1, 0), nl))
        reshards.append((rs, rb))
        n_in = value.size
        # cost[s, j, m, o]: from edge state s, layout j, memory m, output o (0 DRAM, 1 L1)
        cost = np.full((n_in, nl, 2, 2), inf)
        for (i_l1, o_l1), arr in tb.best.items():
            o = int(o_l1)
            if not i_l1:
                cost[0, :, :, o] = arr
            elif n_in > 1:
                cost[1:, :, 0, o] = arr[None, :, 0] + rs  # sharded: reshard unless the layout is kept
                cost[1:, :, 1, o] = arr[None, :, 1]  # DRAM-interleaved: reads DRAM (the spill is in arr)
        cost[:, :, 1, 1] = inf  # a DRAM-interleaved layer writes DRAM
        if not chained_out:
            cost[:, :, :, 1] = inf
        total = value[:, None, None, None] + cost
        # next edge: DRAM from any (s, j, m, o=0); L1 in layout j from (s, j, m=l1, o=1)
        flat_dram = total[:, :, :, 0].reshape(-1)
        k = int(np.argmin(flat_dram))
        l1_tot = total[:, :, 0, 1]  # (s, j): sharded, output kept
        s_best = np.argmin(l1_tot, axis=0)
        new = np.concatenate([[flat_dram[k]], l1_tot[s_best, np.arange(nl)]])
        back.append((np.array([k]), s_best))
        value = new
    if not np.isfinite(value[0]):
        raise ValueError("some layer has no feasible mapping on this target: no network plan")
    # walk back from the DRAM state after the last layer
    chosen: list[tuple[int, int, int, int]] = []  # (in state, layout, memory, out)
    state = 0
    for i in range(n - 1, -1, -1):
        nl = len(tables[i].layouts)
        kd, s_best = back[i]
        if state == 0:
            s0, j0, m0 = (int(v) for v in np.unravel_index(int(kd[0]), (back_in_size(back, i, tables), nl, 2)))
            chosen.append((s0, j0, m0, 0))
            state = s0
        else:
            s1 = int(s_best[state - 1])
            chosen.append((s1, state - 1, 0, 1))
            state = s1
    chosen.reverse()
    return _report(problems, links, tables, reshards, chosen, float(value[0]), base)


def back_in_size(back: list[tuple[np.ndarray, ...]], i: int, tables: list[LayerTable]) -> int:
    """Edge states into layer i: 1 (DRAM) plus the previous layer's layouts when it could keep its output."""
    return 1 if i == 0 else 1 + len(back[i - 1][1])


def _report(
    problems: list[Problem],
    links: list[Link],
    tables: list[LayerTable],
    reshards: list[tuple[np.ndarray, np.ndarray] | None],
    chosen: list[tuple[int, int, int, int]],
    total: float,
    base: Target,
) -> NetworkPlan:
    cores = base.hardware.cores  # type: ignore[attr-defined]
    layers = []
    n_reshard, t_reshard, spilled = 0, 0.0, 0
    for i, (s, j, m, o) in enumerate(chosen):
        tb = tables[i]
        combo = (s > 0, o == 1)
        rs_s = rs_b = 0.0
        if s > 0 and m == 0:
            r = reshards[i]
            assert r is not None
            rs_s, rs_b = float(r[0][s - 1, j]), float(r[1][s - 1, j])
        if rs_s > 0:
            n_reshard += 1
            t_reshard += rs_s
        src = tables[i - 1].layouts[s - 1] if s > 0 else ""
        inp = "dram" if s == 0 else ("l1" if rs_s == 0 and m == 0 else f"l1 from {src}" if m == 0 else "l1 -> dram")
        if i + 1 < len(chosen) and links[i + 1].chained and o == 0:
            spilled += 1
        layers.append(
            PlannedLayer(
                index=i,
                label=problems[i].label or f"layer {i}",
                layout=tb.layouts[j],
                memory=MEMORY[m],
                input=inp,
                output="l1" if o else "dram",
                seconds=float(tb.best[combo][j, m]) + rs_s,
                reshard_seconds=rs_s,
                reshard_bytes=rs_b,
                alone_seconds=float(tb.best[(False, False)].min()),
                live_bytes_per_core=-(-links[i].live_bytes // cores),
                point=tb.points[combo][(j, m)],
            )
        )
    return NetworkPlan(
        layers=layers,
        total_seconds=total,
        layer_by_layer_seconds=sum(lay.alone_seconds for lay in layers),
        greedy_seconds=_greedy(links, tables, reshards_for=problems, base=base),
        reshards=n_reshard,
        reshard_seconds=t_reshard,
        spilled_edges=spilled,
        rule="exact DP over the layer chain; chain edges where a layer's input tensor is its predecessor's output, "
        "DRAM elsewhere; residual tensors counted as live L1 bytes (mapper.layout_plan)",
    )


def _greedy(links: list[Link], tables: list[LayerTable], reshards_for: list[Problem], base: Target) -> float:
    """Layer by layer: each layer takes its own cheapest choice given the incoming edge (ties: first)."""
    total, state_layout = 0.0, None  # None: the edge is in DRAM
    n = len(tables)
    for i, tb in enumerate(tables):
        chained_out = i + 1 < n and links[i + 1].chained
        nl = len(tb.layouts)
        rs = np.zeros(nl)
        if state_layout is not None:
            rs = _reshard(reshards_for[i], [state_layout], tb.layouts, base)[0][0]
        options: list[tuple[float, int, int]] = []  # (cost, layout, out)
        for o in (0, 1) if chained_out else (0,):
            arr = tb.best.get((state_layout is not None, bool(o)))
            if arr is None:
                continue
            sharded = arr[:, 0] + rs
            options += [(float(v), j, o) for j, v in enumerate(sharded)]
            if o == 0:
                options += [(float(v), j, 0) for j, v in enumerate(arr[:, 1])]
        c, j, o = min(options, key=lambda x: x[0])
        total += c
        state_layout = tb.layouts[j] if o == 1 else None
    return total


def brute_force(
    problems: list[Problem], preset: str, overrides: dict[str, Any] | None = None, factory: TargetFactory | None = None
) -> float:
    """The joint optimum by enumerating every (layout, memory, output placement) sequence.

    Each layer is priced by the target itself with the placement options of the sequence (the
    input's actual layout given as ``input_layout``, so the reshard is the cost model's own), at its
    best mapping of that layout: independent of `plan_layouts`' tables and reshard matrix. For small
    chains only (the number of sequences is the product of the choices).
    """
    from mapper.cache import resolve_factory

    factory = resolve_factory(factory)
    overrides = dict(overrides or {})
    links = chain_of(problems)
    base = factory(preset, overrides)
    cores = base.hardware.cores  # type: ignore[attr-defined]
    cache: dict[str, Target] = {}
    n = len(problems)
    layouts = [[str(c) for c in base.space(p).params[0].choices] for p in problems]
    per_layer = [[(j, m, o) for j in range(len(layouts[i])) for m in (0, 1) for o in (0, 1)] for i in range(n)]
    memo: dict[tuple[int, str, int], np.ndarray] = {}

    def price(i: int, src: str | None, j: int, m: int, o: int) -> float:
        key = (i, src or "", o)
        if key not in memo:
            live = -(-links[i].live_bytes // cores)
            ov: dict[str, Any] = {"input_in_l1": src is not None, "output_in_l1": bool(o), "l1_live_bytes": live}
            if src is not None:
                ov["input_layout"] = src
            t = _target(factory, preset, overrides, cache, **ov)
            space = t.space(problems[i])
            mem_choices = [str(c) for c in next(p for p in space.params if p.name == "memory").choices]
            arr = np.full((len(layouts[i]), 2), np.inf)
            plan = ChunkPlan(space, 1 << 16)
            for b0, b1 in plan.bounds():
                codes = plan.codes(b0, b1)
                s = t.score_codes(problems[i], codes)
                lat = np.where(s.feasible, s.objectives["latency"], np.inf)
                mem = np.array([MEMORY.index(c) for c in mem_choices])[np.asarray(codes["memory"])]
                np.minimum.at(arr, (np.asarray(codes["layout"]), mem), lat)
            memo[key] = arr
        return float(memo[key][j, m])

    best_total = np.inf
    for seq in itertools.product(*per_layer):
        total, ok = 0.0, True
        for i, (j, m, o) in enumerate(seq):
            chained_out = i + 1 < n and links[i + 1].chained
            if o == 1 and (m == 1 or not chained_out):
                ok = False
                break
            prev = seq[i - 1] if i > 0 else None
            src = layouts[i - 1][prev[0]] if prev is not None and prev[2] == 1 else None
            total += price(i, src, j, m, o)
        if ok:
            best_total = min(best_total, total)
    return float(best_total)
