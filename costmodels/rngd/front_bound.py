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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from costmodels.protocol import Choice
from costmodels.rngd.bounds import TermBound
from costmodels.rngd.cost import DM_STAGING_BYTES
from costmodels.rngd.scoring import L_PARAMS, P_PARAMS, S_PARAMS

#: the objectives whose cell bounds this module knows
CELL_OBJECTIVES = ("latency", "offchip_bytes", "energy", "footprint")
#: taken off the energy floor: the cost sums the same bytes in another order (float rounding)
FLOAT_MARGIN = 1e-12

Key = tuple[tuple[str, Choice], ...]


@dataclass
class FrontCells:
    """Per-cell bound vectors of one problem's structures (see the module docstring)."""

    term: TermBound
    _least: dict[Key, dict[str, np.ndarray]] = field(default_factory=dict)

    def _view(self, table: np.ndarray, fs: Key, fl: Key) -> np.ndarray:
        """The cells of `table` (``[s, l]``, or ``[s, 1]`` for a per-row one) on the stage-1 rows with the fixed
        choices `fs` and the lanes with `fl`: ``[rows, lanes]`` in grid order, a view (no gather) when one stage-1
        parameter is free."""
        term = self.term
        grid = S_PARAMS if table.shape[-1] == 1 else (*S_PARAMS, *L_PARAMS)
        fixed = dict(fs) | dict(fl)
        shape = tuple(len(term.codes[nm]) for nm in grid)
        at = tuple(term.codes[nm][fixed[nm]] if nm in fixed else slice(None) for nm in grid)
        cells = table.reshape(shape if table.shape[-1] != 1 else (*shape, 1))[at]
        rows = math.prod(cells.shape[: sum(nm not in fixed for nm in S_PARAMS)])
        return cells.reshape(rows, -1)

    def _cell_lanes(self, name: str, fs: Key, fl: Key) -> np.ndarray:
        """The lane term `name` of the cells ``[s, l]`` of the rows with `fs` and the lanes with `fl`."""
        return self._view(self.term.tables.qn[name], fs, fl)

    def _cell_packets(self, fp: Key, fs: Key, fl: Key) -> dict[str, np.ndarray]:
        """`_least_packets` on the rows with `fs`: ``[s, 1]``, beside the cells' lane terms."""
        return {k: self._view(v, fs, fl) for k, v in self._least_packets(fp).items()}

    def _least_packets(self, fp: Key) -> dict[str, np.ndarray]:
        """Each packet term's least value over the allowed packet choices, per stage-1 row: ``[s, 1]``."""
        if fp not in self._least:
            t = self.term.tables
            n_s = t.n_s
            pm = self.term._mask("p", fp)

            def a(name: str) -> np.ndarray:  # packet terms of the allowed packet choices: [s, p]
                return np.asarray(t.qa[name], dtype=float).reshape(n_s, t.n_p)[:, pm]

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

    def _cell_cycles(self, fp: Key, fs: Key, fl: Key, dbuf: bool | None) -> np.ndarray:
        """Latency bound (cycles) of the cells ``[s, l]`` of the rows with `fs` and the lanes with `fl`."""
        t, hw = self.term.tables, self.term.hw
        pk = self._cell_packets(fp, fs, fl)

        def n(name: str) -> np.ndarray:
            return self._cell_lanes(name, fs, fl)

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

    def __call__(self, fixed: dict[str, Choice], objectives: tuple[str, ...]) -> np.ndarray | None:
        """The cells' bound vectors (cells x objectives, in `objectives` order), or None for other objectives."""
        if not objectives or any(o not in CELL_OBJECTIVES for o in objectives):
            return None
        fs, fp, fl = (tuple(sorted((k, v) for k, v in fixed.items() if k in names)) for names in
                      (S_PARAMS, P_PARAMS, L_PARAMS))  # fmt: skip
        db = fixed.get("double_buffer")
        dbuf = None if db is None else bool(db)
        t = self.term.tables
        row = self._view(self.term.per_row(fp, fl, dbuf)[:, None], fs, ())  # the stage-1 row's bound (TermBound)
        offchip = self._view(np.asarray(t.qn["offchip"], dtype=float), fs, fl)
        cols = {"offchip_bytes": offchip}
        if "latency" in objectives:
            cols["latency"] = np.maximum(row, self._cell_cycles(fp, fs, fl, dbuf)) / self.term.hw.clock_hz
        if "energy" in objectives:
            cols["energy"] = self._cell_energy(fp, fs, fl, offchip)
        if "footprint" in objectives:
            cols["footprint"] = self._cell_footprint(fp, fs, fl)
        return np.stack([cols[o].ravel() for o in objectives], axis=1)

    def _cell_energy(self, fp: Key, fs: Key, fl: Key, offchip: np.ndarray) -> np.ndarray:
        """Energy (pJ) no point of the cells ``[s, l]`` beats: `costmodels.energy`'s sum over `rngd.cost.combine`'s
        bytes per level with each level at its floor (pJ per byte and bytes never negative).

        HBM: the cell's exact bytes. DM: ``(stream_bytes + c_trf x fill rate) x slices``, the streamed
        packets at least ``min(sflb_reused x tnhn, sflb_fetched x tn)`` (as in the latency bound) and the
        TRF loads ``hb x kvw / 8 x tn x rhn`` at the least ``hb x kvw``; TRF: ``c_mac x rows x pelw / 8 x
        slices`` with ``c_mac = la x tnhn`` at the least ``la x pelw``; each less `FLOAT_MARGIN`.
        """
        t = self.term.tables
        pk = self._cell_packets(fp, fs, fl)

        def n(name: str) -> np.ndarray:
            return self._cell_lanes(name, fs, fl)

        tn, tnhn, slices = n("tn"), n("tnhn"), n("slices")
        with np.errstate(invalid="ignore"):  # inf * 0 cannot occur (lane terms >= 1); nan would only score more
            stream = np.minimum(pk["sflb_reused"] * tnhn, pk["sflb_fetched"] * tn)
            loads = pk["hbkvw"] / 8 * tn * n("rhn")
            dm = (stream + loads) * slices
            trf = pk["la_pelw"] * tnhn * n("rows") / 8 * slices
            energy = t.energy.total({"hbm": offchip, "dm": dm, "trf": trf})
        return np.asarray(energy, dtype=float) * (1 - FLOAT_MARGIN)

    def _cell_footprint(self, fp: Key, fs: Key, fl: Key) -> np.ndarray:
        """On-chip bytes no point of the cells ``[s, l]`` beats: `rngd.cost.combine`'s ``fmax(share_r, 2 x trf_tile
        + DM staging + wpen)`` with ``trf_tile = rhn x kvw / 8`` at the least ``kvw`` of the allowed packets (the
        other terms are the cell's own)."""
        kvw = self._view(self._least_packets(fp)["kvw"], fs, fl)
        working = 2 * (self._cell_lanes("rhn", fs, fl) * kvw / 8) + DM_STAGING_BYTES
        share, pen = self._cell_lanes("share_r", fs, fl), self._cell_lanes("wpen", fs, fl)
        return np.asarray(np.fmax(share, working + pen), dtype=float)

    def cell_of_points(self, fixed: dict[str, Choice], codes: dict[str, np.ndarray]) -> np.ndarray:
        """Each point's row in `__call__`'s cells: its free stage-1 and lane choices' codes, C order (as `_view`)."""
        free = [nm for nm in (*S_PARAMS, *L_PARAMS) if nm not in fixed]
        if not free:
            return np.zeros(len(next(iter(codes.values()))), dtype=np.intp)
        sizes = tuple(len(self.term.codes[nm]) for nm in free)
        return np.ravel_multi_index(tuple(np.asarray(codes[nm], dtype=np.intp) for nm in free), sizes)
