"""Choice codes (costmodels/choice_codes.py): value columns to choice indices and back, for every column type.

Every fast path (integer table, booleans, string positions) must give what a plain dictionary
lookup by type and value gives, and a value outside the choices must read UNKNOWN, never a
neighbouring choice.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodels.choice_codes import UNKNOWN, ChoiceCoder, SpaceCoder, score_values
from costmodels.problem_memo import ProblemMemo
from costmodels.protocol import BatchScore, Param, SearchSpace
from workload.einsum import einsum


def slow(choices: tuple[object, ...], values: list[object]) -> list[int]:
    index = {(type(c), c): i for i, c in enumerate(choices)}
    return [index.get((type(v.item() if isinstance(v, np.generic) else v), v), UNKNOWN) for v in values]


INT_CHOICES = st.lists(st.integers(-5, 3000), min_size=1, max_size=12, unique=True).map(tuple)
STR_CHOICES = st.lists(st.text("abcxyz-_01", min_size=1, max_size=9), min_size=1, max_size=10, unique=True).map(tuple)


@settings(max_examples=60, deadline=None)
@given(choices=INT_CHOICES, extra=st.lists(st.integers(-10, 4000), max_size=40), dtype=st.sampled_from(["i8", "u2"]))
def test_integer_columns_code_like_a_dictionary(choices: tuple[int, ...], extra: list[int], dtype: str) -> None:
    values = [c for c in choices for _ in range(3)] + extra
    if dtype == "u2":
        values = [v for v in values if v >= 0]
    col = np.asarray(values, dtype=dtype)
    assert ChoiceCoder(choices)(col).tolist() == slow(choices, [int(v) for v in values])


@settings(max_examples=60, deadline=None)
@given(choices=STR_CHOICES, extra=st.lists(st.text("abcxyz-_01é", max_size=10), max_size=40))
def test_string_columns_code_like_a_dictionary(choices: tuple[str, ...], extra: list[str]) -> None:
    values = list(choices) * 2 + extra
    col = np.asarray(values, dtype=str)
    assert ChoiceCoder(choices)(col).tolist() == slow(choices, values)
    assert ChoiceCoder(choices)(np.asarray(values, dtype=object)).tolist() == slow(choices, values)


def test_a_string_that_shares_the_distinguishing_characters_is_not_a_choice() -> None:
    coder = ChoiceCoder(("1x8", "2x4", "4x2"))
    assert coder.kind == "str"
    assert coder(np.asarray(["1x8", "1y8", "2x4", "4x2 ", "4x"])).tolist() == [0, UNKNOWN, 1, UNKNOWN, UNKNOWN]


@pytest.mark.parametrize("col", [np.zeros(0, "U3"), np.zeros(0, int), np.zeros(0, bool), np.zeros(0, object)])
def test_empty_columns_give_no_codes(col: np.ndarray) -> None:
    for choices in (("1x8", "2x4"), (1, 2), (True, False), (1, "k")):
        out = ChoiceCoder(choices)(col)
        assert out.shape == (0,) and out.dtype == np.intp


def test_booleans_never_read_as_integers_and_back() -> None:
    assert ChoiceCoder((1, 2))(np.asarray([True, False, True])).tolist() == [UNKNOWN] * 3
    assert ChoiceCoder((True, False))(np.asarray([1, 0])).tolist() == [UNKNOWN] * 2
    assert ChoiceCoder((True, False))(np.asarray([False, True])).tolist() == [1, 0]
    mixed = ChoiceCoder((1, "n", True))
    assert mixed(np.asarray([True, 1, "n", np.int64(1), 2], dtype=object)).tolist() == [2, 0, 1, 0, UNKNOWN]


def test_large_integer_columns_go_through_their_distinct_values() -> None:
    coder = ChoiceCoder((1, 1 << 30))  # span too wide for a table
    assert coder.kind == "generic"
    col = np.asarray([1 << 30, 1, 7] * 50, dtype=np.int64)
    assert coder(col).tolist() == [1, 0, UNKNOWN] * 50


SPACE = SearchSpace(
    params=(
        Param(name="tile", choices=(64, 128, 512)),
        Param(name="grid", choices=("1x8", "2x4", "8x1")),
        Param(name="db", choices=(True, False)),
        Param(name="mix", choices=(1, "k")),
    )
)


def test_space_coder_round_trips_every_point_in_c_order() -> None:
    coder = SpaceCoder(SPACE)
    cols = SPACE.columns()
    codes, known = coder.encode(cols)
    assert known.all()
    shape = tuple(len(p.choices) for p in SPACE.params)
    digits = np.unravel_index(np.arange(SPACE.size), shape)  # C order: the point numbering
    assert all(np.array_equal(codes[p.name], d) for p, d in zip(SPACE.params, digits, strict=True))
    back = coder.decode(codes)
    for name, col in cols.items():
        assert back[name].dtype == col.dtype
        assert back[name].tolist() == col.tolist()


def test_space_coder_names_what_is_wrong() -> None:
    coder = SpaceCoder(SPACE)
    cols = {k: v[:4] for k, v in SPACE.columns().items()}
    with pytest.raises(ValueError, match="no column for parameter 'db'"):
        coder.encode({k: v for k, v in cols.items() if k != "db"})
    with pytest.raises(ValueError, match="different lengths"):
        coder.encode({**cols, "tile": cols["tile"][:2]})
    bad = {**cols, "tile": np.asarray([64, 96, 96, 128])}
    codes, known = coder.encode(bad)
    assert known.tolist() == [True, False, False, True]
    assert re.fullmatch(r"tile=96 is not a choice .* \[64, 128, 512\]", coder.unknown_message(bad, codes))


def _by_codes(codes: dict[str, np.ndarray]) -> BatchScore:
    lat = codes["tile"].astype(float) + 1
    return BatchScore(feasible=lat > 1, objectives={"latency": np.where(lat > 1, lat, np.inf)})


def test_score_values_sends_unknown_points_to_the_general_path_or_names_them() -> None:
    coder = SpaceCoder(SPACE)
    cols = {k: v[:6].copy() for k, v in SPACE.columns().items()}
    cols["tile"] = np.asarray([64, 96, 128, 512, 96, 64])
    seen: list[np.ndarray] = []

    def general(values: dict[str, np.ndarray]) -> BatchScore:
        seen.append(values["tile"])
        return BatchScore(feasible=np.ones(len(values["tile"]), bool), objectives={"latency": values["tile"] * 10.0})

    s = score_values(coder, cols, _by_codes, general)
    assert seen[0].tolist() == [96, 96]
    assert s.objectives["latency"].tolist() == [np.inf, 960.0, 2.0, 3.0, 960.0, np.inf]
    assert s.feasible.tolist() == [False, True, True, True, True, False]
    with pytest.raises(ValueError, match="tile=96 is not a choice"):
        score_values(coder, cols, _by_codes)


def test_problem_memo_builds_once_per_problem_and_forgets_the_oldest() -> None:
    built: list[str] = []
    memo: ProblemMemo[str] = ProblemMemo(lambda p: built.append(p.label or "") or (p.label or ""), size=2)
    a = einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 8}, label="a")
    a_again = einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 8}, label="a")  # equal, not identical
    b = einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 16}, label="b")
    c = einsum("mk,kn->mn", {"m": 8, "k": 8, "n": 32}, label="c")
    assert [memo.get(a), memo.get(a), memo.get(a_again)] == ["a"] * 3
    assert built == ["a"]
    memo.get(b)
    memo.get(c)  # a is the least recently used: dropped
    assert len(memo) == 2
    memo.get(a)
    assert built == ["a", "b", "c", "a"]
