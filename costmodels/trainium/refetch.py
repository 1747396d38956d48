"""Off-chip floors of Trainium's cells: how often a core must fetch each operand, SBUF and PSUM capacities
included (issue #12, two objectives).

`bounds.split_cells` bounds a cell (a tile structure on one core split) by a core's share of each
operand, ``stat`` and ``mov`` bytes, each fetched at least once. A point fetches more: `cost.fetches`
counts a block of an operand again whenever a loop it does not depend on advances outside its innermost
own loop. `refetch_cases` lists the ways a point can avoid that, each with what it then needs to hold at
once, and `refetch_floors` prices the cheapest. The per-core block trips are ``hs >= ceil(Ns / bs)`` and
``hm >= ceil(Nm / bm)`` (``Ns``, ``Nm`` a core's stationary and moving tiles: `nest.split_role` gives
``block x trips >= tiles`` per axis), ``bs``, ``bm`` at most their block caps.

The stationary operand depends on the s, k and b loops, the moving one on m, k and b, and the open
output blocks (`cost.live_output_blocks`) are the output loops inside the outermost k loop:

- with one k block (``hk = 1``; only when the k tiles ``Nk`` fit one block, ``Nk <= block_k`` cap): no
  output block stays open, and whichever of s and m is outside the other refetches the inner loop's
  partner: ``stat x hm`` or ``mov x hs``. A block holds every k tile then: SBUF holds ``2 bk kslots
  (bs ts s_stat + bm tm s_mov)`` bytes per partition (`cost.traffic`'s ``inputs_pp``, ``kslots =
  ceil(tk / pe_rows)``, ``bk >= Nk``), which caps ``bs`` and ``bm``;
- with several k blocks, the k loop is an own loop of both operands: if the m loop is outside it,
  the stationary fetches take the m trips (``stat x hm``); if inside, the output stays open across
  the m blocks (``live >= bs bm hm >= bs Nm`` output tiles). Likewise for s: ``mov x hs`` or ``live >=
  bm Ns``, and ``live >= Ns Nm`` when both are inside. Open output tiles take ``tm`` elements per
  partition each in SBUF at the accumulator's bytes (4 for an SBUF fp32 accumulator across k blocks,
  the output's for PSUM) and, with PSUM accumulation, ``ceil(tm 4 / bank)`` banks each
  (`cost.accumulation`), which caps the other block.

A case that caps one role's block takes the other's at 1 tile (``bs = 1`` where ``bm`` is capped): the
capacities grow with both, so that is the largest block a point of the case can have. When both operands
are refetched, a block's own ``bs x bm`` output tiles are open (across its k blocks), which couples the
two: the case is split by the stationary block's size into ``[1, 2), [2, 4), ...`` tiles, each with its
least refetches of the moving share (``bs`` at the range's least) and of the stationary share (``bs`` at
its most). A case no point can meet (its block cap below 1) is ``inf``. The least over the cases is a
floor of every point of the cell (the DMA's too, from the same bytes).
`tests/costmodels/trainium/test_trainium_front_cells.py` checks it against every point of random
structures on parts with a small SBUF, where the capacities bind, and on the presets.

For the footprint objective, `footprint_cases` keeps the cases apart, cut by block size, each with the
bytes per partition its points hold at least: the fewest fetches and the least footprint sit in
different cases, and a least over the cases would pair them (the same tests, with footprint).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from costmodels.trainium.cost import ProblemConsts
from costmodels.trainium.hardware import TrainiumHardware

F = np.ndarray
#: arrays up to this size are priced case by case without first comparing the cases
_FEW = 256


@dataclass(frozen=True)
class CoreShare:
    """One core's share of a cell, arrays over (tile_stat, tile_mov, tile_k) choices that broadcast.

    ``ns`` / ``nm`` / ``nk``: stationary, moving and k tiles of the core; ``es`` / ``em`` / ``ek``:
    elements per tile; ``stat`` / ``mov``: bytes of the core's share of each operand, fetched once.
    ``k_least``: ``nk`` and ``ek`` are the least over the tile_k choices (a floor of every choice): a
    k axis of one entry does not say whether some choice has several k tiles, so the several-k-blocks
    cases stay open.
    """

    ns: F
    nm: F
    nk: F
    es: F
    em: F
    ek: F
    stat: F
    mov: F
    k_least: bool = False


def _most(room: F | float, per: F | float, cap: int) -> F:
    """Most blocks of `per` bytes in `room` bytes, at most `cap` (below 1: none fit)."""
    return np.minimum(np.floor(room / per), cap)


def _times(tiles: F, most: F) -> F:
    """Fetches of an operand: one per block of the other role's `tiles` in blocks of at most `most` (``inf``: none)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(most >= 1, np.ceil(tiles / np.maximum(most, 1)), np.inf)


