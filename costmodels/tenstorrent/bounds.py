"""Admissible latency bounds of structures of the Tensix space (issue #12, branch and bound).

The mapper searches a large space by *structures* (some parameters fixed, `mapper.bounds`; under
the default split, `mapper.strategies.encoding.split_params` with 65,536 inner points, the Tensix
structures are some of the double-buffer and split-reader flags, and the memory placement on the
larger spaces; with fewer inner points the layout, i.e. the core grid, is structural too) and skips
a structure whose bound is not below the best latency found. `TTStructureBound` bounds one: the
smallest, over the *cells* the fixed choices leave, of

    cycles_lb = max(main_lb, t_dram_lb) + t_halo + t_reshard

where a cell is one value of each of `GRID` (layout, memory, math_fidelity, fp32_acc,
act_double_buffer, weights_double_buffer, split_reader), and the other parameters
(act_block_h_rank, in0_block_w, act_block_w_div) are relaxed to their most favourable value in
the structure (the fixed one, else the extreme of the space's choices), and the output sub-block to
any pair of ttnn's list that the destination register and ``pn_t`` allow.
Cells that no point can make feasible are infinite. The terms use the per-layout fields of
`tenstorrent.resolve.layout_table` and `tenstorrent.cost.dram_k_tiles` (what `cost.evaluate`
reads) and the same formulas.

Admissibility, term by term against `tenstorrent.cost._evaluate` (one point P of the cell, its
``cycles = max(main, t_dram) + t_halo (+ t_reshard when a placement option is set)``):

* compute: ``t_mac = B * pm_t * k_t * pn_t * tile_cyc * small_rows`` depends only on the layout,
  the memory (``k_t``) and the fidelity (``tile_cyc``, cycles per tile product at that fidelity:
  hardware-facts.md §4.1, Math fidelity row; tenstorrent-conv2d.md, Compute Config), so it is
  the cost's own value. ``n_sub = B*nbh*kblocks*(abh_t/sb_h)*(pn_t/sb_w) = B*pm_t*kblocks*pn_t /
  (sb_h*sb_w)`` since ``nbh = pm_t/abh_t``; a feasible point's sub-block is a pair of
  `cost.SUBBLOCKS` with ``sb_h*sb_w <= dst`` (dst-capacity), ``sb_w | pn_t`` and ``sb_h == 1 or
  sb_w == pn_t`` (subblock-divides/-shape), so its area is at most `max_subblock_area`; and
  ``kblocks >= kblocks_lo`` (DRAM: ``K_t / in0_block_w`` with the largest in0_block_w; sharded:
  the layout's K blocks times the smallest act_block_w_div, 1 unless width-sharded). So
  ``t_comp = t_mac + n_sub*overhead >= t_comp_lb``.
* reader and activations: ``t_reader`` (split_reader is a cell axis) and ``t_act`` depend only on
  the layout, memory and split flag: the cost's own values; ``act_path = t_reader + t_act``.
* weights: ``w_core = B*K*N_core*bw*(1 if height-sharded in L1 else nbh)`` with ``nbh = pm_t /
  abh_t >= pm_t / max(abh_t)``: ``t_w >= t_w_lb``. Writer (DRAM path): ``t_out`` exact.
* main: ``act_double_buffer`` requested and kept gives ``max(t_comp, act_path)``, otherwise (not
  requested, or dropped for lack of L1) ``t_comp + act_path >= max(...)``: the bound takes the sum
  only where the flag is off (then the cost sums too). The weights double buffer is effective
  exactly where requested with block sharding or the DRAM path (``max(main, t_w)``), else the
  cost sums (``main + t_w``): the bound does the same with its lower terms. Then ``max(., t_out)``.
  Sums and maxima are monotone, so ``main >= main_lb``.
* DRAM (hardware-facts.md §4.1, DRAM row: aggregate bytes per cycle): DRAM path: input, weights
  (``nbh`` times, lower-bounded as above) and output, plus the input (output) again when it was
  asked to stay in L1 (a DRAM mapping always spills it); sharded: the weights ``c * w_core``,
  the input unless it may stay in L1 (``input_in_l1``: kept costs 0, spilled 2x), the output
  unless it may stay (``output_in_l1``: kept -1x of the base, spilled +1x): each part is the
  smallest the placement rules (`cost._placement`) allow, whatever ``l1_live_bytes`` and the
  fit decide. So ``t_dram >= t_dram_lb``.
* halo (sharded conv: remote sticks over the NoC plus the local copy) and reshard (sharded, input
  in L1, its `reshard` column) depend on the layout and memory only: the cost's own values.
* infeasible cells: a cell is infinite only when every point of it fails a constraint of
  `cost._evaluate`: ``layout``, ``channel-split``, ``math-fidelity`` and ``accumulation`` depend on
  the cell alone; ``l1-paper`` and ``l1-capacity`` are checked at lower bounds of the paper's
  inequality and of the L1 total (halo buffer, weight CB, output shard or block, one activation
  block; all increasing in act_block_h and in0_block_w and decreasing in act_block_w_div, taken at
  the structure's extremes; the intermediate CB and a second activation block only add).

So ``cycles >= cycles_lb`` of P's cell in exact arithmetic. Floating point: every term is a short
chain (< 40 operations) of products, quotients, sums and maxima of non-negative numbers, each
correctly rounded, so a computed term is within a factor ``1 +- 1e-14`` of its exact value on
either side; the bound is multiplied by `SAFETY` (``1 - 1e-12``) and the infeasibility tests are
made with the same margin, which covers the reordering. The latency objective is ``cycles /
clock_hz`` (`tenstorrent.scoring`): the bound is divided by the same clock. The minimum over the
structure's cells (feasible or not) is below each feasible point's latency.
`tests/costmodels/tenstorrent/test_tenstorrent_structure_bound.py` checks it against the best
point of many structures of random problems, placement options, block floats and fidelities.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from costmodels.protocol import Choice, SearchSpace
from costmodels.tenstorrent.cost import LAYOUT_FIELDS, MEMORIES, SUBBLOCKS, dram_k_tiles
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.resolve import fidelity_inputs, layout_table
from costmodels.tenstorrent.shape import TTShape

#: the parameters a bound keeps one array axis for (every other one is relaxed to its best value)
GRID = (
    "layout",
    "memory",
    "math_fidelity",
    "fp32_acc",
    "act_double_buffer",
    "weights_double_buffer",
    "split_reader",
)
#: the relaxed parameters whose fixed value tightens the bound (subblock_rank is relaxed entirely)
RELAXED = ("act_block_h_rank", "in0_block_w", "act_block_w_div")
#: margin for floating-point reordering (see the module docstring)
SAFETY = 1.0 - 1e-12


def max_subblock_area(pn_t: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The largest ``sb_h * sb_w`` of a pair of ttnn's list a feasible point with these ``pn_t`` and dst can have.

    dst-capacity (``sb_h*sb_w <= dst``), ``sb_w | pn_t`` and ``sb_h == 1 or sb_w == pn_t``
    (`tenstorrent.cost`, hardware-facts.md §4.2 step 2); ``sb_h | act_block_h`` is left out (a
    relaxation). (1, 1) always qualifies, so the area is at least 1.
    """
    best = np.ones(np.broadcast_shapes(pn_t.shape, dst.shape))
    for h, w in SUBBLOCKS:
        fits = (h * w <= dst) & (np.mod(pn_t, w) == 0) & ((h == 1) | (pn_t == w))
        best = np.where(fits, np.maximum(best, h * w), best)
    return best


