"""Loop orders of the Trainium space: the block orders offered, and the tile order proved never to matter.

**Block loops** (level ``hbm``; `ORDERS`): all six orders of the stationary-free (s), moving-free
(m) and contraction (k) block loops are offered. They change the cost through which operand is
reused across the outer loops and how many accumulators are open (`cost.fetches`,
`cost.live_output_blocks`; hardware-facts.md §2.2 step 5, the blocked schedule's
``M*K*ceil(N/B_N) + K*N*ceil(M/B_M)``): ``s`` outside ``m`` without ``k`` between them keeps the
stationary block resident across the moving blocks (moving reuse order: m-inner), ``m`` outside
``s`` keeps the moving block (stationary re-fetched), and ``k`` outside an output loop keeps that
many accumulators open. `distinct_orders` drops orders that differ only in where a role with a
single block goes (no loop: the same nest).

**Tile loops inside a block** (level ``sbuf``): the order of the instruction tiles of one block is
fixed by the accumulator (``acc``: PSUM keeps K outermost, SBUF keeps K innermost, costmodels.
trainium.mapping) and otherwise not offered, because it cannot change the cost under this model.
Its one effect on the tensor engine would be how often the stationary tile is reloaded (an order
with the moving tiles innermost reuses the stationary tile across them; any other reloads it per
instruction). A LoadStationary runs in the background of the previous MultiplyMoving and costs
about ``N_stationary / 4`` cycles ("Fast LoadStationary" is up to 4x faster than a MultiplyMoving
of the same free size: hardware-facts.md §2.1, LoadStationary row); hardware-facts.md §2.2 step 2
prices an instruction at ``max(LS_II, MM_II)`` with ``MM_II = max(min(64, N_stationary),
N_moving)`` (nki-nc_matmul.txt, "Estimated instruction cost"). Proof that the reload is always
hidden: for every legal ``N_stationary = ts <= 128``, ``LS_II = ts / 4 <= min(64, ts) <= MM_II``
(``ts / 4 <= ts``, and ``ts / 4 <= 32 <= 64``). So every tile order gives every instruction the
same cost ``MM_II``, with the same instructions, evictions (one per output tile and K block,
whatever the order) and blocks; the SBUF and PSUM held are set by ``acc`` and the block, not by the
order of the tiles inside it. `tests/costmodels/trainium/test_trainium_orders.py` checks the
inequality for every legal tile of both presets and that each block order prices differently.
"""

from __future__ import annotations

import numpy as np

#: block-loop orders, outermost first (s = stationary free, m = moving free, k = contraction)
ORDERS: tuple[str, ...] = ("smk", "msk", "skm", "mks", "ksm", "kms")
#: "Fast LoadStationary" is up to 4x faster than a MultiplyMoving of the same free size (hardware-facts.md §2.1)
LOAD_STATIONARY_SPEEDUP = 4


def load_stationary_cycles(ts: float | np.ndarray) -> float | np.ndarray:
    """Cycles of one LoadStationary of `ts` stationary free elements (hardware-facts.md §2.1, LoadStationary row)."""
    return ts / LOAD_STATIONARY_SPEEDUP


def distinct_orders(busy: str) -> tuple[str, ...]:
    """One order per relative order of the roles that can have several blocks (`busy`).

    A role with a single block has no block loop, so where the order puts it changes neither the
    loop nest nor the cost.
    """
    seen: set[str] = set()
    out: list[str] = []
    for o in ORDERS:
        key = "".join(c for c in o if c in busy)
        if key not in seen:
            seen.add(key)
            out.append(o)
    return tuple(out)