def _brackets(cap: int, fine: bool = False, tiles: F | None = None) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges of block sizes 1 .. `cap` by powers of two: ``(1, 2), (2, 4), ..., (.., cap + 1)``;
    `fine`: every block size its own range, or, where the role has one tile count ``N`` (`tiles`), the runs of
    block sizes with one count of blocks ``ceil(N / b)``: a run's blocks fetch the other operand as often,
    and its smallest holds, loads and pads the least, so its floors are each block's own there."""
    if fine:
        counts = np.unique(np.asarray(tiles)) if tiles is not None else np.empty(0)
        if len(counts) != 1:
            return [(b, b + 1) for b in range(1, cap + 1)]
        n = float(counts[0])
        starts = sorted({math.ceil(n / math.ceil(n / b)) for b in range(1, cap + 1)})
        return list(zip(starts, [*starts[1:], cap + 1], strict=True))
    out, lo = [], 1
    while lo <= cap:
        out.append((lo, min(2 * lo, cap + 1)))
        lo *= 2
    return out


def _needed(cases: list[tuple[F, F]]) -> list[tuple[F, F]]:
    """`cases` less those no better than another case at every entry (the first of equals kept), and ``inf`` ones."""

    def no_better(a: tuple[F, F], b: tuple[F, F]) -> bool:
        return bool(np.all(b[0] <= a[0]) and np.all(b[1] <= a[1]))

    kept: list[tuple[F, F]] = []
    for i, case in enumerate(cases):
        if not np.isfinite(case[0]).any():
            continue
        beaten = any(
            j != i and no_better(case, other) and (j < i or not no_better(other, case)) for j, other in enumerate(cases)
        )
        if not beaten:
            kept.append(case)
    return kept


