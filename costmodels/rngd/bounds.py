"""Admissible latency bounds of structures of the RNGD space (issue #12, branch and bound).

The mapper searches a large space by *structures* (some parameters fixed, `mapper.bounds`) and
skips a structure whose bound is not below the best latency found. `TermBound` bounds one from
the batch scorer's stage tables (`rngd.scoring.Tables`): for each stage-1 row ``s`` (clusters,
cluster_role, slices, slice_role, shift) it takes, over the packet choices ``p`` and the lane
choices ``l`` the structure allows, the minima of the terms `rngd.cost.combine` multiplies, and

    bound(s) = max(min_p la * min_l tnhn + D_tree,            compute C_mac (step 2)
                   min_p sflb * min_l tn / fetch_rate,         stream C_stream
                   min_p lgog * min_l rtnhn / drain_rate + D_tree,   drain C_out
                   min_l dma) + min_l kval                      DMA (step 4), K-split tail (step 5)

(hardware-facts.md §1.2). The structure's bound is the least ``bound(s)`` over its stage-1 rows,
in seconds at the clock.

Admissibility: `combine` prices a point at ``c_ce + c_trf + c_dma + tail`` or, double-buffered,
``fill_one + max(c_ce, c_trf - fill_one, c_dma) + tail``; both are at least ``max(c_ce, c_dma) +
tail`` (every term is non-negative). ``c_ce = max(c_mac, c_stream, c_out) + D_tree + last >=``
each of ``c_mac + D_tree``, ``c_stream``, ``c_out + D_tree``; ``c_mac = la * tnhn``, ``c_stream
>= sflb * tn / fetch`` (``max(hn * nbc, 1) >= 1``; shift windows only add), ``c_out = lgog * rtnhn /
drain``; ``tail = kval + kflag * c_out >= kval``. Each product of non-negative terms is at least
the product of their minima over the choices, so ``bound(s)`` is below every point of row ``s``
the structure holds, and the least over its rows is below each of its feasible points. Rows a
stage makes infeasible carry ``la`` or ``dma`` = inf in the tables, which only lifts the bound of
structures without feasible points there. `tests/costmodels/rngd/test_rngd_structure_bound.py`
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
    _rows: dict[tuple[Key, Key], np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ch = {p.name: p.choices for p in self.space.params}
        for stage, names in (("s", S_PARAMS), ("p", P_PARAMS), ("l", L_PARAMS)):
            self._grids[stage] = grid_values(ch, names)

    def _mask(self, stage: str, fixed: Key) -> np.ndarray:
        g = self._grids[stage]
        out = np.ones(len(next(iter(g.values()))), dtype=bool)
        for name, value in fixed:
            out &= g[name] == value
        return out

    def _per_row(self, fp: Key, fl: Key) -> np.ndarray:
        """``bound(s)`` in cycles of every stage-1 row, for these fixed packet and lane choices."""
        key = (fp, fl)
        if key not in self._rows:
            t, hw = self.tables, self.hw
            pm, lm = self._mask("p", fp), self._mask("l", fl)
            n_s = len(t.qa["la"]) // t.n_p

            def lo(table: dict[str, np.ndarray], name: str, width: int, mask: np.ndarray) -> np.ndarray:
                return table[name].reshape(n_s, width)[:, mask].min(axis=1)

            d = float(t.consts.d_tree)
            mac = lo(t.qa, "la", t.n_p, pm) * lo(t.qn, "tnhn", t.n_l, lm) + d
            stream = lo(t.qa, "sflb", t.n_p, pm) * lo(t.qn, "tn", t.n_l, lm) / hw.fetch_bytes_per_cycle
            drain = lo(t.qa, "lgog", t.n_p, pm) * lo(t.qn, "rtnhn", t.n_l, lm) / hw.drain_elements_per_cycle + d
            dma = lo(t.qn, "dma", t.n_l, lm)
            kval = lo(t.qn, "kval", t.n_l, lm)
            self._rows[key] = np.maximum(np.maximum(mac, stream), np.maximum(drain, dma)) + kval
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
        rows = self._per_row(fp, fl)[self._mask("s", fs)]
        best = float(rows.min()) if len(rows) else math.inf
        return best / self.hw.clock_hz
