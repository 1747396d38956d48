"""The Tensix whole-space table: scoring by choice code, value columns of any type, the per-problem memo.

`score_codes` gathers from a table priced once per problem; `score_batch` codes value columns first
and prices values outside the space with the general formulas. Both must agree with `check`/`cost`
point by point, whatever the column types. The rank resolution and divisor helpers the table uses
are checked against direct transcriptions of their rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from costmodels.choice_codes import SpaceCoder
from costmodels.registry import get_target
from costmodels.tenstorrent.cost import SUBBLOCKS
from costmodels.tenstorrent.resolve import block_divisors, resolve_ranks
from costmodels.tenstorrent.scoring import AXES
from workload.conv2d import conv2d
from workload.einsum import einsum

T = get_target("blackhole-p150", {"fidelities": ["LoFi", "HiFi4"], "bf16_accumulation": True})
CONV = conv2d(batch=2, in_channels=32, out_channels=64, input_height=20, input_width=20, kernel=3, padding=1)
GEMM = einsum("mk,kn->mn", {"m": 1024, "k": 512, "n": 768}, dtype="bf16", weight=1)


def _random_codes(problem: Any, n: int, seed: int) -> dict[str, np.ndarray]:
    space = T.space(problem)
    rng = np.random.default_rng(seed)
    return {p.name: rng.integers(0, len(p.choices), n).astype(np.intp) for p in space.params}


def _point(cols: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    return {k: (v[i].item() if isinstance(v[i], np.generic) else v[i]) for k, v in cols.items()}


@pytest.mark.parametrize("problem", [CONV, GEMM], ids=["conv", "gemm"])
def test_codes_agree_with_check_and_cost(problem: Any) -> None:
    codes = _random_codes(problem, 400, 0)
    cols = SpaceCoder(T.space(problem)).decode(codes)
    sc = T.score_codes(problem, codes)
    assert sc.feasible.any() and not sc.feasible.all()
    for i in range(0, 400, 3):
        m = T.mapping(problem, _point(cols, i))
        ok = T.check(problem, m) == []
        assert bool(sc.feasible[i]) == ok
        if ok:
            rep = T.cost(problem, m)
            assert sc.objectives["latency"][i] == pytest.approx(rep.seconds, rel=1e-12)
            assert sc.objectives["offchip_bytes"][i] == pytest.approx(rep.offchip_bytes, rel=1e-12)
            assert sc.objectives["footprint"][i] == pytest.approx(rep.footprint_bytes, rel=1e-12)
        else:
            assert all(np.isinf(v[i]) for v in sc.objectives.values())


def test_value_columns_of_any_type_score_as_the_codes() -> None:
    codes = _random_codes(CONV, 300, 1)
    cols = SpaceCoder(T.space(CONV)).decode(codes)
    ref = T.score_codes(CONV, codes)
    variants: list[dict[str, np.ndarray]] = [cols]
    for dtype in (np.int32, np.int16, np.uint8, object):  # other integer widths; Python objects
        variants.append({k: (v.astype(dtype) if v.dtype.kind == "i" else v) for k, v in cols.items()})
    variants.append({k: v.astype(object) for k, v in cols.items()})  # every column of Python objects
    variants.append({k: (v.astype("U40") if v.dtype.kind == "U" else v) for k, v in cols.items()})  # wider strings
    narrow = dict(cols)
    narrow["memory"] = np.array(cols["memory"].tolist())  # as wide as the values given, not as the choices
    narrow["math_fidelity"] = np.array([str(f) for f in cols["math_fidelity"]], dtype="U5")
    variants.append(narrow)
    for v in variants:
        sc = T.score_batch(CONV, v)
        assert np.array_equal(sc.feasible, ref.feasible)
        for name, arr in ref.objectives.items():
            assert np.array_equal(sc.objectives[name], arr), name


def test_values_outside_the_space_take_the_general_formulas() -> None:
    """Values the space does not offer are priced by the same formulas, point by point; the rest by code."""
    codes = _random_codes(GEMM, 120, 2)
    cols = {k: v.astype(object) for k, v in SpaceCoder(T.space(GEMM)).decode(codes).items()}
    odd = {
        "act_block_w_div": 3,  # not a choice (1, 2, 4)
        "subblock_rank": 9,  # past the end: the last feasible sub-block
        "act_block_h_rank": -1,
        "layout": "height/3",
        "math_fidelity": "HiFi2",  # a fidelity the policy does not allow
        "memory": "dram",  # not a placement
        "in0_block_w": 3,  # does not divide K = 16 tiles
        "act_double_buffer": 1,  # an int, not a bool
    }
    for j, (name, value) in enumerate(odd.items()):
        cols[name][j * 10 : j * 10 + 10] = value
    mixed = T.score_batch(GEMM, cols)
    by_code = T.score_codes(GEMM, codes)
    rest = slice(len(odd) * 10, None)
    assert np.array_equal(mixed.objectives["latency"][rest], by_code.objectives["latency"][rest])
    assert mixed.feasible[: len(odd) * 10].any() and not mixed.feasible[: len(odd) * 10].all()
    for i in range(len(odd) * 10):
        m = T.mapping(GEMM, _point(cols, i))
        ok = T.check(GEMM, m) == []
        assert bool(mixed.feasible[i]) == ok, _point(cols, i)
        if ok:
            assert mixed.objectives["latency"][i] == pytest.approx(T.cost(GEMM, m).seconds, rel=1e-12)


def test_chunks_of_any_size_and_order() -> None:
    codes = _random_codes(CONV, 500, 3)
    whole = T.score_codes(CONV, codes)
    for lo, hi in ((0, 0), (7, 8), (100, 357)):
        part = T.score_codes(CONV, {k: v[lo:hi] for k, v in codes.items()})
        assert part.feasible.shape == (hi - lo,)
        assert np.array_equal(part.objectives["latency"], whole.objectives["latency"][lo:hi])
    for dtype in (np.int8, np.int32, np.uint16):  # codes of a narrower type index the same points
        narrow = T.score_codes(CONV, {k: v.astype(dtype) for k, v in codes.items()})
        assert np.array_equal(narrow.objectives["latency"], whole.objectives["latency"])
    order = np.random.default_rng(4).permutation(500)
    shuffled = T.score_codes(CONV, {k: v[order] for k, v in codes.items()})
    assert np.array_equal(shuffled.objectives["footprint"], whole.objectives["footprint"][order])
    empty = T.score_batch(CONV, {k: v[:0] for k, v in T.space(CONV).columns().items()})
    assert empty.feasible.shape == (0,) and empty.objectives["latency"].shape == (0,)


def test_split_reader_leaves_a_matmul_unchanged() -> None:
    """The table prices a matmul at one split_reader value: the formulas must not depend on it there."""
    codes = _random_codes(GEMM, 60, 8)
    cols = SpaceCoder(T.space(GEMM)).decode(codes)
    priced = 0
    for i in range(60):
        point = _point(cols, i)
        a, b = (T.mapping(GEMM, {**point, "split_reader": v}) for v in (False, True))
        assert [v.code for v in T.check(GEMM, a)] == [v.code for v in T.check(GEMM, b)]
        if not T.check(GEMM, a):
            assert T.cost(GEMM, a).seconds == T.cost(GEMM, b).seconds
            priced += 1
    assert priced > 5
    flipped = T.score_codes(GEMM, {**codes, "split_reader": 1 - codes["split_reader"]})
    assert np.array_equal(flipped.objectives["latency"], T.score_codes(GEMM, codes).objectives["latency"])
    # a conv reads its windows through the split reader: there the choice does change the time
    conv_codes = _random_codes(CONV, 400, 9)
    base = T.score_codes(CONV, conv_codes).objectives["latency"]
    other = T.score_codes(CONV, {**conv_codes, "split_reader": 1 - conv_codes["split_reader"]})
    assert not np.array_equal(base, other.objectives["latency"])


def test_unsupported_problem_scores_nothing_feasible() -> None:
    unary = einsum("ij->i", {"i": 8, "j": 8}, dtype="bf16")
    sc = T.score_codes(unary, {"layout": np.zeros(3, dtype=np.intp)})
    assert not sc.feasible.any() and np.isinf(sc.objectives["latency"]).all()


def test_one_preparation_per_problem() -> None:
    t = get_target("wormhole-n150")
    twin = conv2d(batch=2, in_channels=32, out_channels=64, input_height=20, input_width=20, kernel=3, padding=1)
    assert twin is not CONV and twin == CONV
    assert t.space(CONV) is t.space(twin)  # an equal problem shares the preparation
    prep = t.prepared(CONV)
    rng = np.random.default_rng(5)
    codes = {p.name: rng.integers(0, len(p.choices), 10).astype(np.intp) for p in t.space(CONV).params}
    t.score_codes(CONV, codes)
    table = prep.table
    t.score_codes(twin, codes)
    assert prep.table is table and t.prepared(twin) is prep
    assert set(AXES) == set(t.space(CONV).names())


def _resolve_reference(abh_t: int, pn_t: float, dst: int, rank: int) -> int:
    """ttnn's list, the rank-th pair that fits (hardware-facts.md §4.2 step 2); past the end the last one
    that fits; none fits: the last pair of the list."""
    fits = [i for i, (h, w) in enumerate(SUBBLOCKS) if h * w <= dst and abh_t % h == 0 and pn_t % w == 0
            and (h == 1 or pn_t == w)]  # fmt: skip
    if not fits:
        return len(SUBBLOCKS) - 1
    return fits[rank] if 0 <= rank < len(fits) else fits[-1]


def test_resolve_ranks_follows_ttnn_sub_block_order() -> None:
    hw = get_target("wormhole-n150").hardware
    rng = np.random.default_rng(7)
    n = 3000
    ranks = 6
    divs = rng.integers(1, 25, (n, ranks))
    lt = {"divs": divs, "pn_t": rng.integers(1, 12, n).astype(np.float64)}
    lay = np.arange(n)
    rank_h = rng.integers(0, ranks + 2, n)
    rank_s = rng.integers(-2, 8, n)
    fp32 = rng.integers(0, 2, n).astype(bool)
    abh_t, sb_h, sb_w = resolve_ranks(lt, hw, lay, rank_h, rank_s, fp32)
    for i in range(n):
        a = int(divs[i, min(rank_h[i], ranks - 1)])
        dst = hw.dst_tiles_fp32 if fp32[i] else hw.dst_tiles
        assert abh_t[i] == a
        assert (sb_h[i], sb_w[i]) == SUBBLOCKS[_resolve_reference(a, lt["pn_t"][i], dst, int(rank_s[i]))]


def test_block_divisors_are_the_divisors_up_to_the_limit() -> None:
    for n in range(1, 2000):
        for limit in (1, 7, 341, 5000):
            assert block_divisors(n, limit) == tuple(d for d in range(n, 0, -1) if n % d == 0 and d <= limit)