def refetch_cases(
    hw: TrainiumHardware, c: ProblemConsts, q: CoreShare, caps: tuple[int, int, int]
) -> list[tuple[F, F]]:
    """``(stationary, moving)`` fetch multipliers of each way a point can fetch its operands (module docstring).

    A multiplier is ``>= 1`` (the core's share of that operand fetched that many times) or ``inf`` (no
    point of the case). Shapes broadcast against `q`'s arrays. Cases another case beats everywhere are
    left out when the arrays are large (`_FEW`).
    """
    cap_s, cap_m, cap_k = caps
    room = float(hw.sbuf_partition_bytes)
    banks = float(hw.psum_banks)
    kslots = np.ceil(q.ek / hw.pe_rows)
    ks: F | float = float(kslots.min()) if kslots.min() == kslots.max() else kslots  # one value: no k axis
    tile_s, tile_m = 2 * ks * q.es * c.s_stat, 2 * ks * q.em * c.s_mov  # one tile of each, double-buffered
    per_bank = np.ceil(q.em * 4 / hw.psum_bank_bytes)

    def most_open(own: F, other: F | float, open_tiles: F, cap: int) -> F:
        """Most blocks of one role when each comes with `open_tiles` open output tiles (either accumulator):
        inputs ``other + blocks x own`` bytes per partition, open tiles at 4 bytes (SBUF) or the output's (PSUM)."""
        sbuf_acc = _most(room - other, own + open_tiles * q.em * 4, cap)
        psum_acc = np.minimum(
            _most(room - other, own + open_tiles * q.em * c.s_out, cap), np.floor(banks / (open_tiles * per_bank))
        )
        return np.maximum(sbuf_acc, psum_acc)

    def gated(mult: F, gate: F | None) -> F:
        return mult if gate is None else np.where(gate, mult, np.inf)

    one = np.ones((1, 1, 1))
    cases: list[tuple[F, F]] = []
    # several k blocks (hk > 1): where a choice has more than one k tile (a k axis of least values: any)
    several = np.full(np.shape(q.nk), True) if q.k_least else q.nk >= 2
    if several.any():
        gate = None if several.all() else several
        # both refetched: a block's bs x bm output tiles are open; stationary blocks of [lo, hi) tiles
        for lo, hi in _brackets(cap_s):
            bm_most = most_open(tile_m, lo * tile_s, np.full(np.shape(tile_m), float(lo)), cap_m)
            cases.append((gated(_times(q.nm, bm_most), gate), gated(np.ceil(q.ns / (hi - 1)) * one, gate)))
        # s inside k (the moving share once): each moving tile of a block keeps Ns output tiles open
        bm_open = most_open(tile_m, tile_s, q.ns, cap_m)
        cases.append((gated(_times(q.nm, bm_open), gate), gated(one, gate)))
        # m inside k (the stationary share once): Nm open tiles per stationary tile
        bs_open = most_open(tile_s, tile_m, q.nm, cap_s)
        cases.append((gated(one, gate), gated(_times(q.ns, bs_open), gate)))
        # both inside k: every output tile of the core open
        all_open = most_open(tile_s + tile_m, 0.0, q.ns * q.nm, 1)
        cases.append((gated(np.where(all_open >= 1, 1.0, np.inf) * one, gate), gated(one, gate)))
    # one k block: every k tile in the block (bk >= Nk), no output open across blocks; where Nk fits the cap
    fits = q.nk <= cap_k
    if fits.any():
        gate = None if fits.all() else fits
        whole = 2 * q.nk * kslots  # k slots of a block holding every k tile, double-buffered
        whole_s, whole_m = whole * q.es * c.s_stat, whole * q.em * c.s_mov
        # a block's output tiles are open at the output's bytes (the other block at 1 tile)
        bs1 = _most(room - whole_m, whole_s + q.em * c.s_out, cap_s)
        bm1 = _most(room - whole_s, whole_m + q.em * c.s_out, cap_m)
        cases.append((gated(_times(q.nm, bm1), gate), gated(np.where(bs1 >= 1, 1.0, np.inf) * one, gate)))
        cases.append((gated(np.where(bs1 >= 1, 1.0, np.inf) * one, gate), gated(_times(q.ns, bs1), gate)))
    # leaving out the cases another beats everywhere pays on the arrays of many structures, not on one's
    return _needed(cases) if max((np.size(x) for x, _ in cases), default=0) > _FEW else cases


def _padded(tiles: F, lo: int, hi: int) -> F:
    """Fewest tiles a core computes of a role with `tiles` tiles in blocks of ``lo .. hi - 1`` tiles: ``b x
    ceil(tiles / b)`` at its least over those blocks ``b`` (whole blocks cover the tiles, `nest.split_role`)."""
    return np.min([b * np.ceil(tiles / b) for b in range(lo, hi)], axis=0)


