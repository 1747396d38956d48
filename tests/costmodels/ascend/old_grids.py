"""The core grids the Ascend space offered before every legal grid was (the tests compare with them)."""

from __future__ import annotations


def old_core_grids(cores: int, max_b: int, max_m: int, max_n: int) -> tuple[str, ...]:
    """The grids before every legal grid was offered: sides divisors of the cores or powers of two, Pareto-maximal."""
    sizes = sorted({d for d in range(1, cores + 1) if cores % d == 0} | {2**i for i in range(16) if 2**i <= cores})
    cand = [
        (b, m, n)
        for b in sizes
        if b <= max(1, max_b)
        for m in sizes
        if m <= max(1, max_m)
        for n in sizes
        if n <= max(1, max_n) and b * m * n <= cores
    ]
    keep = [c for c in cand if not any(o != c and all(x >= y for x, y in zip(o, c, strict=True)) for o in cand)]
    keep.sort(key=lambda c: (-(c[0] * c[1] * c[2]), c))
    return tuple(f"{b}x{m}x{n}" for b, m, n in keep)
