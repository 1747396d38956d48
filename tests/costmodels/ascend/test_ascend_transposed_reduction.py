"""A row reduction whose kept axis is the contiguous one (``ji->i``) pays a transpose (issue #13).

TROWPROD/TROWSUM reduce the rows of an ND (row-major) src tile (pto-trowprod.txt, Constraints:
"Tile layout of src: ND fractal (isRowMajor ...)"; Math Interpretation: dst[i,0] = prod_j src[i,j]),
so ``ji->i`` loads its tiles DN and transposes them (TTRANS) first; ``ij->i`` does not. The TTRANS
price is an [ASSUMPTION] of costmodels/ascend/vector.py (one vector pass over the tile)."""

from __future__ import annotations

import numpy as np
import pytest

from costmodels.registry import get_target
from mapper.search import tune
from mapper.settings import SearchSettings
from workload.einsum import einsum
from workload.problem import Problem

PRESETS = ("ascend-910b", "ascend-a5")


def _p(expr: str, op: str, dtype: str = "f16", **sizes: int) -> Problem:
    return einsum(expr, sizes or {"i": 64, "j": 256}, dtype=dtype, out_dtype=dtype, reduce_op=op)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("op", ["mul", "add", "max"])
@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_column_contiguous_reduction_costs_more_at_the_same_point_and_at_the_optimum(
    preset: str, op: str, dtype: str
) -> None:
    t = get_target(preset)
    rows, cols = _p("ij->i", op, dtype), _p("ji->i", op, dtype)
    best_rows = tune(rows, t, SearchSettings(), validate=False)
    best_cols = tune(cols, t, SearchSettings(), validate=False)
    assert best_rows.cost is not None and best_cols.cost is not None and best_rows.point is not None
    assert best_cols.cost.cycles > best_rows.cost.cycles
    same = t.mapping(cols, best_rows.point)  # the same tiles, the other layout
    assert t.check(cols, same) == []
    c_rows, c_cols = t.cost(rows, t.mapping(rows, best_rows.point)), t.cost(cols, same)
    assert c_cols.cycles > c_rows.cycles
    assert any("TTRANS" in n and "contiguous axis i" in n for n in c_cols.notes), c_cols.notes
    assert not any("TTRANS" in n for n in c_rows.notes)
    assert same.knobs["load_layout"] == "DN" and t.mapping(rows, best_rows.point).knobs["load_layout"] == "ND"
    assert "TTRANS" in t.render(cols, same) and "TTRANS" not in t.render(rows, t.mapping(rows, best_rows.point))


@pytest.mark.parametrize(
    ("expr", "sizes", "transposed"),
    [
        ("ij->i", {"i": 64, "j": 256}, False),
        ("ji->i", {"i": 64, "j": 256}, True),
        ("ji->i", {"i": 1, "j": 256}, False),  # one row: the DN tile is ND
        ("ijk->ik", {"i": 4, "j": 64, "k": 16}, True),  # the kept k is innermost
        ("ikj->ik", {"i": 4, "j": 64, "k": 16}, False),
    ],
)
def test_which_layouts_need_the_transpose(expr: str, sizes: dict[str, int], transposed: bool) -> None:
    t = get_target("ascend-910b")
    p = _p(expr, "add", **sizes)
    r = tune(p, t, SearchSettings(), validate=False)
    assert r.mapping is not None and (r.mapping.knobs["load_layout"] == "DN") is transposed


@pytest.mark.parametrize("preset", PRESETS)
def test_score_batch_prices_the_transpose_like_cost(preset: str) -> None:
    t = get_target(preset)
    p = _p("ji->i", "mul")
    cols = t.space(p).columns()
    score = t.score_batch(p, cols)
    for i in np.flatnonzero(score.feasible)[:20]:
        point = {k: v[i].item() if hasattr(v[i], "item") else v[i] for k, v in cols.items()}
        assert score.objectives["latency"][i] == pytest.approx(t.cost(p, t.mapping(p, point)).objective("latency"))
