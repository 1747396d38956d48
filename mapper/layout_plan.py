"""Whole-network layout choice on Tenstorrent targets: one layout per step, chosen jointly (issue #13).

A workload is a list of conv layers in execution order; the plan puts back the max pool and the
residual adds between them (`workload.network_ops`) and runs over the resulting chain of steps
(`mapper.layout_chain`). Between two consecutive steps whose tensors match (a *chain edge*) the
activation may stay L1-sharded (`costmodels.tenstorrent.cost`, placement options): keeping the
layout costs nothing, changing it costs a reshard over the NoC (`costmodels.tenstorrent.reshard`,
priced from hardware-facts.md §4.1 NoC row), and a step whose tensors do not fit L1 spills to DRAM
and pays the traffic. Residual blocks keep their input alive as the *skip* tensor: the projection
shortcut reads it in its L1 layout when it is kept there (resharding it if its own layout differs)
and the add reads it beside the main branch (`mapper.layout_prices`; the add and the pool are
priced on the Tensix cores that hold the tensor, `costmodels.tenstorrent.eltwise`).

The choice is exact over this chain (`plan_layouts`): dynamic programming over the state of each
chain edge and of the block's skip tensor (each in DRAM, or in L1 in one of the plan's layouts),
each conv priced at its best mapping per (layout, memory placement) for each combination of
input and output placement, by enumerating its whole space with the target's own scorer
(`mapper.layout_tables`). `mapper.layout_brute.brute_force` enumerates every choice sequence
instead (tests compare the two on small chains). The greedy figure runs the same recursion
keeping only the cheapest state after each step.

Strided convs (`mapper.layout_forms`): each takes the form the search chooses for it alone, folded
or as given (`mapper.transforms`); a folded conv is a step of the chain in its own right, reading
its input from DRAM with the fold op in its price (`mapper.layout_chain`), and its row says so.

Progress and cancel: with a `mapper.watch.Watch`, the plan reports each conv table it builds
(unit ``plan layers``, the bulk of its time) then each DP step (unit ``plan steps``), and raises
`PlanCancelled` when the watch asks it to stop (checked between enumeration chunks and steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mapper.cache import TargetFactory
from mapper.layout_chain import Step, build_chain
from mapper.layout_forms import choose_forms
from mapper.layout_prices import Prices
from mapper.layout_report import NetworkPlan, PlannedLayer, report
from mapper.layout_tables import PlanCancelled, conv_tables
from mapper.watch import Watch
from workload.problem import Problem

__all__ = ["NetworkPlan", "PlanCancelled", "PlannedLayer", "plan_layouts"]


@dataclass
class _Back:
    """How one step's new states were reached: previous (edge, skip) indices and the choice code."""

    E: np.ndarray  # edge states into the step (ids: -1 DRAM, else vocabulary layout)
    K: np.ndarray  # skip states into the step
    prev_e: np.ndarray  # (nU, nK') index into E
    prev_k: np.ndarray  # (nU, nK') index into K
    code: np.ndarray  # (nU, nK')


