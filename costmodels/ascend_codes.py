"""Integer codes for the columns of a batch of points (the first step of the Ascend scorer).

`score_batch` receives one column per parameter: numpy int64, bool or fixed-width string
arrays from `SearchSpace.columns()` and the mapper, or object arrays from `check`/`cost`.
Each column becomes an index into a tuple of distinct values, so that everything that depends
on one parameter (or a few) is computed once per distinct value and gathered by index.

Typed columns whose values are all among the space's choices take a fast path (a lookup table
for integers, the bit pattern for booleans, a perfect hash of the characters for the grid
strings): a few numpy passes, no sorting. Anything else (object arrays, values outside the
choices) falls back to `np.unique`, with the distinct values found; the cost tables are then
built over those values instead, so both paths price a point identically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np
from numpy.lib.stride_tricks import as_strided

Kind = Literal["int", "bool", "str"]
_HASH_MULTIPLIERS = tuple(np.uint64(m) for m in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9))


@dataclass(frozen=True)
class Encoded:
    """One column as codes into `values` (the distinct values the tables are built over)."""

    codes: np.ndarray  # int64, one per point
    values: tuple[object, ...]
    lo: int  # smallest and largest code present
    hi: int


def encode(
    col: np.ndarray, kind: Kind, choices: tuple[object, ...], convert: Callable[[np.ndarray], np.ndarray]
) -> Encoded:
    """Codes of one column; `convert` turns a column into the typed array the generic path uniques."""
    fast = _fast(col, kind, choices)
    if fast is not None:
        codes = fast
        lo, hi = int(codes.min()), int(codes.max())
        if lo >= 0:
            return Encoded(codes=codes, values=choices, lo=lo, hi=hi)
    typed = convert(np.asarray(col))
    uniq, inv = np.unique(typed, return_inverse=True)
    codes = inv.reshape(-1).astype(np.int64, copy=False)
    return Encoded(
        codes=codes, values=tuple(u.item() if isinstance(u, np.generic) else u for u in uniq), lo=0, hi=len(uniq) - 1
    )


def _fast(col: np.ndarray, kind: Kind, choices: tuple[object, ...]) -> np.ndarray | None:
    """Codes into `choices` (-1 where a value is not a choice), or None if the column is not typed."""
    if not isinstance(col, np.ndarray) or col.ndim != 1:
        return None
    if kind == "int" and col.dtype.kind in "iu":
        lut = _int_lut(tuple(int(c) for c in choices))  # type: ignore[call-overload]
        return None if lut is None else np.take(lut, col, mode="clip")
    if kind == "bool" and col.dtype == np.bool_:
        if tuple(choices) == (True, False):
            return 1 - col.astype(np.int64)
        if tuple(choices) == (False, True):
            return col.astype(np.int64)
        return None
    if kind == "str" and col.dtype.kind == "U":
        return _str_codes(col, tuple(str(c) for c in choices))
    return None


@cache
def _int_lut(choices: tuple[int, ...]) -> np.ndarray | None:
    """value -> code for positive integer choices; index 0 and the last slot read -1 (clip targets)."""
    if not choices or min(choices) <= 0 or max(choices) > 1 << 20:
        return None
    lut = np.full(max(choices) + 2, -1, dtype=np.int64)
    lut[list(choices)] = np.arange(len(choices))
    return lut


def _keys(col: np.ndarray) -> np.ndarray | None:
    """The characters of each string of a ``<U1``..``<U8`` column packed into one uint64 (ASCII only)."""
    n, w = col.shape[0], col.dtype.itemsize // 4
    if w > 8 or n == 0:
        return None
    chars = np.ascontiguousarray(col).view(np.uint32)
    if int(chars.max()) >= 128:
        return None
    buf = np.zeros(-(-(n * w + 8) // 8) * 8, dtype=np.uint8)
    buf[: n * w] = chars
    words = as_strided(buf.view(np.uint64), shape=(n,), strides=(w,))  # unaligned 8-byte reads at each string
    return words & np.uint64((1 << (8 * w)) - 1) if w < 8 else words.copy()


@cache
def _str_table(choices: tuple[str, ...], width: int) -> tuple[np.ndarray, np.uint64, np.uint64, np.ndarray] | None:
    """A perfect hash of the choices' keys: (known keys, multiplier, shift, slot -> code)."""
    if any(len(c) > width or not c.isascii() for c in choices):
        return None
    known = _keys(np.asarray(choices, dtype=f"<U{width}"))
    if known is None:
        return None
    for bits in range(max(1, len(choices) - 1).bit_length() + 1, 17):
        for mult in _HASH_MULTIPLIERS:
            slots = (known * mult) >> np.uint64(64 - bits)
            if len(set(slots.tolist())) == len(choices):
                table = np.zeros(1 << bits, dtype=np.int64)
                table[slots.astype(np.int64)] = np.arange(len(choices))
                return known, mult, np.uint64(64 - bits), table
    return None


def _str_codes(col: np.ndarray, choices: tuple[str, ...]) -> np.ndarray | None:
    width = col.dtype.itemsize // 4
    table = _str_table(choices, width)
    keys = _keys(col)
    if table is None or keys is None:
        return None
    known, mult, shift, slots = table
    codes = np.take(slots, ((keys * mult) >> shift).astype(np.int64))
    if not np.array_equal(np.take(known, codes), keys):
        return None  # a string that is not a choice hashed onto one
    return codes


def flat_index(codes: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """Row-major index of each point into an array of shape `sizes` (codes outermost first)."""
    idx = codes[0]
    for c, size in zip(codes[1:], sizes[1:], strict=True):
        idx = idx * size + c
    return idx
