"""Admissible latency bounds of structures of the RNGD space (issue #12, branch and bound).

The mapper searches a large space by *structures* (some parameters fixed, `mapper.bounds`) and
skips a structure whose bound is not below the best latency found. `TermBound` bounds one from
the batch scorer's stage tables (`rngd.scoring.Tables`): for each stage-1 row ``s`` (clusters,
cluster_role, slice_grid, slice_role, shift) it takes, over the packet choices ``p`` and the lane
choices ``l`` the structure allows, the least over ``p`` of

    max(la * tnhn' + D_tree,                                   compute C_mac (step 2)
        sflb * (tnhn' if nbc else tn') / fetch_rate,           stream C_stream
        lgog * rtnhn' / drain_rate + D_tree,                   drain C_out
        hb * kvw / 8 * (tn * rhn)' / fill_rate,                TRF fill C_trf (step 3)
        dma')                                                   DMA (step 4)

plus ``kval'`` (K-split tail, step 5), where ``x'`` is the least lane term ``x`` over the allowed
``l`` that keep the weight tile within the TRF (half of it when the structure fixes double buffering
on) and the accumulated outputs within the Time Reducer (step 1: those without are infeasible) and
that the tables do not mark bad (``dma`` = inf: a row count the part lacks, or a ``trf_split`` a
smaller split dominates, `rngd.factors.trf_image`; the scorer makes their points infeasible);
when the structure fixes ``double_buffer`` off, the CE, fill and DMA terms are added instead of
maxed (the stages then run one after another)
(hardware-facts.md §1.2). The structure's bound is the least ``bound(s)`` over its stage-1 rows,
in seconds at the clock.

Admissibility: `combine` prices a point at ``c_ce + c_trf + c_dma + tail`` or, double-buffered,
``fill_one + max(c_ce, c_trf - fill_one, c_dma) + tail``; both are at least ``max(c_ce, c_trf,
c_dma) + tail`` (every term is non-negative), the first also at least the sum. ``c_ce =
max(c_mac, c_stream, c_out) + D_tree + last >=`` each of ``c_mac + D_tree``, ``c_stream``, ``c_out +
D_tree``; ``c_mac = la * tnhn``; ``c_stream >= sflb * tn * max(hn * nbc, 1) / fetch`` (shift
windows only add), which is ``sflb * tnhn`` when ``nbc`` = 1 and at least ``sflb * tn`` otherwise;
``c_out = lgog * rtnhn / drain``; ``c_trf = hb * tn * rhn * kvw / 8 / fill``; ``tail = kval + kflag *
c_out >= kval``. For a fixed ``p`` each lane product is at least its least value over ``l``, so the
max over the terms at ``p`` is below every point of row ``s`` with that ``p``, and the least over
``p`` and over the structure's rows is below each of its feasible points (a lane choice that
breaks the TRF capacity or the accumulator, `rngd.cost.point_violations`, makes the point infeasible,
so leaving it out of the minima keeps them below every feasible point). Rows a stage makes
infeasible carry ``la`` or ``dma`` = inf in the tables, which only lifts the bound of structures
without feasible points there. `tests/costmodels/rngd/test_rngd_structure_bound.py`
checks it against the best point of many structures of random problems.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from costmodels.protocol import Choice, SearchSpace
from costmodels.rngd.hardware import RngdHardware
from costmodels.rngd.scoring import L_PARAMS, P_PARAMS, S_PARAMS, Tables, grid_values

Key = tuple[tuple[str, Choice], ...]


@dataclass
class TermBound:
    """Per-stage-1-row latency bounds of one problem, by the packet and lane choices a structure fixes."""

    space: SearchSpace
    tables: Tables
    hw: RngdHardware
    _grids: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    _rows: dict[tuple[Key, Key, bool | None], np.ndarray] = field(default_factory=dict)
    _lanes: dict[tuple[Key, bool | None], dict[str, np.ndarray]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ch = {p.name: p.choices for p in self.space.params}
        self._row_choices = tuple(ch["rows"]) if "rows" in L_PARAMS and "rows" in ch else ()
        for stage, names in (("s", S_PARAMS), ("p", P_PARAMS), ("l", L_PARAMS)):
            self._grids[stage] = grid_values(ch, names)

    def _mask(self, stage: str, fixed: Key) -> np.ndarray:
        g = self._grids[stage]
        out = np.ones(len(next(iter(g.values()))), dtype=bool)
        for name, value in fixed:
            out &= g[name] == value
        return out

    def _lane_minima(self, fl: Key, dbuf: bool | None) -> dict[str, np.ndarray]:
        """Least lane terms ``[s, p]`` over the allowed lane choices that fit the TRF and the accumulator."""
        key = (fl, dbuf)
        if key not in self._lanes and "rows" not in dict(fl) and len(self._row_choices) > 1:
            # the lane choices of each row count are disjoint and cover these: the least over their minima
            parts = [self._lane_minima(tuple(sorted((*fl, ("rows", r)))), dbuf) for r in self._row_choices]
            self._lanes[key] = {k: np.minimum.reduce([q[k] for q in parts]) for k in parts[0]}
        if key not in self._lanes:
            t, hw = self.tables, self.hw
            lm = self._mask("l", fl)
            n_s = len(t.qa["la"]) // t.n_p

            kvw8, og, hld = (t.qa[k].reshape(n_s, t.n_p) for k in ("kvw", "og", "hld"))
            kvw8 = kvw8 / 8
            cap = hw.trf_half_bytes_per_slice if dbuf else hw.trf_bytes_per_slice
            qn = {k: t.qn[k].reshape(n_s, t.n_l) for k in ("rhn", "hn", "tn", "tnhn", "rtnhn", "dma")}
            names = ("tn", "tnhn", "rtnhn", "trhn", "dma")
            least = {k: np.full((n_s, t.n_p), np.inf) for k in names}
            for j in np.flatnonzero(lm):  # one lane choice at a time: [s, p] arrays stay in cache
                col = {k: v[:, j : j + 1] for k, v in qn.items()}
                col["trhn"] = col["tn"] * col["rhn"]
                # trf-capacity and accumulator (and the tables' bad lanes, dma = inf, trf-split among
                # them): a lane choice that breaks them has no feasible point here
                fits = (col["rhn"] * kvw8 <= cap) & (
                    og * np.maximum(col["hn"] * hld, 1) <= hw.accumulator_cells_per_row
                )
                fits &= col["dma"] < np.inf
                for k in names:
                    np.minimum(least[k], np.where(fits, col[k], np.inf), out=least[k])
            self._lanes[key] = {
                **least,
                "kval": t.qn["kval"].reshape(n_s, t.n_l)[:, lm].min(axis=1, initial=np.inf),
            }
        return self._lanes[key]

    def _per_row(self, fp: Key, fl: Key, dbuf: bool | None) -> np.ndarray:
        """``bound(s)`` in cycles of every stage-1 row, for these fixed packet, lane and buffering choices.

        ``dbuf`` False: the CE, fill and DMA stages add up; True: the TRF holds half its bytes.
        """
        key = (fp, fl, dbuf)
        if key not in self._rows:
            t, hw = self.tables, self.hw
            pm = self._mask("p", fp)
            n_s = len(t.qa["la"]) // t.n_p
            lane = {k: v[:, pm] for k, v in self._lane_minima(fl, dbuf).items() if k != "kval"}

            def a(name: str) -> np.ndarray:  # packet terms of the allowed packet choices: [s, p]
                return t.qa[name].reshape(n_s, t.n_p)[:, pm]

            d = float(t.consts.d_tree)
            mac = a("la") * lane["tnhn"] + d
            stream = a("sflb") * np.where(a("nbc") > 0, lane["tnhn"], lane["tn"]) / hw.fetch_bytes_per_cycle
            drain = a("lgog") * lane["rtnhn"] / hw.drain_elements_per_cycle + d
            ce = np.maximum(np.maximum(mac, stream), drain)
            fill = a("hb") * a("kvw") / 8 * lane["trhn"] / hw.trf_fill_bytes_per_cycle
            total = ce + fill + lane["dma"] if dbuf is False else np.maximum(np.maximum(ce, fill), lane["dma"])
            self._rows[key] = total.min(axis=1, initial=np.inf) + self._lane_minima(fl, dbuf)["kval"]
        return self._rows[key]

    def __call__(self, fixed: dict[str, Choice]) -> float:
        """Seconds no feasible point with these fixed choices can beat.

        Raises:
            ValueError: a fixed choice names no parameter of the space, or a value it does not offer.
        """
        choices = {p.name: p.choices for p in self.space.params}
        for name, value in fixed.items():
            if name not in choices:
                raise ValueError(f"no parameter {name!r} in this space: its parameters are {sorted(choices)}")
            if value not in choices[name]:
                raise ValueError(f"{name}={value!r} is not a choice of this space: {choices[name]}")
        fs, fp, fl = (tuple(sorted((k, v) for k, v in fixed.items() if k in names)) for names in
                      (S_PARAMS, P_PARAMS, L_PARAMS))  # fmt: skip
        db = fixed.get("double_buffer")
        rows = self._per_row(fp, fl, None if db is None else bool(db))[self._mask("s", fs)]
        best = float(rows.min()) if len(rows) else math.inf
        return best / self.hw.clock_hz
