"""Tile structures that repeat another one point for point, and a stationary choice's others as a sub-space.

With every tile count offered (`tiles`, rule T1), a tile cap of one role can give the same tile as an earlier cap
under one stationary choice and another tile under the other (the space keeps it: `space.distinct_caps` merges the
caps that repeat under both). Such a structure's points are another structure's, value for value, so a dominance
pass (`front_cells.cell_blocks`) prices only the structures that repeat none.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from costmodels.protocol import Choice
from costmodels.trainium.nest import roles_of, split_inner
from workload.problem import Problem


def repeated_caps(sizes: Sequence[int], caps: Sequence[Choice]) -> np.ndarray:
    """Whether each tile cap of a role gives an earlier cap's tile (`nest.split_inner`): bool per cap, in order."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for cap in caps:
        tile = split_inner(sizes, int(cap))
        out.append(tile in seen)
        seen.add(tile)
    return np.asarray(out, dtype=bool)


def repeated_structures(problem: Problem, choices: dict[str, tuple[Choice, ...]]) -> np.ndarray:
    """Which tile structures repeat another one point for point: bool over the (stationary, tile_stat, tile_mov,
    tile_k) choices of `choices` (C order).

    A structure repeats when one of its tile caps gives, under its stationary choice, the same tile as an earlier
    cap of that role (`repeated_caps`; a role of extent 1 has one tile whatever the cap). Every input of the cost
    (`nest.split_role`: the tile, then the counts split over cores, block and loops; the limits are tested on
    the tile, `cost.tile_violations`) depends on the cap through the tile alone, so each point of the structure
    has every value of the same point (the other choices equal) of the structure with each role's first cap of
    that tile, which repeats nothing. The space keeps such caps because they give another tile under the other
    stationary choice (`space.distinct_caps` merges the caps that repeat under both); on Llama-7B decode's
    mlp.gate_proj (one row) 124 of every 125 structures of one stationary choice repeat.
    """
    out = []
    for st in choices["stationary"]:
        roles = roles_of(problem, str(st))
        rep = {r: repeated_caps([problem.axes[a] for a in roles.axes[r]], choices[n])
               for r, n in (("s", "tile_stat"), ("m", "tile_mov"), ("k", "tile_k"))}  # fmt: skip
        out.append(rep["s"][:, None, None] | rep["m"][None, :, None] | rep["k"][None, None, :])
    return np.stack(out)


#: the least share of a stationary choice's tile_mov choices kept for `Canonical.spread` to give one run per
#: tile_stat choice
WHOLE_RUN = 0.25


class Canonical:
    """One stationary choice's structures that repeat none (`repeated_structures`), as their own sub-space.

    ``ts`` / ``tm`` / ``tk``: the kept tile_stat, tile_mov and tile_k choices (indices into the space's);
    `narrowed` gives their choices, `mask` a whole (tile_stat, tile_mov, tile_k) mask cut to them, and `spread`
    one kept tile_stat choice's rows (kept (tile_mov, tile_k), C order) as ``(first structure, rows)`` runs of the
    whole numbering (`cell_blocks`' blocks), the repeats' rows ``inf`` where a run passes them.
    """

    def __init__(self, ts: np.ndarray, tm: np.ndarray, tk: np.ndarray, n_tm: int, n_tk: int, first: int) -> None:
        self.ts, self.tm, self.tk, self.n_tm, self.n_tk, self.first = ts, tm, tk, n_tm, n_tk, first
        self.per_tile_stat = len(tm) * len(tk)
        self._whole_k = len(tk) == n_tk

    @classmethod
    def of(cls, keep: np.ndarray, choices: dict[str, tuple[Choice, ...]], first: int) -> Canonical:
        """From the (tile_stat, tile_mov, tile_k) mask of the structures kept (a product of one mask per choice; flat
        or in that shape)."""
        keep = keep.reshape(-1, len(choices["tile_mov"]), len(choices["tile_k"]))
        ts, tm, tk = (np.flatnonzero(keep.any(axis=ax)) for ax in ((1, 2), (0, 2), (0, 1)))
        return cls(ts, tm, tk, len(choices["tile_mov"]), len(choices["tile_k"]), first)

    def narrowed(self, choices: dict[str, tuple[Choice, ...]]) -> dict[str, tuple[Choice, ...]]:
        out = dict(choices)
        for name, kept in (("tile_stat", self.ts), ("tile_mov", self.tm), ("tile_k", self.tk)):
            out[name] = tuple(choices[name][i] for i in kept.tolist())
        return out

    def mask(self, whole: np.ndarray) -> np.ndarray:
        """A mask over every (tile_stat, tile_mov, tile_k) of the stationary choice, cut to the kept ones."""
        cut = whole.reshape(-1, self.n_tm, self.n_tk)
        for axis, kept in enumerate((self.ts, self.tm, self.tk)):  # (an axis at a time: far less than `np.ix_`)
            if len(kept) < cut.shape[axis]:
                cut = np.take(cut, kept, axis=axis)
        return cut

    def spread(self, i: int, rows: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """Kept tile_stat choice `i`'s rows as runs of the whole numbering: one run over every (tile_mov, tile_k)
        with the repeats' rows ``inf`` when at least a `WHOLE_RUN` share of its tile_mov choices is kept (one
        dominance test of a longer run costs less than many short ones), else one run per kept tile_mov choice."""
        base = self.first + int(self.ts[i]) * self.n_tm * self.n_tk
        if len(self.tm) == self.n_tm and self._whole_k:
            yield base, rows
            return
        if len(self.tm) >= WHOLE_RUN * self.n_tm:
            full = np.full((self.n_tm, self.n_tk, rows.shape[-1]), np.inf)
            full[np.ix_(self.tm, self.tk)] = rows.reshape(len(self.tm), len(self.tk), -1)
            yield base, full.reshape(-1, rows.shape[-1])
            return
        for j, block in zip(self.tm.tolist(), rows.reshape(len(self.tm), len(self.tk), -1), strict=True):
            if self._whole_k:
                yield base + j * self.n_tk, block
            else:
                full = np.full((self.n_tk, block.shape[-1]), np.inf)
                full[self.tk] = block
                yield base + j * self.n_tk, full
