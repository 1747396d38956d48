"""Fast `score_batch` for Trainium: columns to flat point numbers, then a look-up in the priced grid.

The whole space of a problem is priced once (costmodels.trainium_grid, the same `evaluate` as
`check`/`cost`) and kept per target for the last few problems. Scoring a batch is then: turn each
column into its choice number times the parameter's stride in the enumeration order (one table
look-up per column; strings through the uint32 code points of their characters), add them up,
and gather the three objectives. Every value is checked: a value that is not a choice of the
space raises ``ValueError`` naming the parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from costmodels.protocol import SearchSpace

CHUNK = 1 << 15  # points decoded per pass (cache-sized)
_BAD = -(1 << 40)  # look-up entry of a value that is no choice: makes the flat number negative
_MAX_WIDTH = 8  # longest unicode column decoded by table (longer ones go through np.unique)
Tables = tuple[np.ndarray, np.ndarray, np.ndarray]


def _slow_codes(col: np.ndarray, choices: tuple[object, ...], name: str) -> np.ndarray:
    """Choice numbers through the distinct values (any dtype, object columns included)."""
    uniq, inv = np.unique(np.asarray(col), return_inverse=True)
    pos = {c: i for i, c in enumerate(choices)}
    try:
        lut = np.asarray([pos[u.item() if isinstance(u, np.generic) else u] for u in uniq], dtype=np.int64)
    except (KeyError, TypeError):
        bad = [u for u in uniq if (u.item() if isinstance(u, np.generic) else u) not in pos]
        raise ValueError(f"{name}={bad[0]!r} is not a choice of this space") from None
    return lut[inv.reshape(-1)]


class _IntDecoder:
    """Integer column -> choice number x stride, through a table indexed by the value."""

    def __init__(self, choices: tuple[int, ...], stride: int) -> None:
        top = max(choices)
        self.top = np.uint64(top + 1)
        self.lut = np.full(top + 2, _BAD, dtype=np.int64)
        for i, c in enumerate(choices):
            self.lut[c] = i * stride

    def __call__(self, col: np.ndarray) -> np.ndarray:
        v = np.minimum(col.astype(np.int64, copy=False).view(np.uint64), self.top)  # negatives wrap: too big
        return np.take(self.lut, v.astype(np.intp, copy=False), mode="clip")


class _StrDecoder:
    """Unicode column -> choice number x stride.

    The characters at a few positions that tell the choices apart index a table; then every
    character of every value is compared with the choice it was read as.
    """

    def __init__(self, choices: tuple[str, ...], stride: int, width: int) -> None:
        self.width = width
        fits = [(i, c) for i, c in enumerate(choices) if len(c) <= width and c.isascii()]
        rows = np.zeros((max(len(fits), 1), width), dtype=np.uint32)
        for r, (_, c) in enumerate(fits):
            rows[r, : len(c)] = [ord(x) for x in c]
        self.rows = rows
        self.pos: list[int] = []
        for p in range(width):  # greedy: add positions until the choices are told apart
            if len({tuple(rows[r, self.pos]) for r in range(len(fits))}) == len(fits):
                break
            self.pos.append(p)
        self.lut = np.full(128 ** len(self.pos), _BAD, dtype=np.int64)
        self.row_of = np.zeros(128 ** len(self.pos), dtype=np.intp)
        for r, (i, _) in enumerate(fits):
            key = 0
            for p in self.pos:
                key = key * 128 + int(rows[r, p])
            self.lut[key] = i * stride
            self.row_of[key] = r
        if not fits:
            self.lut[:] = _BAD

    def __call__(self, col: np.ndarray) -> np.ndarray:
        n = len(col)
        u = np.ascontiguousarray(col).view(np.uint32).reshape(n, self.width)
        key = np.zeros(n, dtype=np.intp)
        for p in self.pos:
            key = key * 128 + np.minimum(u[:, p], 127)
        out = np.take(self.lut, key, mode="clip")
        if not np.array_equal(u, np.take(self.rows, np.take(self.row_of, key, mode="clip"), axis=0, mode="clip")):
            out = np.full(n, _BAD, dtype=np.int64)  # some value differs from the choice its key names
        return out


Decoder = Callable[[np.ndarray], np.ndarray]


class _SlowDecoder:
    """Any column (object dtype, mixed types): through its distinct values."""

    def __init__(self, choices: tuple[object, ...], stride: int, name: str) -> None:
        self.choices, self.stride, self.name = choices, stride, name

    def __call__(self, col: np.ndarray) -> np.ndarray:
        return _slow_codes(col, self.choices, self.name) * self.stride


def decoders(space: SearchSpace, cols: dict[str, np.ndarray]) -> list[tuple[str, Decoder]]:
    """One decoder per parameter, chosen for the dtype of its column."""
    sizes = [len(p.choices) for p in space.params]
    out: list[tuple[str, Decoder]] = []
    for i, p in enumerate(space.params):
        stride = math.prod(sizes[i + 1 :])
        kind = np.asarray(cols[p.name]).dtype
        ints = [c for c in p.choices if type(c) is int and 0 <= c < (1 << 20)]
        strs = [c for c in p.choices if type(c) is str]
        if len(ints) == len(p.choices) and kind.kind in "iu":
            out.append((p.name, _IntDecoder(tuple(ints), stride)))
        elif len(strs) == len(p.choices) and kind.kind == "U" and kind.itemsize // 4 <= _MAX_WIDTH:
            out.append((p.name, _StrDecoder(tuple(strs), stride, kind.itemsize // 4)))
        else:
            out.append((p.name, _SlowDecoder(p.choices, stride, p.name)))
    return out


def flat_points(
    space: SearchSpace, cols: dict[str, np.ndarray], lo: int, hi: int, dec: list[tuple[str, Decoder]]
) -> np.ndarray:
    """Enumeration numbers of points ``lo..hi-1`` of the columns; ``ValueError`` on a value not in the space."""
    flat = np.zeros(hi - lo, dtype=np.int64)
    for name, d in dec:
        flat += d(np.asarray(cols[name])[lo:hi])
    if hi > lo and flat.min() < 0:
        for name, _ in dec:  # name the parameter (slow, error path only)
            _slow_codes(np.asarray(cols[name])[lo:hi], next(p.choices for p in space.params if p.name == name), name)
        raise ValueError("a value is not a choice of this space")
    return flat


def gather_scores(space: SearchSpace, cols: dict[str, np.ndarray], tables: Tables) -> Tables:
    """(latency, off-chip bytes, footprint) of every row of `cols`, chunk by chunk."""
    n = len(next(iter(cols.values())))
    out = tuple(np.empty(n) for _ in range(3))
    dec = decoders(space, cols)
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        flat = flat_points(space, cols, lo, hi, dec)
        for t, o in zip(tables, out, strict=True):
            np.take(t, flat, out=o[lo:hi], mode="clip")  # flat is checked: clip skips the buffered copy
    return out  # type: ignore[return-value]
