"""Trainium's off-chip floors with the SBUF and PSUM capacities (`costmodels.trainium.refetch`, issue #12).

- one cell worked by hand: a core's 16 stationary and 12 moving tiles of 128 x 478 bf16 elements on trn1
  cannot keep either operand's share resident without refetching the other (the blocks that would need
  hold more open output tiles than the SBUF's 192 KiB per partition or PSUM's 8 banks);
- on a part with a small SBUF the cells' off-chip floors count the refetches the capacity forces (well
  above the problem's compulsory bytes) and stay at or below every feasible point's bytes.
"""

from __future__ import annotations

import numpy as np

from costmodels.registry import get_target
from costmodels.trainium.cost import ProblemConsts
from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.refetch import CoreShare, refetch_cases
from costmodels.trainium.target import TrainiumTarget
from tests.costmodels.trainium.tile_structures import every_tile_target, structure_choices, structure_codes
from workload.einsum import einsum

BF16 = ProblemConsts(
    s_stat=2, s_mov=2, s_out=2, fp32=False, double_row=False, real_stat_bytes=0.0, real_mov_bytes=0.0, macs=0.0,
    supported=True,
)  # fmt: skip


def _hw() -> TrainiumHardware:
    t = get_target("trn1")
    assert isinstance(t, TrainiumTarget)
    return t.hardware


def _cell(ns: float, nm: float, nk: float) -> CoreShare:
    a = lambda v: np.full((1, 1, 1), float(v))  # noqa: E731
    return CoreShare(a(ns), a(nm), a(nk), a(128), a(478), a(128), a(1.0), a(1.0))


def test_a_cell_worked_by_hand_refetches_one_operand_at_least_twice() -> None:
    hw = _hw()
    assert (hw.sbuf_partition_bytes, hw.psum_banks, hw.psum_bank_bytes, hw.pe_rows) == (196608, 8, 2048, 128)
    cases = refetch_cases(hw, BF16, _cell(16, 12, 32), (16, 16, 16))
    got = {(float(x.item()), float(y.item())) for x, y in cases if np.isfinite(x.item()) and np.isfinite(y.item())}
    # one tile of each input, double-buffered, per partition: 512 B stationary (128 x 2 B x 2), 1,912 B moving
    # - s inside k (the moving share once): a moving tile keeps 16 output tiles of 478 fp32 open (30,592 B),
    #   so (196,608 - 512) // (1,912 + 30,592) = 6 moving tiles per block: the stationary share twice;
    #   PSUM cannot (16 open tiles x 1 bank > 8 banks)
    assert (2.0, 1.0) in got
    # - m inside k: (196,608 - 1,912) // (512 + 12 x 1,912) = 8 stationary tiles per block: the moving share twice
    assert (1.0, 2.0) in got
    # - both refetched, stationary blocks of 8-15 tiles: at most (196,608 - 8 x 512) // (1,912 + 8 x 1,912) = 11
    #   moving tiles per block (their 8 x 11 output tiles open): twice each; of 16: 5 moving tiles, 3 times
    assert {(2.0, 2.0), (3.0, 1.0), (1.0, 3.0), (1.0, 6.0), (1.0, 16.0)} <= got
    # - every output tile open (16 x 12 x 478 x 4 B > 192 KiB) or one k block (32 k tiles > the cap of 16): none
    assert got == {(2.0, 1.0), (1.0, 2.0), (2.0, 2.0), (3.0, 1.0), (1.0, 3.0), (1.0, 6.0), (1.0, 16.0)}
    assert (1.0, 1.0) not in got  # the block caps alone (16 tiles each) would have allowed both shares once
    # with a few k tiles one block holds all of K: then no output stays open, and (1, 1) needs both in one block
    few = refetch_cases(hw, BF16, _cell(16, 12, 2), (16, 16, 16))
    assert any(float(x.item()) == 1.0 and float(y.item()) <= 2.0 for x, y in few)


def test_on_a_small_sbuf_the_off_chip_floors_count_the_refetches_the_capacity_forces() -> None:
    p = einsum("mk,kn->mn", {"m": 600, "k": 300, "n": 1000}, dtype="bf16", weight=1)
    t = every_tile_target("trn1", sbuf_partition_bytes=4096)
    space = t.space(p)
    compulsory = sum(p.operand_bytes(o) for o in p.inputs) + p.operand_bytes(p.output)
    total = int(np.prod([len(q.choices) for q in space.params[:4]]))
    ratios = []
    for flat in range(0, total, total // 40):
        cells = t.structure_front_cells(p, structure_choices(space, flat), ("latency", "offchip_bytes"))
        s = t.score_codes(p, structure_codes(space, flat))
        feasible = np.asarray(s.feasible)
        if cells is None or not feasible.any():
            continue
        floor = cells[np.isfinite(cells[:, 1]), 1].min()
        least = np.asarray(s.objectives["offchip_bytes"])[feasible].min()
        assert floor <= least * (1 + 1e-9), flat
        ratios.append(floor / compulsory)
    assert len(ratios) >= 20
    # every loop order refetches something on 4 KiB per partition: the floors say so (the block caps alone: ~1.0)
    assert float(np.median(ratios)) > 1.5
