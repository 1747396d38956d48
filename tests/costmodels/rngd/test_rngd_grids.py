"""Every factorisation of a slice count matters: an uneven grid beats every balanced split (issue #12).

Before every grid was offered, a pair of roles split a count ``s`` one way only: the smallest divisor
of ``s`` at least ``sqrt(s)`` to the first role, in both orders of the pair ("balanced 2-D only").
On ResNet-50's 3x3 conv 512->512 at 7x7, batch 1 (a held-out awkward shape: short M, long K), N over
4 and K over 63 slices per cluster is more than 4% faster than the best point of that space, which is
searched exhaustively here (its grids pruned by the rule of `rngd.slices`, which keeps its optimum).
"""

from __future__ import annotations

import math

import numpy as np

from costmodels.protocol import SearchSpace
from costmodels.registry import get_target
from costmodels.rngd.scoring import build_tables, score_codes
from costmodels.rngd.slices import Stage1, kept_grids
from costmodels.rngd.space import build_space, grid_code, grid_parts, roles_of
from costmodels.rngd.target import RngdTarget
from costmodels.rngd.trf_splits import kept_splits
from workload.conv2d import conv2d

T = get_target("rngd")
assert isinstance(T, RngdTarget)
CONV = conv2d(batch=1, in_channels=512, out_channels=512, input_height=7, input_width=7, kernel=3, padding=1)


def balanced_first(s: int) -> int:
    """The first role's slices of the one split the old space had: the smallest divisor of ``s`` >= sqrt(s)."""
    return min(d for d in range(1, s + 1) if s % d == 0 and d * d >= s)


def is_balanced(g: int) -> bool:
    """One role alone, or the balanced split of ``a * b`` in either order."""
    a, b = (int(x[0]) for x in grid_parts(np.asarray([g])))
    return a == 1 or b == 1 or max(a, b) == balanced_first(a * b)


def balanced_space() -> SearchSpace:
    """The unpruned space's choices with the balanced grids only, both rules of `build_space` applied to them."""
    full = build_space(CONV, T.hw, prune=False)
    ch = {p.name: p.choices for p in full.params}
    grids = tuple(int(g) for g in ch["slice_grid"] if is_balanced(int(g)))
    stage1 = Stage1.of_space(roles_of(CONV), full).with_grids(grids)
    grids = kept_grids(stage1)
    rows = tuple(int(x) for x in ch["rows"])
    trf = kept_splits(stage1.with_grids(grids), rows)
    new = {"slice_grid": grids, "trf_split": trf}
    return SearchSpace(
        params=tuple(p.model_copy(update={"choices": new[p.name]}) if p.name in new else p for p in full.params)
    )


def exhaustive_best(space: SearchSpace) -> float:
    """The least latency (seconds) over every point of the space, scored by the batch scorer in chunks.

    A chunk is whole blocks of the trailing parameters (those of at most 2^21 points): their codes are the same
    in every block, so they are decoded once; only the leading parameters' codes are made per chunk.
    """
    tables = build_tables(CONV, T.hw, space)
    assert tables is not None
    shape = tuple(len(p.choices) for p in space.params)
    lead = next(i for i in range(1, len(shape) + 1) if math.prod(shape[i:]) <= 1 << 21)
    block, blocks = math.prod(shape[lead:]), math.prod(shape[:lead])
    per = max(1, (1 << 21) // block)  # blocks per chunk
    tail = [np.tile(d, per) for d in np.unravel_index(np.arange(block), shape[lead:])]
    best = np.inf
    for b0 in range(0, blocks, per):
        b1 = min(blocks, b0 + per)
        n = (b1 - b0) * block
        head = [np.repeat(d, block) for d in np.unravel_index(np.arange(b0, b1), shape[:lead])]
        digits = [*head, *(d[:n] for d in tail)]
        codes = {p.name: d for p, d in zip(space.params, digits, strict=True)}
        best = min(best, float(score_codes(T.hw, tables, codes, n)["latency"].min()))
    return best


def test_the_balanced_space_is_what_the_old_space_offered() -> None:
    """Sanity of the helper: 192 slices were 16 x 12 (or 12 x 16) only, a prime count one role alone."""
    assert balanced_first(192) == 16 and balanced_first(191) == 191 and balanced_first(64) == 8
    assert is_balanced(grid_code(16, 12)) and is_balanced(grid_code(12, 16)) and is_balanced(grid_code(191, 1))
    assert not is_balanced(grid_code(24, 8)) and not is_balanced(grid_code(4, 63))


def test_an_uneven_grid_beats_every_balanced_split() -> None:
    """N over 4 and K over 63 (252 slices; the balanced split of 252 is 18 x 14) on 2 clusters over N."""
    point = {
        "clusters": 2, "cluster_role": "n", "slice_grid": grid_code(4, 63), "slice_role": "nk", "shift": False,
        "double_buffer": True, "packet_k": 16, "packet_free": "m", "feed_flits": 1, "inner": "k", "rows": 4,
        "trf_split": 16,
    }  # fmt: skip
    mapping = T.mapping(CONV, point)
    assert T.check(CONV, mapping) == []
    uneven = T.cost(CONV, mapping).cycles / T.hw.clock_hz
    assert all(point[p.name] in p.choices for p in T.space(CONV).params)  # a point of the space
    balanced = exhaustive_best(balanced_space())
    assert uneven < balanced / 1.04  # 4,515 ns against 4,716 ns when measured
