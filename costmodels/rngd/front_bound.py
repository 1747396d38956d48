"""Bounds of several objectives over the cells of an RNGD structure, for several-objective searches (issue #12).

A structure (some choices fixed, `mapper.bounds`) is cut into *cells*: one per stage-1 row ``s``
(clusters, cluster_role, slice_grid, slice_role, shift) and lane choice ``l`` (rows, trf_split) it
allows. `FrontCells` gives each cell a vector no feasible point of the cell beats on any objective:

- ``offchip_bytes``: the cell's exact HBM bytes, ``qn["offchip"][s, l]`` of the scorer's tables:
  `rngd.cost.combine` passes it through to every point of the cell, whatever its packet choices.
- ``latency``: the larger of two admissible bounds. The row's bound `rngd.bounds.TermBound`
  (least over the allowed packet and lane choices, `TermBound.per_row`), and a bound of the cell
  itself built like it with the packet terms at their least over the allowed packet choices ``p``
  taken one by one: each stage term is a packet term times a lane term (positive factors), so
  ``min_p a(s, p) * n(s, l)`` is below the term of every point of the cell, and a max or sum of
  such minima is below the max or sum of the point's terms (`TermBound`'s admissibility argument,
  with ``x'`` the cell's own lane term). A cell where even the least packet terms break the TRF
  capacity or the accumulator has no feasible point (bound inf), as has a cell of an infeasible
  stage row. ``kval`` is the cell's own (the tail is at least it).
- ``energy``: the energy model's sum over the cell's bytes per level, HBM exact and DM and TRF at
  their floors over the allowed packet choices (`FrontCells._cell_energy`);
- ``footprint``: the cost's on-chip bytes with the TRF tile at the least weight width of the
  allowed packet choices (`FrontCells._cell_footprint`).

So every feasible point of the structure is no better, on each objective, than its own cell's
vector, and a Pareto front that dominates every cell's vector dominates (or equals) every point
of the structure: the mapper bounds the structure out (`mapper.bounds.FrontBounds`). Other
objectives: no cells (None), the mapper's per-structure vector then holds. Checked against the
points of many structures in ``tests/mapper/test_mapper_front_cells.py``.

*Screened* against a front (`FrontCells.screened`, `mapper.bounds.FrontCellScreened`): each
stage-1 row's cells first get one *row vector* per lane group, the same formulas with every lane term
at its least over the group's lanes (a group: the structure's allowed lanes with every free lane
parameter but the last fixed, `FrontCells._lane_groups`; one group when at most one is free). Every
formula above grows with each lane term (sums, maxima and
products of non-negative packet and lane terms; the TRF and accumulator tests fail at the least
``rhn`` or ``hn`` only where they fail at every lane), so a row vector is no worse than any of its
cells' vectors on every objective. Where the front dominates a row vector it dominates each of its
cells' vectors too, and those cells keep the row vector (still below their points); the cells of the
other rows are computed as above. A dominance test against that front (or a later one, which
dominates it) then has the outcome of the cells' own, at the price of rows rather than cells for the
dominated rows: a row's cells in a group are its cells over that group's lanes (up to 11). Which rows
are the cells' own comes with them, so the mapper tests only those (the others are dominated already). The row
vectors of every stage-1 row are kept per fixed packet, lane and buffering choices (`KEPT_ROW_BYTES`),
and so is the last structure's row test against a front (the mapper asks `dominated`, then `screened`
with the same front) and the cells of the last pattern of read-only point columns (every structure's
sub-space shares one: `cell_of_points`).
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from costmodels.dominance import dominated_rows
from costmodels.protocol import Choice
from costmodels.rngd.bounds import TermBound
from costmodels.rngd.cost import DM_STAGING_BYTES
from costmodels.rngd.scoring import L_PARAMS, P_PARAMS, S_PARAMS

#: the objectives whose cell bounds this module knows
CELL_OBJECTIVES = ("latency", "offchip_bytes", "energy", "footprint")
#: taken off the energy floor: the cost sums the same bytes in another order (float rounding)
FLOAT_MARGIN = 1e-12

#: bytes of row vectors kept (every stage-1 row's, per fixed packet, lane and buffering choices)
KEPT_ROW_BYTES = 32 << 20

Key = tuple[tuple[str, Choice], ...]
#: the lane terms the cells' formulas read
LANE_TERMS = ("tn", "tnhn", "rtnhn", "rhn", "dma", "kval", "hn", "offchip", "slices", "rows", "share_r", "wpen")
Lanes = Callable[[str], np.ndarray]  # a lane term's values: [rows, lanes], or [rows, 1] at their least


@dataclass
class FrontCells:
    """Per-cell bound vectors of one problem's structures (see the module docstring)."""

    term: TermBound
    _least: dict[Key, dict[str, np.ndarray]] = field(default_factory=dict)
    _index: dict[tuple[str, Key], np.ndarray] = field(default_factory=dict)
    _lane_least: dict[Key, dict[str, np.ndarray]] = field(default_factory=dict)
    _row_vectors: OrderedDict[tuple[object, ...], np.ndarray] = field(default_factory=OrderedDict)
    # the last structure's row tests: (structure and objectives, front, which row vectors it dominates per lane group)
    _last: tuple[tuple[object, ...], np.ndarray, dict[Key, np.ndarray]] | None = None
    # the last points placed in cells: (free parameters, their code columns) and the points' cells
    _placed: tuple[tuple[str, ...], tuple[np.ndarray, ...], np.ndarray] | None = None

    def __call__(self, fixed: dict[str, Choice], objectives: tuple[str, ...]) -> np.ndarray | None:
        """The cells' bound vectors (cells x objectives, in `objectives` order), or None for other objectives.

        Cells are numbered in C order over the free stage-1 parameters, then the free lane parameters.
        """
        got = self.screened(fixed, objectives, None)
        return None if got is None else got[0]

    def screened(
        self, fixed: dict[str, Choice], objectives: tuple[str, ...], front: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """`__call__`'s rows, except that the cells of a stage-1 row whose row vector `front` dominates hold that
        row vector (see the module docstring); `front` None or empty: `__call__`'s rows. Taken a lane group at a
        time (`_lane_groups`): each group's row vectors take the least over its own lanes. Beside the rows, which
        of them are the cells' own (False: a row vector `front` dominates)."""
        if not objectives or any(o not in CELL_OBJECTIVES for o in objectives):
            return None
        fs, fp, fl, dbuf = self._keys(fixed)
        rows = self._where(S_PARAMS, fs)
        parts = [self._screened_group(fixed, rows, fp, g, dbuf, objectives, front) for g in self._lane_groups(fl)]
        if len(parts) == 1:
            cells, own = parts[0]
        else:
            cells, own = np.concatenate([c for c, _ in parts], axis=1), np.concatenate([o for _, o in parts], axis=1)
        return cells.reshape(-1, len(objectives)), own.reshape(-1)

    def _screened_group(
        self,
        fixed: dict[str, Choice],
        rows: np.ndarray,
        fp: Key,
        fl: Key,
        dbuf: bool | None,
        objectives: tuple[str, ...],
        front: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """`screened`'s cells of the stage-1 rows `rows` and the lanes of the lane group `fl`: ``[rows, lanes,
        objectives]``, and which are the cells' own: ``[rows, lanes]``."""
        lanes = self._where(L_PARAMS, fl)
        live: np.ndarray | slice = slice(None)
        own = np.ones((len(rows), len(lanes)), dtype=bool)
        if front is not None and len(front):
            coarse = self._row_vectors_of(fp, fl, dbuf, objectives)[rows]
            kept = ~self._rows_dominated(fixed, objectives, fl, coarse, front)
            own &= kept[:, None]
            live = np.flatnonzero(kept)
            out = np.repeat(coarse, len(lanes), axis=0).reshape(len(rows), len(lanes), len(objectives))
            if not live.size:
                return out, own
        else:
            out = np.empty((len(rows), len(lanes), len(objectives)))
        s = rows[live]
        qn, n_l = self.term.tables.qn, self.term.tables.n_l
        at = (s[:, None] * n_l + lanes[None, :]).reshape(-1)  # the cells' flat positions in the [s, l] tables
        gathered: dict[str, np.ndarray] = {}

        def n(name: str) -> np.ndarray:  # the cells' lane term: [rows, lanes]
            if name not in gathered:
                gathered[name] = np.ravel(qn[name]).take(at).reshape(len(s), len(lanes))
            return gathered[name]

        pk = {k: v[s] for k, v in self._least_packets(fp).items()}
        row = self.term.per_row(fp, fl, dbuf)[s, None]  # the stage-1 row's bound (TermBound)
        out[live] = self._bounds(pk, row, n, dbuf, objectives)
        return out, own

    def dominated(self, fixed: dict[str, Choice], objectives: tuple[str, ...], front: np.ndarray) -> bool:
        """True when `front` dominates every row vector of every lane group of the structure `fixed`, so every one
        of its cells; False also for objectives without cells."""
        if not len(front) or not objectives or any(o not in CELL_OBJECTIVES for o in objectives):
            return False
        fs, fp, fl, dbuf = self._keys(fixed)
        at = self._where(S_PARAMS, fs)
        return all(
            self._rows_dominated(fixed, objectives, g, self._row_vectors_of(fp, g, dbuf, objectives)[at], front).all()
            for g in self._lane_groups(fl)
        )

    def _lane_groups(self, fl: Key) -> list[Key]:
        """The structure's lanes (its fixed lane choices `fl`) as groups, each a run of its cells' lane numbering:
        every free lane parameter but the last fixed in turn, in C order. A group's row vectors take the least
        over its own lanes only: a floor of its cells (the module docstring's argument, over fewer lanes), and
        tighter than one over every lane of the structure, so a structure whose sub-space spans several
        ``rows`` choices is screened as tightly as one per choice."""
        chosen = dict(fl)
        free = [nm for nm in L_PARAMS if nm not in chosen]
        if len(free) < 2:
            return [fl]
        codes = self.term.codes
        values = [sorted(codes[nm], key=codes[nm].__getitem__) for nm in free[:-1]]
        return [tuple(sorted((*fl, *zip(free[:-1], vals, strict=True)))) for vals in itertools.product(*values)]

    def _rows_dominated(
        self, fixed: dict[str, Choice], objectives: tuple[str, ...], fl: Key, rows: np.ndarray, front: np.ndarray
    ) -> np.ndarray:
        """Which of the row vectors `rows` of the structure's lane group `fl` `front` dominates; the answers for the
        last structure and front are kept, so `screened` right after `dominated`, with the same front object,
        does not test the rows again."""
        key = (tuple(sorted(fixed.items())), objectives)
        last = self._last
        if last is None or last[0] != key or last[1] is not front:
            last = self._last = (key, front, {})
        if fl not in last[2]:
            last[2][fl] = dominated_rows(rows, front)
        return last[2][fl]

    @staticmethod
    def _keys(fixed: dict[str, Choice]) -> tuple[Key, Key, Key, bool | None]:
        """The structure's fixed stage-1, packet and lane choices, and its buffering choice (None: free)."""
        fs, fp, fl = (tuple(sorted((k, v) for k, v in fixed.items() if k in names)) for names in
                      (S_PARAMS, P_PARAMS, L_PARAMS))  # fmt: skip
        db = fixed.get("double_buffer")
        return fs, fp, fl, None if db is None else bool(db)

    def _where(self, names: tuple[str, ...], fixed: Key) -> np.ndarray:
        """The rows of the grid of `names` (the stage-1 or the lane parameters) that agree with `fixed`, in C order
        over the free ones: how the cells are numbered."""
        key = (names[0], fixed)
        if key not in self._index:
            codes, chosen = self.term.codes, dict(fixed)
            shape = tuple(len(codes[nm]) for nm in names)
            at = tuple(codes[nm][chosen[nm]] if nm in chosen else slice(None) for nm in names)
            self._index[key] = np.arange(math.prod(shape)).reshape(shape)[at].reshape(-1)
        return self._index[key]

    def _lanes_least(self, fl: Key) -> dict[str, np.ndarray]:
        """Each lane term's least over the lanes with `fl`, per stage-1 row: ``[s, 1]``."""
        if fl not in self._lane_least:
            t, lanes = self.term.tables, self._where(L_PARAMS, fl)
            self._lane_least[fl] = {
                k: t.qn[k].reshape(t.n_s, t.n_l)[:, lanes].min(axis=1, keepdims=True) for k in LANE_TERMS
            }
        return self._lane_least[fl]

    def _row_vectors_of(self, fp: Key, fl: Key, dbuf: bool | None, objectives: tuple[str, ...]) -> np.ndarray:
        """Every stage-1 row's row vector (``[s, objectives]``) for these fixed packet, lane and buffering choices."""
        key = (fp, fl, dbuf, objectives)
        if key in self._row_vectors:
            self._row_vectors.move_to_end(key)
            return self._row_vectors[key]
        least = self._lanes_least(fl)
        row = self.term.per_row(fp, fl, dbuf)[:, None]
        vectors = self._bounds(self._least_packets(fp), row, least.__getitem__, dbuf, objectives)[:, 0, :]
        self._row_vectors[key] = vectors
        while sum(v.nbytes for v in self._row_vectors.values()) > KEPT_ROW_BYTES and len(self._row_vectors) > 1:
            self._row_vectors.popitem(last=False)
        return vectors

    def _least_packets(self, fp: Key) -> dict[str, np.ndarray]:
        """Each packet term's least value over the allowed packet choices, per stage-1 row: ``[s, 1]``."""
        if fp not in self._least:
            t, codes, chosen = self.term.tables, self.term.codes, dict(fp)
            shape = (t.n_s, *(len(codes[nm]) for nm in P_PARAMS))
            at = (slice(None), *(codes[nm][chosen[nm]] if nm in chosen else slice(None) for nm in P_PARAMS))

            def a(name: str) -> np.ndarray:  # packet terms of the allowed packet choices: [s, p]
                return np.asarray(t.qa[name]).reshape(shape)[at].reshape(t.n_s, -1).astype(float)

            def least(v: np.ndarray) -> np.ndarray:
                return v.min(axis=1, initial=np.inf)[:, None]

            nbc = a("nbc") > 0
            self._least[fp] = {
                "la": least(a("la")),
                "sflb_reused": least(np.where(nbc, a("sflb"), np.inf)),  # packets broadcast over the N groups
                "sflb_fetched": least(np.where(nbc, np.inf, a("sflb"))),
                "lgog": least(a("lgog")),
                "hbkvw": least(a("hb") * a("kvw")),
                "kvw": least(a("kvw")),
                "og": least(a("og")),
                "hld": least(a("hld")),
                "la_pelw": least(a("la") * a("pelw")),
            }
        return self._least[fp]

    def _bounds(
        self, pk: dict[str, np.ndarray], row: np.ndarray, n: Lanes, dbuf: bool | None, objectives: tuple[str, ...]
    ) -> np.ndarray:
        """Bound vectors ``[rows, lanes, objectives]`` of some stage-1 rows: their packet minima `pk` and row bounds
        `row` (``[rows, 1]``, cycles) beside their lane terms `n` (or each lane term's least: one lane)."""
        cols: dict[str, np.ndarray] = {}
        if "offchip_bytes" in objectives:
            cols["offchip_bytes"] = n("offchip")
        if "latency" in objectives:
            cols["latency"] = np.maximum(row, self._cycles(pk, n, dbuf)) / self.term.hw.clock_hz
        if "energy" in objectives:
            cols["energy"] = self._energy(pk, n, n("offchip"))
        if "footprint" in objectives:
            cols["footprint"] = self._footprint(pk, n)
        shape = np.broadcast_shapes(*(np.shape(v) for v in cols.values()))
        return np.stack([np.broadcast_to(cols[o], shape) for o in objectives], axis=-1).astype(float, copy=False)

    def _cycles(self, pk: dict[str, np.ndarray], n: Lanes, dbuf: bool | None) -> np.ndarray:
        """Latency bound (cycles) of the cells (`_bounds`' arguments)."""
        t, hw = self.term.tables, self.term.hw
        d = float(t.consts.d_tree)
        tn, tnhn = n("tn"), n("tnhn")
        with np.errstate(invalid="ignore"):  # inf * 0 cannot occur (lane terms >= 1); nan would only score more
            mac = pk["la"] * tnhn + d
            stream = np.minimum(pk["sflb_reused"] * tnhn, pk["sflb_fetched"] * tn) / hw.fetch_bytes_per_cycle
            drain = pk["lgog"] * n("rtnhn") / hw.drain_elements_per_cycle + d
            ce = np.maximum(np.maximum(mac, stream), drain)
            rhn = n("rhn")
            fill = pk["hbkvw"] / 8 * tn * rhn / hw.trf_fill_bytes_per_cycle
            dma = n("dma")
            total = ce + fill + dma if dbuf is False else np.maximum(np.maximum(ce, fill), dma)
            cap = hw.trf_half_bytes_per_slice if dbuf else hw.trf_bytes_per_slice
            fits = (rhn * pk["kvw"] / 8 <= cap) & (
                pk["og"] * np.maximum(n("hn") * pk["hld"], 1) <= hw.accumulator_cells_per_row
            )  # even the least packet terms break the TRF capacity or the accumulator: no feasible point
            return np.where(fits, total, np.inf) + n("kval")

    def _energy(self, pk: dict[str, np.ndarray], n: Lanes, offchip: np.ndarray) -> np.ndarray:
        """Energy (pJ) no point of the cells beats: `costmodels.energy`'s sum over `rngd.cost.combine`'s bytes per
        level with each level at its floor (pJ per byte and bytes never negative).

        HBM: the cell's exact bytes. DM: ``(stream_bytes + c_trf x fill rate) x slices``, the streamed
        packets at least ``min(sflb_reused x tnhn, sflb_fetched x tn)`` (as in the latency bound) and the
        TRF loads ``hb x kvw / 8 x tn x rhn`` at the least ``hb x kvw``; TRF: ``c_mac x rows x pelw / 8 x
        slices`` with ``c_mac = la x tnhn`` at the least ``la x pelw``; each less `FLOAT_MARGIN`.
        """
        t = self.term.tables
        tn, tnhn, slices = n("tn"), n("tnhn"), n("slices")
        with np.errstate(invalid="ignore"):  # inf * 0 cannot occur (lane terms >= 1); nan would only score more
            stream = np.minimum(pk["sflb_reused"] * tnhn, pk["sflb_fetched"] * tn)
            loads = pk["hbkvw"] / 8 * tn * n("rhn")
            dm = (stream + loads) * slices
            trf = pk["la_pelw"] * tnhn * n("rows") / 8 * slices
            energy = t.energy.total({"hbm": offchip, "dm": dm, "trf": trf})
        return np.asarray(energy, dtype=float) * (1 - FLOAT_MARGIN)

    def _footprint(self, pk: dict[str, np.ndarray], n: Lanes) -> np.ndarray:
        """On-chip bytes no point of the cells beats: `rngd.cost.combine`'s ``fmax(share_r, 2 x trf_tile + DM staging
        + wpen)`` with ``trf_tile = rhn x kvw / 8`` at the least ``kvw`` of the allowed packets (the other terms are
        the cell's own)."""
        working = 2 * (n("rhn") * pk["kvw"] / 8) + DM_STAGING_BYTES
        return np.asarray(np.fmax(n("share_r"), working + n("wpen")), dtype=float)

    def cell_of_points(self, fixed: dict[str, Choice], codes: dict[str, np.ndarray]) -> np.ndarray:
        """Each point's row in `__call__`'s cells: its free stage-1 and lane choices' codes, C order."""
        free = [nm for nm in (*S_PARAMS, *L_PARAMS) if nm not in fixed]
        if not free:
            return np.zeros(len(next(iter(codes.values()))), dtype=np.intp)
        cols = tuple(codes[nm] for nm in free)
        placed = self._placed  # every structure's sub-space shares one pattern of columns: placed once
        if (
            placed is not None
            and placed[0] == tuple(free)
            and all(a is b for a, b in zip(placed[1], cols, strict=True))
        ):
            return placed[2]
        sizes = tuple(len(self.term.codes[nm]) for nm in free)
        at = np.ravel_multi_index(tuple(np.asarray(c, dtype=np.intp) for c in cols), sizes)
        if not any(np.asarray(c).flags.writeable for c in cols):  # read-only columns cannot change under the key
            at.flags.writeable = False
            self._placed = (tuple(free), cols, at)
        return at
