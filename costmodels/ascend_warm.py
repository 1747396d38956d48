"""Warm starts from the PTO rules of thumb (hardware-facts.md §3.1 Recommended GEMM base tiles)."""

from __future__ import annotations

from costmodels.ascend_hw import AscendHardware
from costmodels.protocol import Choice, SearchSpace


def _snap(choices: tuple[Choice, ...], want: int) -> Choice:
    """The largest choice not above `want`, else the smallest choice."""
    nums = sorted(int(c) for c in choices)
    below = [c for c in nums if c <= want]
    return below[-1] if below else nums[0]


def cube_warm_starts(hw: AscendHardware, space: SearchSpace) -> list[dict[str, Choice]]:
    """PTO's recommended base tiles first (A2/A3 128/64/256, A5 256/128/512), then smaller variants.

    The recommended tiles may not fit every dtype (A5's 256/128/512 needs 128 KiB of L0B for
    half inputs, twice the 64 KiB there is), so halved variants follow, double-buffered first.
    """
    ch = {p.name: p.choices for p in space.params}
    rm, rk, rn = hw.recommended_base_mkn
    variants = [(rm, rk, rn), (rm, rk // 2, rn), (rm, rk, rn // 2), (rm // 2, rk, rn // 2), (rm // 2, rk // 2, rn // 2)]
    variants += [(64, 64, 64), (32, 32, 32), (16, 16, 16)]
    out: list[dict[str, Choice]] = []
    for bm, bk, bn in variants:
        for db in (True, False):
            point: dict[str, Choice] = {
                "base_m": _snap(ch["base_m"], bm),
                "base_k": _snap(ch["base_k"], bk),
                "base_n": _snap(ch["base_n"], bn),
                "l1_m": _snap(ch["l1_m"], 1),
                "l1_k": _snap(ch["l1_k"], 4),
                "l1_n": _snap(ch["l1_n"], 1),
                "double_buffer": db,
                "core_grid": ch["core_grid"][0],
            }
            if point not in out:
                out.append(point)
    return out


def vector_warm_starts(space: SearchSpace) -> list[dict[str, Choice]]:
    """Whole rows in 64-row UB tiles, double-buffered, then larger and smaller row blocks.

    The target moves the ones that do not fit UB to the end.
    """
    ch = {p.name: p.choices for p in space.params}
    out: list[dict[str, Choice]] = []
    for rows in (64, 128, 32, 256, 16, 8):
        for col in ch["col_block"]:
            point: dict[str, Choice] = {
                "row_block": _snap(ch["row_block"], rows),
                "col_block": col,
                "double_buffer": True,
            }
            if point not in out:
                out.append(point)
    return out
