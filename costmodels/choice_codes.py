"""Choice codes: each value of a point as its position among the parameter's choices.

The mapper hands a target *code columns* (`Target.score_codes`): for each parameter of
``space(problem)``, an integer array holding the index of each point's choice. Targets gather
their per-choice tables with those indices directly, so scoring pays no per-point decoding.
`Target.score_batch` takes *value columns* (the public form: `SearchSpace.columns()`, a user's
points); `SpaceCoder.encode` turns them into codes here, once for every family:

- integers and booleans through a lookup table over the choices' range (values outside it, and
  values that are no choice, read ``UNKNOWN``);
- ASCII strings through the few character positions that tell the choices apart, then one exact
  comparison with the choice they name, so a value outside the space is never misread;
- anything else (object arrays, mixed types, numpy scalars) value by value, by type and value,
  so ``True`` never reads as the choice ``1``.

`score_values` is the `score_batch` every family shares: encode, score the known points by
code, and send points with a value outside the space to the family's general formulas (or name
the parameter in a ``ValueError`` when the family has none).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from costmodels.protocol import BatchScore, Choice, SearchSpace

#: code of a value that is not a choice of its parameter
UNKNOWN = -1
#: widest integer range tabulated (choices spanning more go value by value)
MAX_INT_SPAN = 1 << 20

ScoreFn = Callable[[dict[str, np.ndarray]], BatchScore]


def plain(v: Any) -> Any:
    """A numpy scalar as the Python value it holds (anything else unchanged)."""
    return v.item() if isinstance(v, np.generic) else v


def row_point(columns: dict[str, np.ndarray], i: int) -> dict[str, Choice]:
    """Row `i` of value columns as a point of plain Python values."""
    return {k: plain(v[i]) for k, v in columns.items()}


class ChoiceCoder:
    """Value column -> code of each value among `choices` (``UNKNOWN`` where it is none of them)."""

    def __init__(self, choices: tuple[Choice, ...]) -> None:
        self.choices = choices
        self.index: dict[tuple[type, object], int] = {(type(c), c): i for i, c in enumerate(choices)}
        self.kind = "generic"
        if choices and all(type(c) is bool for c in choices):
            self.kind = "bool"
            self.lut = np.full(2, UNKNOWN, dtype=np.intp)
            for i, c in enumerate(choices):
                self.lut[int(c)] = i
        elif choices and all(type(c) is int for c in choices):
            ints = [int(c) for c in choices]
            lo, hi = min(ints), max(ints)
            if hi - lo <= MAX_INT_SPAN:
                self.kind = "int"
                self.base = lo - 1  # slot 0 and the last slot stay UNKNOWN: clipping lands there
                self.lut = np.full(hi - self.base + 2, UNKNOWN, dtype=np.intp)
                for i, c in enumerate(ints):
                    self.lut[c - self.base] = i
        elif choices and all(type(c) is str and c.isascii() for c in choices):
            plan = _string_plan(tuple(str(c) for c in choices))
            if plan is not None:
                self.kind = "str"
                self.pos, self.pos_luts, self.key_lut = plan
                self.strings = np.asarray(choices, dtype=str)

    def __call__(self, col: np.ndarray) -> np.ndarray:
        col = np.asarray(col)
        if col.ndim != 1:
            col = col.reshape(-1)
        if col.size == 0:
            return np.zeros(0, dtype=np.intp)
        k = col.dtype.kind
        if self.kind == "bool" and k == "b":
            return self.lut[col.view(np.uint8)]
        if self.kind == "int" and k in "iu":
            if k == "u" or col.dtype.itemsize > 8:
                col = col.astype(np.int64)  # huge unsigned values wrap negative: clipped to UNKNOWN
            return np.take(self.lut, col - self.base, mode="clip")
        if self.kind == "str" and k == "U" and col.dtype.itemsize // 4 > max(self.pos):
            return self._strings(col)
        if k in "biuU" and col.size > 64:
            return self._distinct(col)
        return self._values(col.tolist())

    def _strings(self, col: np.ndarray) -> np.ndarray:
        chars = np.ascontiguousarray(col).view(np.uint32).reshape(col.size, -1)
        key = np.take(self.pos_luts[0], chars[:, self.pos[0]], mode="clip")
        for lut, p in zip(self.pos_luts[1:], self.pos[1:], strict=True):
            key += np.take(lut, chars[:, p], mode="clip")
        code = np.take(self.key_lut, key, mode="clip")
        known = code >= 0
        same = col == self.strings[np.where(known, code, 0)]  # exact: the key only names a candidate
        return np.where(known & same, code, UNKNOWN)

    def _distinct(self, col: np.ndarray) -> np.ndarray:
        uniq, inv = np.unique(col, return_inverse=True)
        return self._values(uniq.tolist())[inv.reshape(-1)]

    def _values(self, values: list[object]) -> np.ndarray:
        out = np.empty(len(values), dtype=np.intp)
        get = self.index.get
        for j, v in enumerate(values):
            v = plain(v)
            try:
                out[j] = get((type(v), v), UNKNOWN)
            except TypeError:  # unhashable: no choice
                out[j] = UNKNOWN
        return out


@cache
def _string_plan(choices: tuple[str, ...]) -> tuple[list[int], list[np.ndarray], np.ndarray] | None:
    """Up to 3 character positions that tell the choices apart, their tables and the key -> code table."""
    width = max(len(c) for c in choices)
    if width == 0:
        return None
    mat = np.zeros((len(choices), width), dtype=np.int64)
    for i, c in enumerate(choices):
        mat[i, : len(c)] = [ord(ch) for ch in c]

    def distinct(pos: list[int]) -> int:
        return len({tuple(mat[i, pos]) for i in range(len(choices))})

    pos: list[int] = []
    while (not pos or distinct(pos) < len(choices)) and len(pos) < 3:
        pos.append(max(range(width), key=lambda p: distinct([*pos, p])))
    if distinct(pos) < len(choices):
        return None
    # per position: character -> its rank among the choices' characters there x radix; other
    # characters (and clipped non-ASCII) give a large negative key, which clips to key_lut[0].
    luts: list[np.ndarray] = []
    radix = 1
    keys = np.ones(len(choices), dtype=np.intp)  # keys start at 1: key_lut[0] is the UNKNOWN slot
    for p in pos:
        chars = sorted(set(mat[:, p].tolist()))
        lut = np.full(129, -(1 << 40), dtype=np.intp)
        for j, ch in enumerate(chars):
            lut[ch] = j * radix + (1 if not luts else 0)
        keys += lut[mat[:, p]] - (1 if not luts else 0)
        luts.append(lut)
        radix *= len(chars)
    key_lut = np.full(radix + 1, UNKNOWN, dtype=np.intp)
    key_lut[keys] = np.arange(len(choices))
    return pos, luts, key_lut


class SpaceCoder:
    """Codes of a whole space: encode value columns into codes, decode codes into value columns."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self.names = space.names()
        self.coders = tuple(ChoiceCoder(p.choices) for p in space.params)
        self._values = tuple(_choice_array(p.choices) for p in space.params)

    def encode(self, columns: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(codes per parameter, known) of value columns; ``known`` is False where some value is no choice."""
        missing = [nm for nm in self.names if nm not in columns]
        if missing:
            raise ValueError(f"no column for parameter {missing[0]!r}: give one column per parameter of the space")
        codes = {nm: c(columns[nm]) for nm, c in zip(self.names, self.coders, strict=True)}
        lengths = {len(v) for v in codes.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths {sorted(lengths)}: give one value per point in each")
        n = lengths.pop() if lengths else 0
        known = np.ones(n, dtype=bool)
        for v in codes.values():
            known &= v >= 0
        return codes, known

    def decode(self, codes: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Value columns of code columns, typed as `SearchSpace.columns()` types them."""
        return {nm: vals[np.asarray(codes[nm])] for nm, vals in zip(self.names, self._values, strict=True)}

    def unknown_message(self, columns: dict[str, np.ndarray], codes: dict[str, np.ndarray]) -> str:
        """What the first value outside the space is, and what the parameter accepts."""
        for nm, coder in zip(self.names, self.coders, strict=True):
            bad = np.flatnonzero(codes[nm] < 0)
            if bad.size:
                v = plain(np.asarray(columns[nm]).reshape(-1)[bad[0]])
                return f"{nm}={v!r} is not a choice of this space: use one of {list(coder.choices)}"
        return "every value is a choice of this space"


def _choice_array(choices: tuple[Choice, ...]) -> np.ndarray:
    mixed = len({type(c) for c in choices}) > 1
    return np.asarray(choices, dtype=object if mixed else None)


def score_values(
    coder: SpaceCoder, columns: dict[str, np.ndarray], by_codes: ScoreFn, general: ScoreFn | None = None
) -> BatchScore:
    """`score_batch` through codes: known points by `by_codes`, the rest by `general` (or a ``ValueError``)."""
    codes, known = coder.encode(columns)
    if known.all():
        return by_codes(codes)
    if general is None:
        raise ValueError(coder.unknown_message(columns, codes))
    n = known.size
    rest = ~known
    parts = [(known, by_codes({k: v[known] for k, v in codes.items()}))] if known.any() else []
    parts.append((rest, general({k: np.asarray(v).reshape(-1)[rest] for k, v in columns.items()})))
    feasible = np.zeros(n, dtype=bool)
    objectives = {o: np.full(n, np.inf) for o in parts[0][1].objectives}
    for mask, score in parts:
        feasible[mask] = np.asarray(score.feasible, dtype=bool)
        for o, arr in objectives.items():
            arr[mask] = np.asarray(score.objectives[o], dtype=np.float64)
    return BatchScore(feasible=feasible, objectives=objectives)