def footprint_cases(
    hw: TrainiumHardware, c: ProblemConsts, q: CoreShare, caps: tuple[int, int, int], latency: bool = False
) -> tuple[F, ...]:
    """``(stationary, moving, held)`` arrays, one entry per case along a leading axis before `q`'s axes: the ways
    a point can fetch its operands, cut by block size so that what a
    case fetches and what it holds are both floors of its points: fetch multipliers as in `refetch_cases`,
    and ``held`` the bytes per SBUF partition (PSUM banks at their bytes) no point of the case holds fewer
    of (`cost.accumulation`'s footprint over the partitions).

    With `latency`, ``(stationary, moving, lead_s, lead_m, pad_s, pad_m, adds)`` over finer cases (every block
    size its own range, `_brackets`), for latency's cells beside off-chip bytes or energy: a case whose least
    holding breaks both accumulators' SBUF and PSUM capacities has no point (its fetches ``inf``); ``lead_s`` /
    ``lead_m`` the (tile x k tile) units of each input's first block no point of the case loads fewer of: ``bs x
    bk`` and ``bm x bk`` at the case's least blocks (``bk >= Nk`` with one k block, else ``>= 1``; ``bb >= 1``),
    the first blocks that `cost.traffic`'s prologue loads before anything overlaps (its ``stat_blk +
    mov_blk``), and ``pad_s`` /
    ``pad_m`` the fewest stationary and moving tiles a core computes (``bs hs`` and ``bm hm`` of
    `cost.traffic`'s ``n_out``: whole blocks, `_padded` over the case's block range; ``Ns``, ``Nm`` where the
    case leaves the block free), and ``adds`` the fewest accumulating adds per output tile at eviction: ``hk -
    1 >= max(ceil(Nk / bk_most), 2) - 1`` where a case of several k blocks cannot hold its open tiles in
    PSUM (so its points accumulate in SBUF, `cost.accumulation`), with ``bk_most`` the most k tiles per block
    that SBUF holds beside the case's least holding (at most the block_k cap), else 0. The case of both loops
    inside k with both operands fetched once is left out then: `cost.fetches` fetches an operand again per
    trip of a loop outside its innermost own loop, so such a point has one role's block loop trivial (``hs =
    1`` or ``hm = 1``), and it is in the s-inside-k (or m-inside-k) case of its own block size, whose floors
    (one fetch of each, ``live >= b x Ns``, ``b`` tiles in the first block) are all at most its values and
    tighter than that case's (``live >= Ns x Nm`` beside one tile of each input).

    A point holds ``2 bk kslots bb (bs ts s_stat + bm tm s_mov)`` input bytes and ``live`` open output
    tiles of ``tm`` elements: with a PSUM accumulator at the output's bytes and ``live x banks per tile``
    PSUM banks; with an SBUF one at 4 bytes across k blocks (the output's with one k block) and two
    tiles' banks (the least of the two is taken). Each block size the case's fetches depend on is cut
    into ``[lo, hi)`` ranges (`_brackets`): a point of a range fetches at least as often as its largest
    block ``hi - 1`` allows and holds at least its least block ``lo``:

    - several k blocks, both operands fetched again (the s and m loops outside k): ``stat x
      ceil(Nm / bm)``, ``mov x ceil(Ns / bs)``, ``live >= bs bm``;
    - s inside k: ``stat x ceil(Nm / bm)``, ``live >= bm Ns``; m inside k: ``mov x ceil(Ns / bs)``, ``live
      >= bs Nm``; both inside: ``live >= Ns Nm``;
    - one k block (every k tile in the block: ``Nk`` tiles of each input): m outside s, ``stat x ceil(Nm
      / bm)``; s outside m, ``mov x ceil(Ns / bs)``; ``live >= bs bm`` at the output's bytes.

    Capacities are not applied (they only make blocks smaller: more fetches, as floors go), but with `latency`
    as said. Used for the footprint objective's cells and (`latency`) for latency's beside another objective
    (`bounds.split_cells`), where `refetch_cases`' least fetches beside the least footprint, or beside the
    least latency, bound nothing: they sit in different loop orders and block sizes (the fewest fetches take
    the largest blocks: the most held, the largest first blocks to load, the most padding).
    """
    cap_s, cap_m, cap_k = caps
    kslots = np.ceil(q.ek / hw.pe_rows)
    tile_s, tile_m = 2 * kslots * q.es * c.s_stat, 2 * kslots * q.em * c.s_mov  # a tile of each, double-buffered
    per_tile = np.ceil(q.em * 4 / hw.psum_bank_bytes)  # PSUM banks of one open tile
    bank = per_tile * hw.psum_bank_bytes  # and their bytes
    shape = np.broadcast_shapes(*(np.shape(a) for a in (q.ns, q.nm, q.nk, q.es, q.em, q.ek)))
    room, banks = float(hw.sbuf_partition_bytes), float(hw.psum_banks)

    def held(inputs: F, live: F | float, acc_bytes: float) -> tuple[F, F | bool, F | bool, F | float]:
        """Without `latency`: the least bytes held per partition (the rest unused). With it (no bytes asked;
        the first entry carries the case axis): where either accumulator can hold the case's least (SBUF and
        PSUM capacities, `cost.capacity_violations`: a case that breaks both has no point), where the PSUM
        accumulator cannot (its points then accumulate in SBUF), and the most k tiles a block can then have
        (`inputs` is a block's at one k tile with several k blocks: the input bytes grow with ``bk``)."""
        in_psum, in_sbuf = inputs + live * q.em * c.s_out, inputs + live * q.em * acc_bytes
        if not latency:
            return np.minimum(in_psum + live * bank, in_sbuf + 2 * bank), True, False, 0.0
        psum_fits = (in_psum <= room) & (live * per_tile <= banks)
        fits = psum_fits | ((in_sbuf <= room) & (2 * per_tile <= banks))
        k_most = np.minimum(np.floor((room - live * q.em * acc_bytes) / inputs), cap_k)
        return fits, fits, ~psum_fits, k_most

    def axis(values: F) -> F:  # one entry per case of a group, before the (tile_stat, tile_mov, tile_k) axes
        return np.asarray(values, dtype=np.float64).reshape(-1, 1, 1, 1)

    runs_s, runs_m = _brackets(cap_s, latency, q.ns), _brackets(cap_m, latency, q.nm)
    lo_s, most_s = (np.asarray(v, dtype=np.float64) for v in zip(*runs_s, strict=True))
    lo_m, most_m = (np.asarray(v, dtype=np.float64) for v in zip(*runs_m, strict=True))
    most_s, most_m = most_s - 1, most_m - 1  # a range's largest block
    pad_s = np.stack([_padded(q.ns, lo, hi) for lo, hi in runs_s])  # one per block range
    pad_m = np.stack([_padded(q.nm, lo, hi) for lo, hi in runs_m])
    # (stationary, moving, held, where it fits, where it accumulates in SBUF, its most k tiles per block there,
    # lead_s, lead_m, pad_s, pad_m, where the group can occur)
    groups: list[tuple[Any, ...]] = []
    several = np.full(np.shape(q.nk), True) if q.k_least else q.nk >= 2
    if several.any():
        ps, pm = np.repeat(lo_s, len(lo_m)), np.tile(lo_m, len(lo_s))  # both fetched again: every pair of ranges
        both = (np.ceil(q.nm / axis(np.tile(most_m, len(lo_s)))), np.ceil(q.ns / axis(np.repeat(most_s, len(lo_m)))))
        pads = (np.repeat(pad_s, len(lo_m), axis=0), np.tile(pad_m, (len(lo_s), *([1] * (pad_m.ndim - 1)))))
        groups.append(
            (*both, *held(axis(ps) * tile_s + axis(pm) * tile_m, axis(ps * pm), 4.0), axis(ps), axis(pm), *pads,
             several)
        )  # fmt: skip
        groups.append(
            (np.ceil(q.nm / axis(most_m)), 1.0, *held(tile_s + axis(lo_m) * tile_m, axis(lo_m) * q.ns, 4.0), 1.0,
             axis(lo_m), q.ns, pad_m, several)
        )  # fmt: skip
        groups.append(
            (1.0, np.ceil(q.ns / axis(most_s)), *held(axis(lo_s) * tile_s + tile_m, axis(lo_s) * q.nm, 4.0),
             axis(lo_s), 1.0, pad_s, q.nm, several)
        )  # fmt: skip
        if not latency:  # (with `latency` every such point is in another case: the docstring)
            every_open, *unused = held(tile_s + tile_m, q.ns * q.nm, 4.0)  # (bytes only, without `latency`)
            groups.append((1.0, 1.0, every_open[None], *unused, 1.0, 1.0, q.ns, q.nm, several))
    fits = q.nk <= cap_k
    if fits.any():  # one k block: m outside s (the stationary blocks fetched again per moving block), s outside m
        groups.append(
            (np.ceil(q.nm / axis(most_m)), 1.0, *held(q.nk * (tile_s + axis(lo_m) * tile_m), axis(lo_m), c.s_out),
             q.nk, q.nk * axis(lo_m), q.ns, pad_m, fits)
        )  # fmt: skip
        groups.append(
            (1.0, np.ceil(q.ns / axis(most_s)), *held(q.nk * (axis(lo_s) * tile_s + tile_m), axis(lo_s), c.s_out),
             q.nk * axis(lo_s), q.nk, pad_s, q.nm, fits)
        )  # fmt: skip
    out = []
    for x, y, h, room_ok, sbuf_acc, k_most, *rest, can in groups:
        full = (np.shape(h)[0], *shape)
        fetched = [np.where(can & room_ok if latency else can, np.broadcast_to(v, full), np.inf) for v in (x, y)]
        if not latency:
            out.append([*fetched, np.broadcast_to(h, full)])
            continue  # (with `latency` no held bytes: its cases bound latency, not footprint)
        # k blocks of a point with several: at least 2, and Nk over the most k tiles SBUF leaves a block
        hk = np.maximum(np.ceil(q.nk / np.maximum(k_most, 1)), 2)
        adds = np.where(sbuf_acc, hk - 1, 0.0) if can is several else np.zeros(1)  # one k block: no adds
        out.append([*fetched, *(np.broadcast_to(v, full) for v in (*rest, adds))])
    return tuple(np.concatenate(parts) for parts in zip(*out, strict=True))


