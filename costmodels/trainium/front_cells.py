"""Several objectives' bounds of Trainium's tile structures, cell by cell (issue #12, two objectives).

A tile structure fixes (stationary, tile_stat, tile_mov, tile_k) (`bounds.TILE_PARAMS`); its points differ in
blocks, loop order, accumulator, cores and shard. Its *cells* are its core splits ``(c_b, c_s, c_m)``
(`bounds.split_cells`): every feasible point of the structure splits its cores as one of them, and its latency,
off-chip bytes and energy are at least that cell's floors. Few cores move few bytes slowly and many cores are fast
and duplicate operands, so the structure's least latency and its least bytes sit in different cells; the one
vector of both bounds out no structure whose trade-off the front has not already beaten at its least latency.

`structure_cells` gives one structure's cells (`mapper.bounds.FrontCellBounded`); `cell_blocks` gives every
structure's cells, a stationary choice and a split at a time (`mapper.bounds.FrontCellBlocks`), for a dominance
pass over millions of structures in numpy (screened a chunk at a time, `screen.open_rows`).
Latency (seconds), off-chip bytes, energy (pJ) and footprint (bytes) have cells. With footprint, a structure's
cells (`structure_cells`) are its splits' loop-order and block-size cases (`refetch.footprint_cases`, split by
split), where a point's fetches and footprint are bounded together; the dominance pass (`cell_blocks`) screens
its (tile_stat, tile_mov) groups by the cases (over every tile_k at once) and then prices one cell per split, a
case count cheaper than the cases tile by tile; a later pass, asked about the structures still live only, prices
those case by case (`_live_cases`). With latency beside off-chip bytes or energy, that later pass prices each
split's fine loop-order and block-size cases too (`latency_cased`): the fewest fetches need the largest blocks,
which load the most before anything overlaps, pad the most tiles and, beyond PSUM, accumulate in SBUF.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from functools import lru_cache

import numpy as np

from costmodels.dominance import dominated_rows
from costmodels.protocol import Choice, SearchSpace
from costmodels.trainium.bounds import (
    FLOAT_MARGIN,
    TILE_PARAMS,
    ProblemConsts_of,
    core_splits,
    point_split,
    role_tiles,
    split_cells,
)
from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.nest import roles_of
from costmodels.trainium.repeats import Canonical, repeated_structures
from costmodels.trainium.screen import open_rows
from workload.problem import Problem

#: the objectives the cells bound
CELL_OBJECTIVES = ("latency", "offchip_bytes", "energy", "footprint")


def latency_cased(objectives: tuple[str, ...]) -> bool:
    """Whether a later pass (`_live_cases`) cuts each split into its fine loop-order and block-size cases for
    latency beside off-chip bytes or energy (`bounds.split_cells`' ``latency_cases``): the fewest fetches take
    the largest blocks, the largest first blocks to load, the most padding and, beyond what PSUM holds, SBUF
    accumulation's adds, so one cell per split pairs the least latency with the least bytes, which no point
    has. (With footprint the cases are footprint's.)"""
    return "latency" in objectives and len(objectives) > 1 and "footprint" not in objectives


def _rows(
    hw: TrainiumHardware, latency: np.ndarray, floors: dict[str, np.ndarray], objectives: tuple[str, ...]
) -> np.ndarray:
    """Cell vectors in the order of `objectives`, latency in seconds, each less the float margin."""
    keep = 1 - FLOAT_MARGIN
    cols = {"latency": latency.reshape(-1) * (keep / hw.te_clock_hz)}
    cols |= {k: v.reshape(-1) * keep for k, v in floors.items()}
    return np.stack([cols[o] for o in objectives], axis=-1)


class CellMemo:
    """The cells of whole (stationary, tile_stat, tile_k) groups of structures, kept up to `limit_bytes`
    (oldest out).

    Best-first visits many structures of a few such groups, interleaved (on Llama-7B prefill's
    mlp.gate_proj, tens of visits per group): the cells of a group, every tile_mov at once, cost about
    as much as one structure's (numpy's per-call overhead, not the arrays, is the cost). So a group is
    priced whole once more than `after` of its structures were asked for (`get` says None before: price
    the structure alone), and a group visited once is not priced whole. It also keeps what every visit of
    the problem asks again: the roles' sizes per stationary choice (`sizes`) and each point's number in
    (cores, shard) order for the last code columns asked (`cores_shard`).
    """

    def __init__(self, limit_bytes: int = 64 << 20, after: int = 1) -> None:
        self.limit_bytes, self.after = limit_bytes, after
        self._groups: OrderedDict[tuple[object, ...], dict[tuple[int, int, int], np.ndarray]] = OrderedDict()
        self._asked: Counter[tuple[object, ...]] = Counter()
        self._bytes = 0
        self.sizes: dict[str, dict[str, list[int]]] = {}
        self._columns: tuple[np.ndarray, np.ndarray, int, np.ndarray] | None = None  # arrays held, not ids

    def cores_shard(self, cores: np.ndarray, shard: np.ndarray, shards: int) -> np.ndarray:
        """Each point's number in (cores, shard) C order (a search asks with the same columns every visit)."""
        kept = self._columns
        if kept is not None and kept[0] is cores and kept[1] is shard and kept[2] == shards:
            return kept[3]
        flat = np.asarray(cores, dtype=np.intp) * shards + np.asarray(shard, dtype=np.intp)
        self._columns = (cores, shard, shards, flat)
        return flat

    def get(
        self, key: tuple[object, ...], build: Callable[[], dict[tuple[int, int, int], np.ndarray]]
    ) -> dict[tuple[int, int, int], np.ndarray] | None:
        if key in self._groups:
            self._groups.move_to_end(key)
            return self._groups[key]
        self._asked[key] += 1
        if self._asked[key] <= self.after:
            return None
        group = build()
        size = sum(a.nbytes for a in group.values())
        while self._groups and self._bytes + size > self.limit_bytes:
            _, old = self._groups.popitem(last=False)
            self._bytes -= sum(a.nbytes for a in old.values())
        if size <= self.limit_bytes:
            self._groups[key] = group
            self._bytes += size
        return group


def structure_cells(
    problem: Problem,
    hw: TrainiumHardware,
    space: SearchSpace,
    consts: ProblemConsts_of,
    fixed: dict[str, Choice],
    objectives: tuple[str, ...],
    memo: CellMemo | None = None,
) -> np.ndarray | None:
    """One row per core split of the structure `fixed` (cells x objectives); None: not these objectives.

    `fixed` may fix any of `TILE_PARAMS` (the others range over the space's choices: the cells of
    every structure that agrees with `fixed`). With `memo`, a structure that fixes all four reads its
    rows from its (stationary, tile_stat, tile_k) group's cells once the memo prices that group (the
    same `split_cells` arrays, every tile_mov at once).
    """
    if not objectives or not set(objectives) <= set(CELL_OBJECTIVES):
        return None
    choices = {p.name: p.choices for p in space.params}
    energy, footprint = "energy" in objectives, "footprint" in objectives
    group = None
    if memo is not None and all(n in fixed for n in TILE_PARAMS):
        st, ts, tk = fixed["stationary"], fixed["tile_stat"], fixed["tile_k"]
        group_choices = {**choices, "stationary": (st,), "tile_stat": (ts,), "tile_k": (tk,)}

        def build() -> dict[tuple[int, int, int], np.ndarray]:
            got = split_cells(problem, hw, group_choices, consts, energy=energy, footprint=footprint)
            shape = (-1, len(choices["tile_mov"]), len(objectives))  # (cases, tile_mov, objectives)
            return {split: _rows(hw, lat, floors, objectives).reshape(shape) for _, split, lat, floors in got if floors}

        group = memo.get((st, ts, tk, objectives), build)
    if group is not None:
        at = choices["tile_mov"].index(fixed["tile_mov"])
        none = np.full((next(iter(group.values())).shape[0] if group else 1, len(objectives)), np.inf)
        splits = _splits_of(problem, choices, fixed, memo)
        return np.concatenate([group[split][:, at] if split in group else none for split in splits])
    narrowed = {**choices, **{n: (fixed[n],) for n in TILE_PARAMS if n in fixed}}
    rows = [
        _rows(hw, lat, floors, objectives)
        for _, _, lat, floors in split_cells(problem, hw, narrowed, consts, energy=energy, footprint=footprint)
        if floors is not None
    ]
    if not rows:  # no split can occur: no feasible point
        return np.full((1, len(objectives)), np.inf)
    return np.concatenate(rows)


def cell_blocks(
    problem: Problem,
    hw: TrainiumHardware,
    space: SearchSpace,
    consts: ProblemConsts_of,
    names: tuple[str, ...],
    objectives: tuple[str, ...],
    front: np.ndarray | None = None,
    live: np.ndarray | None = None,
    repeats: np.ndarray | None = None,
) -> Iterator[tuple[int, np.ndarray]] | None:
    """``(first structure, rows)`` per (stationary choice, core split): the cells of a run of structures.

    Structures are numbered in C order over `names`' choices, which must be `TILE_PARAMS` in that
    order (else None, as for objectives without cells); ``rows`` (n x objectives) are the cells of
    structures ``first .. first + n - 1`` for one split, ``inf`` where the split cannot occur. The
    stationary choices take turns, split by split in `bounds.core_splits` order (one core first).

    With `front` (points x objectives), the structures that repeat another point for point (`repeats`) are left
    out (`mapper.bounds.StructureRepeats`) and the others priced as their own sub-space; a split is first
    bounded per (tile_stat, tile_mov) over every tile_k choice at once (`split_cells`' ``k_least``), and only
    the tile_stat choices with a group the front does not dominate are priced tile by tile, one run per
    tile_stat choice (`repeats.Canonical.spread`): the structures of a group the front dominates there have
    every point of that split dominated, so their rows are left out (`mapper.bounds.FrontCellBlocks`). With
    footprint the groups are bounded case by case (`refetch.footprint_cases`: a group is left out when the
    front dominates every case) and the rows priced tile by tile are one per split (without the cases: still
    floors of every point, looser). `repeats`: `repeats.repeated_structures`, flat, when the caller keeps it.

    With `live` too (a mask over the structures: those whose outcome is asked; the rows of the others may be
    left out, `mapper.bounds.FrontCellBlocks`), only tile_stat choices with a live structure are priced, and
    with footprint the live structures are priced case by case after all (`_live_cases`): a later pass,
    over the few structures earlier passes left live, can afford the cases that a first pass over millions
    cannot, and they leave out far more. With latency beside off-chip bytes or energy (`latency_cased`), each
    split's own row screens the live structures first (`_split_screened`), and those it leaves open are priced by
    latency's cases while the cases pay in this pass (`CaseYield`), else by that row.
    """
    if names != TILE_PARAMS or not objectives or not set(objectives) <= set(CELL_OBJECTIVES):
        return None
    choices = {p.name: p.choices for p in space.params}
    per_stat = math.prod(len(choices[n]) for n in TILE_PARAMS[1:])
    energy, footprint = "energy" in objectives, "footprint" in objectives
    cased, yield_ = latency_cased(objectives), CaseYield()
    if front is not None:
        repeats = repeated_structures(problem, choices) if repeats is None else repeats.reshape(-1, per_stat)

    def one(at: int) -> Iterator[tuple[int, np.ndarray]]:
        one_stat = {**choices, "stationary": (choices["stationary"][at],)}
        if front is None:
            for _, _, lat, floors in split_cells(
                problem, hw, one_stat, consts, energy=energy, footprint=footprint, cases=False
            ):
                assert floors is not None
                for rows in _rows(hw, lat, floors, objectives).reshape(-1, per_stat, len(objectives)):  # per case
                    yield at * per_stat, rows
            return
        assert repeats is not None  # the structures that repeat none, in their own coordinates (`Canonical`)
        keep = Canonical.of(~repeats[at], choices, at * per_stat)
        one_stat = keep.narrowed(one_stat)
        n_ts = len(one_stat["tile_stat"])
        asked = None if live is None else keep.mask(live[at * per_stat : (at + 1) * per_stat])  # (every split's)
        for _, split, lat, floors in split_cells(
            problem, hw, one_stat, consts, energy=energy, footprint=footprint, k_least=True
        ):
            assert floors is not None
            groups = yield from open_rows(_rows(hw, lat, floors, objectives), front, at * per_stat)  # ([case,] ts, tm)
            open_groups = np.asarray(groups.reshape(-1, n_ts, len(one_stat["tile_mov"])).any(axis=0))
            if asked is not None:  # (tile_stat, tile_mov, tile_k) of this stationary choice: live and not screened out
                mask = asked & open_groups[:, :, None]
                stats = np.flatnonzero(mask.any(axis=(1, 2)))
                if footprint:
                    for i in stats.tolist():
                        got = _live_cases(problem, hw, one_stat, consts, split, i, mask[i], objectives, front)
                        if got is not None:
                            yield from keep.spread(i, got)
                    continue
                if cased and stats.size:  # the split's own rows first, then its cases where open and while they pay
                    mask, stats, own = _split_screened(
                        problem, hw, one_stat, consts, split, stats, mask, objectives, front
                    )
                    for i in stats.tolist():
                        if yield_.pays():
                            got = _live_cases(problem, hw, one_stat, consts, split, i, mask[i], objectives, front)
                            yield_.count(int(mask[i].sum()), 0 if got is None else int(np.isfinite(got[:, 0]).sum()))
                        else:
                            got = np.where(mask[i].reshape(-1, 1), own[i], np.inf)
                        if got is not None:
                            yield from keep.spread(i, got)
                    continue
            else:
                stats = np.flatnonzero(open_groups.any(axis=1))
            if not stats.size:  # (no rows: an empty block, so that the pass may stop between splits)
                yield at * per_stat, np.zeros((0, len(objectives)))
                continue
            some = {**one_stat, "tile_stat": tuple(one_stat["tile_stat"][i] for i in stats)}
            for _, _, lat, floors in split_cells(
                problem, hw, some, consts, energy=energy, footprint=footprint, cases=False, only=split
            ):
                assert floors is not None
                rows = _rows(hw, lat, floors, objectives).reshape(-1, len(stats), keep.per_tile_stat, len(objectives))
                for case in rows:
                    for i, block in zip(stats.tolist(), case, strict=True):
                        yield from keep.spread(i, block)

    # the stationary choices' splits in turn, fewest cores first: a pass that every structure's fewest-core
    # cell leaves live stops after the first blocks (`mapper.bounds.live_structures`)
    runs = [one(at) for at in range(len(choices["stationary"]))]
    return (block for step in itertools.zip_longest(*runs) for block in step if block is not None)


class CaseYield:
    """Whether a pass's latency cases (`_live_cases`) still pay: they leave out structures the split's own row
    keeps on prefill-shaped GEMMs (most of them), and almost none on others (a 2047x4093x17 fp8 GEMM on trn2:
    2% of 287,834), where they cost more than the visits they save. After `TRIAL` structures priced by
    cases, a pass keeps pricing them only while they have left out at least `LEAST` of those; the rest
    of the pass keeps the split's rows (floors too, only looser). It counts structures, not time: the same
    front gives the same outcome on any machine."""

    TRIAL = 5_000
    LEAST = 0.1

    def __init__(self) -> None:
        self.priced = self.out = 0

    def pays(self) -> bool:
        return self.priced < self.TRIAL or self.out >= self.LEAST * self.priced

    def count(self, priced: int, live: int) -> None:
        self.priced += priced
        self.out += priced - live


def _split_screened(
    problem: Problem,
    hw: TrainiumHardware,
    one_stat: dict[str, tuple[Choice, ...]],
    consts: ProblemConsts_of,
    split: tuple[int, int, int],
    stats: np.ndarray,
    mask: np.ndarray,
    objectives: tuple[str, ...],
    front: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """`mask` (tile_stat, tile_mov, tile_k) less the structures whose one row for `split` (`split_cells` without
    cases: a floor of every point there) `front` dominates, the tile_stat choices (of `stats`) still open (the
    cases, many per split, are priced only for those: `_live_cases`), and those choices' rows (every (tile_mov,
    tile_k), C order)."""
    some = {**one_stat, "tile_stat": tuple(one_stat["tile_stat"][i] for i in stats)}
    mask = mask.copy()
    own: dict[int, np.ndarray] = {}
    for _, _, lat, floors in split_cells(
        problem, hw, some, consts, energy="energy" in objectives, cases=False, only=split
    ):
        assert floors is not None
        rows = _rows(hw, lat, floors, objectives)
        mask[stats] &= ~dominated_rows(rows, front).reshape(mask[stats].shape)
        own = dict(zip(stats.tolist(), rows.reshape(len(stats), -1, len(objectives)), strict=True))
    return mask, stats[mask[stats].any(axis=(1, 2))], own


def _live_cases(
    problem: Problem,
    hw: TrainiumHardware,
    one_stat: dict[str, tuple[Choice, ...]],
    consts: ProblemConsts_of,
    split: tuple[int, int, int],
    stat: int,
    mask: np.ndarray,
    objectives: tuple[str, ...],
    front: np.ndarray,
) -> np.ndarray | None:
    """One tile_stat choice's rows for `split` (every (tile_mov, tile_k), C order), its `mask` structures priced
    case by case (`refetch.footprint_cases`): for each, the first case the front does not dominate, or ``inf``
    when it dominates every case (the structure's cells of this split are then left out, as the contract of
    `mapper.bounds.FrontCellBlocks` allows) or the structure is not in `mask` (its rows are not asked). None when
    no structure is."""
    tms, tks = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if not tms.size:
        return None
    some = {
        **one_stat,
        "tile_stat": (one_stat["tile_stat"][stat],),
        "tile_mov": tuple(one_stat["tile_mov"][j] for j in tms),
        "tile_k": tuple(one_stat["tile_k"][j] for j in tks),
    }
    energy = "energy" in objectives
    n_obj = len(objectives)
    full = np.full((*mask.shape, n_obj), np.inf)
    footprint = "footprint" in objectives
    for _, _, lat, floors in split_cells(
        problem, hw, some, consts, energy=energy, footprint=footprint, latency_cases=not footprint, only=split
    ):
        assert floors is not None
        rows = _rows(hw, lat, floors, objectives).reshape(-1, len(tms), len(tks), n_obj)  # (cases, tile_mov, tile_k)
        open_ = ~dominated_rows(rows.reshape(-1, n_obj), front).reshape(rows.shape[:-1])
        first = np.take_along_axis(rows, open_.argmax(axis=0)[None, :, :, None], axis=0)[0]
        keep = open_.any(axis=0) & mask[np.ix_(tms, tks)]
        full[np.ix_(tms, tks)] = np.where(keep[..., None], first, np.inf)
    return full.reshape(-1, n_obj)


def _role_sizes(problem: Problem, fixed: dict[str, Choice], memo: CellMemo | None = None) -> dict[str, list[int]]:
    """The b, s and m roles' axis sizes under the structure's stationary choice (kept in `memo`, the problem's)."""
    stationary = str(fixed["stationary"])
    if memo is not None and stationary in memo.sizes:
        return memo.sizes[stationary]
    roles = roles_of(problem, stationary)
    sizes = {r: [problem.axes[a] for a in roles.axes[r]] for r in "bsm"}
    if memo is not None:
        memo.sizes[stationary] = sizes
    return sizes


def _splits_of(
    problem: Problem, choices: dict[str, tuple[Choice, ...]], fixed: dict[str, Choice], memo: CellMemo | None = None
) -> list[tuple[int, int, int]]:
    """The core splits of one tile structure in `bounds.core_splits` order: `structure_cells`' rows."""
    sizes = _role_sizes(problem, fixed, memo)
    key = tuple(tuple(sizes[r]) for r in "bsm")
    return list(_splits(key, int(fixed["tile_stat"]), int(fixed["tile_mov"]), max(int(c) for c in choices["cores"])))


@lru_cache(maxsize=1 << 14)
def _splits(
    sizes: tuple[tuple[int, ...], ...], tile_stat: int, tile_mov: int, cores: int
) -> tuple[tuple[int, int, int], ...]:
    """`_splits_of` from what it depends on (the b, s, m roles' sizes, the tiles, the most cores), kept."""
    _, ns = role_tiles(list(sizes[1]), (tile_stat,))
    _, nm = role_tiles(list(sizes[2]), (tile_mov,))
    return tuple(core_splits(cores, math.prod(sizes[0]), int(ns[0]), int(nm[0])))


@lru_cache(maxsize=1 << 14)
def _cell_table(
    sizes: tuple[tuple[int, ...], ...], tile_stat: int, tile_mov: int, cores: tuple[int, ...], shards: tuple[str, ...]
) -> np.ndarray | None:
    """Each (cores, shard) choice's row in `structure_cells` (read-only), kept: `cell_of_points` without its loops."""
    row = {split: i for i, split in enumerate(_splits(sizes, tile_stat, tile_mov, max(cores)))}
    named = dict(zip("bsm", (list(x) for x in sizes), strict=True))
    table = np.empty((len(cores), len(shards)), dtype=np.intp)
    for (i, c), (j, shard) in itertools.product(enumerate(cores), enumerate(shards)):
        split = point_split(named, tile_stat, tile_mov, c, shard)
        if split not in row:  # (cannot happen: a point's split is one of `core_splits`)
            return None
        table[i, j] = row[split]
    table.flags.writeable = False
    return table


def cell_of_points(
    problem: Problem,
    space: SearchSpace,
    fixed: dict[str, Choice],
    codes: dict[str, np.ndarray],
    memo: CellMemo | None = None,
    objectives: tuple[str, ...] = (),
) -> np.ndarray | None:
    """Each point's row in `structure_cells` of the structure `fixed` (its points as code columns).

    A point's cell is its own core split: ``c_r`` the product of role r's chip factors
    (`nest.split_role` with the cores `nest.shard_cores` gives r), fixed by the structure's tiles and
    the point's (cores, shard) choices alone; its row is the split's place in `bounds.core_splits`
    order, as `split_cells` yields them. None when the structure leaves a tile choice free, or with
    ``footprint`` among `objectives` (its cells are then a split's loop-order cases, `refetch.case_footprints`,
    which the code columns do not tell apart without pricing the points). `memo`: the
    problem's `CellMemo`, which keeps what the next structure asks again.
    """
    if any(n not in fixed for n in TILE_PARAMS) or "footprint" in objectives:
        return None
    choices = {p.name: p.choices for p in space.params}
    sizes = _role_sizes(problem, fixed, memo)
    table = _cell_table(
        tuple(tuple(sizes[r]) for r in "bsm"),
        int(fixed["tile_stat"]),
        int(fixed["tile_mov"]),
        tuple(int(c) for c in choices["cores"]),
        tuple(str(x) for x in choices["shard"]),
    )
    if table is None:
        return None
    memo = memo if memo is not None else CellMemo()
    return table.reshape(-1)[memo.cores_shard(codes["cores"], codes["shard"], table.shape[1])]
