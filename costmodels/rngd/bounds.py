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
in seconds at the clock; when it leaves the row count free, the least of its bounds with each row
count fixed (every point has one row count), which is never looser than the term-wise minima over
all of them.

Computation: the lane minima are taken one lane choice at a time against two per-cell thresholds
(TRF room, accumulator room), once per distinct stage-1 row; the bound of every (s, p) cell is
computed once per lane and buffering choice, and each set of fixed names reduces it once (the least
over the free parameters' axes of the ``S x P`` grid), so a structure's bound is one look-up.

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

from dataclasses import dataclass, field
from typing import Any

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
    _rows: dict[tuple[Key, bool | None, tuple[str, ...]], np.ndarray] = field(default_factory=dict)
    _cells_kept: dict[tuple[Key, bool | None], np.ndarray] = field(default_factory=dict)
    _lanes: dict[tuple[Key, bool | None], dict[str, np.ndarray]] = field(default_factory=dict)
    _distinct: tuple[np.ndarray, np.ndarray] | None = None

    def __post_init__(self) -> None:
        ch = {p.name: p.choices for p in self.space.params}
        self._row_choices = tuple(ch["rows"])
        for stage, names in (("p", P_PARAMS), ("l", L_PARAMS)):  # (stage-1 rows: by their codes, `_least`)
            self._grids[stage] = grid_values(ch, names)
        #: each choice's code (its index in the parameter's choices), by parameter
        self.codes = {nm: {v: i for i, v in enumerate(ch[nm])} for nm in (*S_PARAMS, *P_PARAMS, *L_PARAMS)}

    def _mask(self, stage: str, fixed: Key) -> np.ndarray:
        g = self._grids[stage]
        out = np.ones(len(next(iter(g.values()))), dtype=bool)
        for name, value in fixed:
            out &= g[name] == value
        return out

    def _distinct_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(first, back): one stage-1 row of each distinct set of lane-minima inputs, and each row's one.

        Rows whose packet terms ``kvw, og, hld`` and lane terms are equal have equal lane minima. Rows are
        grouped by two random projections and each group is checked equal to its first row, element by
        element; if any is not (a collision), every row is its own group.
        """
        if self._distinct is None:
            t = self.tables
            n_s = t.n_s
            parts = [t.qa[k].reshape(n_s, t.n_p) for k in ("kvw", "og", "hld")]
            parts += [t.qn[k].reshape(n_s, t.n_l) for k in ("rhn", "hn", "tn", "tnhn", "rtnhn", "dma")]
            rng = np.random.default_rng(0)
            proj = sum(np.where(np.isfinite(q), q, -1.0) @ rng.random((q.shape[1], 2)) for q in parts)
            _, first, back = np.unique(proj, axis=0, return_index=True, return_inverse=True)
            back = back.reshape(-1)
            if not all(np.array_equal(q[first][back], q) for q in parts):
                first, back = np.arange(n_s), np.arange(n_s)
            self._distinct = (first, back)
        return self._distinct

    def _lane_minima(self, fl: Key, dbuf: bool | None) -> dict[str, np.ndarray]:
        """Least lane terms ``[s, p]`` over the allowed lane choices that fit the TRF and the accumulator."""
        key = (fl, dbuf)
        if key not in self._lanes:
            t, hw = self.tables, self.hw
            lm = self._mask("l", fl)
            n_s = t.n_s
            first, back = self._distinct_rows()  # rows of equal terms share their minima: each computed once
            kvw, og, hld = (t.qa[k].reshape(n_s, t.n_p)[first] for k in ("kvw", "og", "hld"))
            cap = hw.trf_half_bytes_per_slice if dbuf else hw.trf_bytes_per_slice
            acc = hw.accumulator_cells_per_row
            with np.errstate(divide="ignore"):
                # the TRF: rhn * kvw / 8 <= cap, as rhn <= cap / (kvw / 8); the accumulator: og * max(hn * hld,
                # 1) <= acc, with hld 0 or 1, as max(hn, 1) <= acc / og where hld is 1, og <= acc where it is 0.
                # The quotients round monotonically, so a lane that fits is never left out (one that does not
                # may be let in by a rounding: that only lowers the bound)
                trf_room = np.where((hld == 0) & (og > acc), -np.inf, cap / (kvw / 8))
                acc_room = np.where(hld > 0, acc / og, np.inf)
            qn = {k: t.qn[k].reshape(n_s, t.n_l)[first][:, lm] for k in ("rhn", "hn", "tn", "tnhn", "rtnhn", "dma")}
            qn["trhn"] = qn["tn"] * qn["rhn"]
            rhn = np.where(qn["dma"] == np.inf, np.nan, qn["rhn"])  # the tables' bad lanes (dma = inf) never fit
            hn1 = np.maximum(qn["hn"], 1)
            names = ("tn", "tnhn", "rtnhn", "trhn", "dma")
            shape = (len(first), t.n_p)
            least = {k: np.full(shape, np.inf) for k in names}
            fits, room, term = np.empty(shape, dtype=bool), np.empty(shape, dtype=bool), np.empty(shape)
            for j in range(rhn.shape[1]):  # one lane choice at a time: [s, p] arrays stay in cache
                np.less_equal(rhn[:, j : j + 1], trf_room, out=fits)
                np.less_equal(hn1[:, j : j + 1], acc_room, out=room)
                fits &= room
                out = np.where(fits, 0.0, np.inf)  # added to a term: the term where the lane fits, inf elsewhere
                for k in names:
                    np.add(qn[k][:, j : j + 1], out, out=term)
                    np.minimum(least[k], term, out=least[k])
            # kept per distinct row (a few times fewer than the stage-1 rows): expanded to every row on each
            # call (`_cells`, once per key), not kept expanded (8 keys x 5 terms of n_s x n_p, 0.5 GB on a
            # grouped conv's grid)
            self._lanes[key] = {
                **least,
                "kval": t.qn["kval"].reshape(n_s, t.n_l)[:, lm].min(axis=1, initial=np.inf),
            }
        lane = self._lanes[key]
        back = self._distinct_rows()[1]
        return {k: v if k == "kval" else v[back] for k, v in lane.items()}

    def _cells(self, fl: Key, dbuf: bool | None) -> np.ndarray:
        """``bound(s, p)`` in cycles of every stage-1 row ``s`` and packet choice ``p`` (the ``S x P`` grid), for
        these fixed lane and buffering choices: the formula above before its least over ``p``, with ``kval'``.

        ``dbuf`` False: the CE, fill and DMA stages add up; True: the TRF holds half its bytes.
        """
        t, hw = self.tables, self.hw
        n_s = t.n_s
        lane = self._lane_minima(fl, dbuf)

        def a(name: str) -> np.ndarray:  # packet terms: [s, p]
            return t.qa[name].reshape(n_s, t.n_p)

        d = float(t.consts.d_tree)
        mac = a("la") * lane["tnhn"] + d
        stream = a("sflb") * np.where(a("nbc") > 0, lane["tnhn"], lane["tn"]) / hw.fetch_bytes_per_cycle
        drain = a("lgog") * lane["rtnhn"] / hw.drain_elements_per_cycle + d
        ce = np.maximum(np.maximum(mac, stream), drain)
        fill = a("hb") * a("kvw") / 8 * lane["trhn"] / hw.trf_fill_bytes_per_cycle
        total = ce + fill + lane["dma"] if dbuf is False else np.maximum(np.maximum(ce, fill), lane["dma"])
        # kval does not depend on p: added before the least over p, as after (rounding is monotone)
        return total + lane["kval"][:, None]

    def _least(self, fl: Key, dbuf: bool | None, names: tuple[str, ...]) -> np.ndarray:
        """The cells' least over every stage-1 and packet parameter not in `names`, indexed by the codes of
        `names` (in `S_PARAMS` then `P_PARAMS` order): each structure's bound is then one look-up."""
        key = (fl, dbuf, names)
        if key not in self._rows and "rows" not in dict(fl) and len(self._row_choices) > 1:
            # every point has one row count: the least of the bounds with each row count fixed is below it
            # (and no looser than the bound of the lane minima over every row count, a term-wise least)
            parts = [self._least(tuple(sorted((*fl, ("rows", r)))), dbuf, names) for r in self._row_choices]
            self._rows[key] = np.minimum.reduce(parts)
        whole = (*S_PARAMS, *(nm for nm in P_PARAMS if nm in names))
        if key not in self._rows and names != whole:
            # the least per stage-1 row first (kept: `per_row` asks for it, and the grid is not kept), then over
            # the free stage-1 parameters: the same least, taken in two steps
            per_row = self._least(fl, dbuf, whole)
            axes = tuple(i for i, nm in enumerate(whole) if nm not in names)
            self._rows[key] = per_row.min(axis=axes, initial=np.inf)
        if key not in self._rows:
            cells_key = (fl, dbuf)
            if cells_key not in self._cells_kept:
                self._cells_kept.clear()  # one grid kept: a structure order asks for one (fl, dbuf) at a time
                self._cells_kept[cells_key] = self._cells(fl, dbuf)
            grid = (*S_PARAMS, *P_PARAMS)
            shape = tuple(len(self.codes[nm]) for nm in grid)
            free = tuple(i for i, nm in enumerate(grid) if nm not in names)
            self._rows[key] = self._cells_kept[cells_key].reshape(shape).min(axis=free, initial=np.inf)
        return self._rows[key]

    def per_row(self, fp: Key, fl: Key, dbuf: bool | None) -> np.ndarray:
        """``bound(s)`` in cycles of every stage-1 row, for these fixed packet, lane and buffering choices."""
        fixed_p = dict(fp)
        least = self._least(fl, dbuf, (*S_PARAMS, *(nm for nm in P_PARAMS if nm in fixed_p)))
        at: tuple[Any, ...] = (..., *(self.codes[nm][fixed_p[nm]] for nm in P_PARAMS if nm in fixed_p))
        return least[at].reshape(-1)

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
        fl = tuple(sorted((k, v) for k, v in fixed.items() if k in L_PARAMS))
        names = tuple(nm for nm in (*S_PARAMS, *P_PARAMS) if nm in fixed)
        db = fixed.get("double_buffer")
        least = self._least(fl, None if db is None else bool(db), names)
        best = float(least[tuple(self.codes[nm][fixed[nm]] for nm in names)])
        return best / self.hw.clock_hz