def refetch_floors(
    hw: TrainiumHardware,
    c: ProblemConsts,
    used: int,
    share: CoreShare,
    cases: list[tuple[F, F]],
    core_out: F,
) -> tuple[F, F]:
    """(chip bytes, DMA cycles) floors: the least over `cases`, each ``(stationary, moving)`` fetch multipliers
    of the core's shares ``share.stat`` and ``share.mov``.

    Each case prices the chip's bytes as `cost.traffic` does (an input at least its real bytes, the
    output once per core) and the DMA as the larger of a core's bytes over its DMA rate and the chip's
    over the HBM bandwidth; a case with an ``inf`` multiplier (no point can meet it) prices ``inf``.
    """
    chip_least = dma_least = None
    for chip, dma in case_floors(hw, c, used, share, cases, core_out):
        chip_least = chip if chip_least is None else np.minimum(chip_least, chip)
        dma_least = dma if dma_least is None else np.minimum(dma_least, dma)
    if chip_least is None or dma_least is None:  # no case at all: no point
        inf = np.full(np.shape(share.stat * core_out), np.inf)
        return inf, inf
    return chip_least, dma_least


def case_floors(
    hw: TrainiumHardware, c: ProblemConsts, used: int, share: CoreShare, cases: list[tuple[F, F]], core_out: F
) -> list[tuple[F, F]]:
    """`refetch_floors`' (chip bytes, DMA cycles) of each case, in the order of `cases`."""
    out = []
    for x, y in cases:
        stat, mov = share.stat * x, share.mov * y
        chip = np.maximum(used * stat, c.real_stat_bytes) + np.maximum(used * mov, c.real_mov_bytes)
        chip += used * core_out
        core = stat + mov + core_out
        dma = np.maximum(core / hw.core_dma_bytes_per_s, chip / hw.hbm_bytes_per_s) * hw.te_clock_hz
        out.append((chip, dma))
    return out
