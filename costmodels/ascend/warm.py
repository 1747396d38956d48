"""Warm starts from the PTO rules of thumb (hardware-facts.md §3.1 Recommended GEMM base tiles)."""

from __future__ import annotations

from costmodels.ascend.space import CubeSetup
from costmodels.ascend.tiling import parse_grid, round_up, side_cores
from costmodels.protocol import Choice, SearchSpace
from workload import dtypes


def _snap(choices: tuple[Choice, ...], want: int) -> Choice:
    """The largest choice not above `want`, else the smallest choice."""
    nums = sorted(int(c) for c in choices)
    below = [c for c in nums if c <= want]
    return below[-1] if below else nums[0]


def recommended_tiles(s: CubeSetup) -> tuple[int, int, int, int]:
    """PTO's recommended GEMM tiles fitted to the buffers: (base_m, base_k, base_n, l1_k).

    hardware-facts.md §3.1 "Recommended GEMM base tiles" quotes PTO's
    performance-best-practices.md: A2/A3 baseM=128, baseK=64, baseN=256; A5 256/128/512.
    The A2/A3 triple is a TMATMUL that fits L0 for half inputs (L0A 16 KiB, L0B 32 KiB, L0C
    128 KiB of fp32: the §3.2 step 2 bounds, halved for ping-pong), so it is used as given.
    The A5 triple cannot be one TMATMUL: for half inputs its right tile is 128x512x2 B = 128 KiB
    (L0B is 64 KiB) and its fp32 accumulator 256x512x4 B = 512 KiB (L0C is 256 KiB, §3.1 Buffers
    A5). It does fit L1 (A 64 KiB + B 128 KiB, 384 KiB double-buffered of 512 KiB), so we read it
    as the L1-level block: an output block 256 rows by up to 512 columns, refilled from GM 128
    K-elements at a time, fed to the cube as the largest TMATMULs that fit L0 (the ratio kept).
    Applied that way: base_m = baseM; base_n = the largest of baseN, baseN/2, ... whose
    accumulator fits L0C (256 on A5); base_k = the largest of baseK, baseK/2, ... whose left and
    right tiles fit L0A/L0B with ping-pong (64 for half, 128 for int8/fp8, 32 for fp32); and
    l1_k = baseK / base_k so that one L1 chunk still spans baseK. For A5 half inputs this gives
    256x64x256 TMATMULs in 256x128 / 128x256 L1 chunks.
    """
    hw = s.hw
    rm, rk, rn = hw.recommended_base_mkn
    sa, sb = dtypes.info(s.left).bytes, dtypes.info(s.right).bytes
    fm, fn = hw.fractal_m, hw.fractal_n
    bm = rm
    bn = rn
    while bn > fn and round_up(bm, fm) * round_up(bn, fn) * 4 > hw.l0c_bytes:
        bn //= 2
    bk = rk
    while bk > s.k0 and (
        2 * round_up(bm, fm) * round_up(bk, s.k0) * sa > hw.l0a_bytes
        or 2 * round_up(bk, s.k0) * round_up(bn, fn) * sb > hw.l0b_bytes
    ):
        bk //= 2
    if (bm, bk, bn) == (rm, rk, rn):
        return bm, bk, bn, 4  # fits as one TMATMUL: K chunks of 4 base tiles per L1 load
    return bm, bk, bn, max(1, rk // bk)


def cube_warm_starts(s: CubeSetup, space: SearchSpace) -> list[dict[str, Choice]]:
    """PTO's recommended tiles (fitted to the buffers, `recommended_tiles`) on every offered grid no other
    offered grid matches or exceeds on every side (most cores first), then smaller variants on the first.

    A rule of thumb, not a proof (with the inputs in HBM a smaller grid can win: ascend/grids.py): with
    every legal grid offered no benchmark layer's latency optimum moved (bench.optima_unchanged), so the
    largest grids, those offered before, held them. A search that scores a structure (a grid and double
    buffering) per trial thus starts from each of them.
    """
    ch = {p.name: p.choices for p in space.params}
    rm, rk, rn, rl1k = recommended_tiles(s)
    variants = [(rm, rk, rn, rl1k), (rm, rk // 2, rn, 4), (rm, rk, rn // 2, 4), (rm // 2, rk, rn // 2, 4)]
    variants += [(rm // 2, rk // 2, rn // 2, 4), (64, 64, 64, 4), (32, 32, 32, 4), (16, 16, 16, 4)]
    # the cores of each side (a per-axis side: their product); offered most cores first (ascend/grids.py)
    sides = [tuple(side_cores(x) for x in parse_grid(str(g))) for g in ch["core_grid"]]
    largest, seen = [], set()
    for g, x in zip(ch["core_grid"], sides, strict=True):
        if x not in seen and not any(y != x and all(a >= b for a, b in zip(y, x, strict=True)) for y in sides):
            largest.append(g)  # the first of the grids with these cores per side (per-axis splits differ)
        seen.add(x)
    plan = [(variants[0], True, g) for g in largest]
    plan += [(v, db, ch["core_grid"][0]) for v in variants for db in (True, False)]
    out: list[dict[str, Choice]] = []
    for (bm, bk, bn, l1k), db, grid in plan:
        point: dict[str, Choice] = {
            "base_m": _snap(ch["base_m"], bm),
            "base_k": _snap(ch["base_k"], bk),
            "base_n": _snap(ch["base_n"], bn),
            "l1_m": _snap(ch["l1_m"], 1),
            "l1_k": _snap(ch["l1_k"], l1k),
            "l1_n": _snap(ch["l1_n"], 1),
            "double_buffer": db,
            "core_grid": grid,
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