@dataclass
class TTStructureBound:
    """Lower bounds (cycles) of the cells of one problem's space, per setting of the `RELAXED` parameters."""

    shape: TTShape
    hw: TensixHardware
    space: SearchSpace
    _codes: dict[str, dict[Choice, int]] = field(init=False)
    _lt: dict[str, np.ndarray] = field(init=False)
    _cells: dict[tuple[Choice | None, ...], np.ndarray] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._codes = {p.name: {c: i for i, c in enumerate(p.choices)} for p in self.space.params}
        missing = sorted(set(GRID + RELAXED) - set(self._codes))
        if missing:
            raise ValueError(f"the space lacks the parameters {missing} the bound relies on")
        self._lt = layout_table(self.shape, self.hw, [str(c) for c in self._choices("layout")])

    def _choices(self, name: str) -> tuple[Choice, ...]:
        return tuple(self._codes[name])

    def __call__(self, fixed: dict[str, Choice]) -> float:
        """Seconds no feasible point with these fixed choices can beat.

        Raises:
            ValueError: a fixed choice names no parameter of the space, or a value it does not offer.
        """
        unknown = sorted(set(fixed) - set(self._codes))
        if unknown:
            raise ValueError(f"no parameter {unknown[0]!r} in this space: its parameters are {sorted(self._codes)}")
        for name, value in fixed.items():
            if value not in self._codes[name]:
                raise ValueError(f"{name}={value!r} is not a choice of this space: {self._choices(name)}")
        key = tuple(fixed.get(name) for name in RELAXED)
        cells = self._cells.get(key)
        if cells is None:
            cells = self._cells[key] = self.cells(*key)
        index = tuple(
            slice(self._codes[n][fixed[n]], self._codes[n][fixed[n]] + 1) if n in fixed else slice(None) for n in GRID
        )
        return float(cells[index].min()) * SAFETY / self.hw.clock_hz

    def cells(self, rank: Choice | None, kb: Choice | None, div: Choice | None) -> np.ndarray:
        """The bound (cycles, inf where no point is feasible) of every cell, `GRID` axes in order.

        `rank`, `kb`, `div`: the fixed act_block_h_rank, in0_block_w and act_block_w_div (None: free).
        """
        shape, hw, lt = self.shape, self.hw, self._lt

        def axis(name: str, values: np.ndarray) -> np.ndarray:
            return np.asarray(values).reshape([-1 if a == name else 1 for a in GRID])

        def flags(name: str) -> np.ndarray:
            return axis(name, np.array(self._choices(name), dtype=bool))

        g = {f: axis("layout", lt[f]) for f in LAYOUT_FIELDS}
        divs = lt["divs"].astype(np.float64)  # act_block_h tiles by layout and rank (resolve.resolve_ranks)
        if rank is None:
            abh_lo, abh_hi = axis("layout", divs.min(axis=1)), axis("layout", divs.max(axis=1))
        else:
            abh_lo = abh_hi = axis("layout", divs[:, min(int(rank), divs.shape[1] - 1)])
        kbs = [float(c) for c in self._choices("in0_block_w")] if kb is None else [float(kb)]
        dvs = [float(c) for c in self._choices("act_block_w_div")] if div is None else [float(div)]
        dram = axis("memory", np.array([m == MEMORIES[1] for m in self._choices("memory")]))
        cyc, fid_ok = fidelity_inputs(hw, np.array([str(f) for f in self._choices("math_fidelity")]))
        tile_cyc, fid_ok = axis("math_fidelity", cyc), axis("math_fidelity", fid_ok)
        fp32, adb, wdb, split = (
            flags("fp32_acc"),
            flags("act_double_buffer"),
            flags("weights_double_buffer"),
            flags("split_reader"),
        )
        t, B = shape.tile, shape.batches
        height, block, width = g["kind"] == 0, g["kind"] == 1, g["kind"] == 2
        c, pm_t, pn_t = g["c"], g["pm_t"], g["pn_t"]
        bi, bw, bo = shape.in_bytes, shape.w_bytes, shape.out_bytes
        k_dram = float(dram_k_tiles(shape))
        k_t = np.where(dram, k_dram, g["k_t"])
        k_full, b_wo = k_t * t, pn_t * t

        # compute at the cell's fidelity, padded per-core work; fewest sub-blocks the structure allows
        small_rows = max(1.0, 8.0 / shape.rows)
        t_mac = B * pm_t * k_t * pn_t * tile_cyc * small_rows
        div_lo = np.where(width & ~dram, min(dvs), 1.0)
        div_hi = np.where(width & ~dram, max(dvs), 1.0)
        kblocks_lo = np.where(dram, k_dram / max(kbs), g["kblocks"] * div_lo)
        dst = np.where(fp32, hw.dst_tiles_fp32, hw.dst_tiles)
        n_sub_lo = B * pm_t * kblocks_lo * pn_t / max_subblock_area(pn_t, dst)
        t_comp = t_mac + n_sub_lo * hw.subblock_overhead_cycles

        # activation reader and NoC receive, weights and writer (the cost's formulas; nbh at its smallest)
        link, hop = hw.noc_link_bytes_per_cycle, hw.noc_hop_cycles * (hw.grid_x + hw.grid_y)
        act_core = B * pm_t * t * k_full * bi
        reader_bytes = np.where(dram | (shape.conv is None), 0.0, act_core / c)
        t_reader = reader_bytes / (hw.l1_port_bytes_per_cycle * np.where(split, 2, 1))
        act_recv = np.where(dram, act_core, (c - 1) * act_core / c)
        act_path = t_reader + (act_recv / link + np.where(dram | (c > 1), hop, 0))
        nbh_lo = pm_t / abh_hi
        w_core = B * k_full * b_wo * bw * np.where(height & ~dram, 1, nbh_lo)
        t_w = w_core / link + hop
        t_out = np.where(dram, B * pm_t * t * b_wo * bo / link, 0.0)
        main = np.where(adb, np.maximum(t_comp, act_path), t_comp + act_path)
        wdb_eff = wdb & (block | dram)
        main = np.maximum(np.where(wdb_eff, np.maximum(main, t_w), main + t_w), t_out)

        # DRAM bytes: each tensor the fewest times the placement rules allow
        in_sh = shape.in_sticks * shape.in_channels * bi
        out_b = B * shape.m_t * t * shape.n_t * t * bo
        in_d = max(B * shape.m_t * t * k_dram * t * bi, in_sh)
        w_d = B * k_dram * t * shape.n_t * t * bw * nbh_lo
        spills = (in_sh if hw.input_in_l1 else 0.0) + (out_b if hw.output_in_l1 else 0.0)
        by_dram = in_d + w_d + out_b + spills
        by_l1 = (0.0 if hw.input_in_l1 else in_sh) + c * w_core + (0.0 if hw.output_in_l1 else out_b)
        t_dram = np.where(dram, by_dram, by_l1) / hw.dram_bytes_per_cycle

        # halo before a sharded conv and a reshard of an L1 input: the cost's own values
        stick = g["stick_ch"] * bi
        halo = (
            g["max_remote"] * stick / link
            + np.where(g["max_remote"] > 0, hop, 0)
            + g["buf"] * stick / (hw.l1_port_bytes_per_cycle)
        )
        t_halo = np.where((shape.conv is not None) & ~dram, halo, 0.0)
        t_reshard = np.where(~dram & hw.input_in_l1, g["reshard"], 0.0)
        cycles = np.maximum(main, t_dram) + t_halo + t_reshard

        # cells no point can make feasible
        b_ho_lo = abh_lo * t
        abw_lo = np.where(dram, min(kbs), k_t / (g["kblocks"] * div_hi))
        k_paper = np.where(dram, min(kbs) * t, np.where(height, k_full, k_full / c))
        paper = (b_ho_lo * b_wo + k_paper * (b_ho_lo + b_wo)) * bi
        halo_buf = np.where(dram, 0.0, g["buf"] * g["stick_ch"] * bi)
        w_cb = np.where(height & ~dram, k_full * b_wo * bw, abw_lo * t * b_wo * bw * np.where(wdb_eff, 2, 1))
        out_shard = np.where(dram, b_ho_lo * b_wo * bo, pm_t * t * b_wo * bo * B)
        l1 = halo_buf + w_cb + out_shard + b_ho_lo * abw_lo * t * bi
        free = hw.l1_free_bytes
        ok = (g["valid"] == 1) & np.where(dram, c <= shape.n_t, g["split_ok"] == 1) & fid_ok & ~np.isnan(tile_cyc)
        ok = ok & (fp32 | bool(hw.bf16_accumulation)) & (paper * SAFETY < free) & (l1 * SAFETY <= free)
        out = np.where(ok, cycles, np.inf)
        return np.broadcast_to(out, [len(self._codes[n]) for n in GRID]).copy()


def structure_bound(shape: TTShape, hw: TensixHardware, space: SearchSpace) -> TTStructureBound:
    """The bound of one problem's space (cells priced per setting of the relaxed parameters, on first use)."""
    return TTStructureBound(shape, hw, space)