def _step(
    value: np.ndarray, E: np.ndarray, K: np.ndarray, step: Step, prices: Prices, i: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, _Back]:
    """One DP step: the new (value, E, K) and its back pointers."""
    G, Gc, U = prices.options(i, E, K)
    nE, nK, nU = E.size, K.size, U.size
    if step.mode == "keep":
        total = value[:, :, None] + G[:, None, :]  # (e, k, u)
        pe = np.argmin(total, axis=0)  # (k, u)
        new = np.take_along_axis(total, pe[None], axis=0)[0].T
        prev_e, prev_k = pe.T, np.broadcast_to(np.arange(nK)[None, :], (nU, nK))
        code = Gc[pe.T, np.arange(nU)[:, None]]
        K2 = K
    elif step.mode in ("open", "swap"):
        total = value[:, :, None] + (G[:, None, :] if step.mode == "open" else G[None, :, :])
        pk = np.argmin(total, axis=1)  # (e, u)
        new = np.take_along_axis(total, pk[:, None], axis=1)[:, 0].T
        prev_e, prev_k = np.broadcast_to(np.arange(nE)[None, :], (nU, nE)), pk.T
        src = np.broadcast_to(np.arange(nE)[:, None], (nE, nU)) if step.mode == "open" else pk
        code = Gc[src, np.arange(nU)[None, :]].T
        K2 = E
    else:  # close
        total = value[:, :, None] + G
        flat = total.reshape(nE * nK, nU)
        a = np.argmin(flat, axis=0)
        new = flat[a, np.arange(nU)][:, None]
        prev_e, prev_k = (a // nK)[:, None], (a % nK)[:, None]
        code = Gc[prev_e[:, 0], prev_k[:, 0], np.arange(nU)][:, None]
        K2 = np.array([-1])
    rows = np.isfinite(new).any(axis=1)
    cols = np.isfinite(new).any(axis=0)
    sl = np.ix_(rows, cols)
    back = _Back(E, K, np.asarray(prev_e)[sl], np.asarray(prev_k)[sl], np.asarray(code)[sl])
    return new[sl], U[rows], K2[cols], back


def _run(
    steps: list[Step], prices: Prices, greedy: bool, watch: Watch | None
) -> tuple[float, list[tuple[int, int, int]]]:
    """The recursion over the chain: (best total, chosen (edge id, skip id, code) per step)."""
    value, E, K = np.zeros((1, 1)), np.array([-1]), np.array([-1])
    backs: list[_Back] = []
    for i, step in enumerate(steps):
        if watch is not None and watch.cancelled():
            raise PlanCancelled
        value, E, K, back = _step(value, E, K, step, prices, i)
        if watch is not None and not greedy:
            watch.report(i + 1, len(steps), None, unit="plan steps")
        if value.size == 0:
            raise ValueError("some layer has no feasible mapping on this target: no network plan")
        if greedy:  # keep only the cheapest state: each step chose without looking ahead
            r, q = (int(x) for x in np.unravel_index(int(np.argmin(value)), value.shape))
            keep = (slice(r, r + 1), slice(q, q + 1))
            value, E, K = value[keep], E[r : r + 1], K[q : q + 1]
            back = _Back(back.E, back.K, back.prev_e[keep], back.prev_k[keep], back.code[keep])
        backs.append(back)
    dram = np.flatnonzero(E == -1)
    if dram.size == 0 or not np.isfinite(value[dram[0]]).any():
        raise ValueError("some layer has no feasible mapping on this target: no network plan")
    u: int = int(dram[0])
    kk: int = int(np.argmin(value[u]))
    total = float(value[u, kk])
    chosen: list[tuple[int, int, int]] = []
    for back in reversed(backs):
        pe, pk, c = int(back.prev_e[u, kk]), int(back.prev_k[u, kk]), int(back.code[u, kk])
        chosen.append((int(back.E[pe]), int(back.K[pk]), c))
        u, kk = pe, pk
    chosen.reverse()
    return total, chosen


def plan_layouts(
    problems: list[Problem],
    preset: str,
    overrides: dict[str, Any] | None = None,
    factory: TargetFactory | None = None,
    *,
    network_ops: bool = True,
    watch: Watch | None = None,
) -> NetworkPlan:
    """The joint layout choice (exact over the chain: dynamic programming, see the module docstring).

    `network_ops`: put the max pool and the residual adds back between the convs (False: the convs
    only, every edge they do not connect through DRAM). Raises `PlanCancelled` when `watch` asks.
    """
    from mapper.cache import resolve_factory

    factory = resolve_factory(factory)
    overrides = dict(overrides or {})
    steps = build_chain(problems, network_ops)
    base = factory(preset, overrides)
    cores = base.hardware.cores  # type: ignore[attr-defined]
    tables = conv_tables(steps, preset, overrides, factory, cores, watch)
    forms, folded_tables = choose_forms(problems, steps, tables, preset, overrides, factory, cores, watch)
    if forms:  # the same steps in the same order, the folded convs in their folded form
        steps = build_chain(problems, network_ops, forms)
        tables = [folded_tables.get(i, tb) for i, tb in enumerate(tables)]
    prices = Prices(steps, tables, base, [-(-s.live_bytes // cores) for s in steps])
    total, chosen = _run(steps, prices, False, watch)
    greedy, _ = _run(steps, prices, True, watch)
    return report(steps, tables, prices, chosen, total, greedy)
