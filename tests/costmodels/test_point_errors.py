"""`Target.mapping` refuses a point it cannot read with a ValueError that names the value, where it priced it as
another point (a tile of 0 or -4 as a tile of 1, an order 'smkk') or raised a bare KeyError."""

from __future__ import annotations

from typing import Any

import pytest

from bench.published_configs import CATLASS, NKI, ONE_CORE, gemm, tt
from costmodels.registry import get_target
from workload.einsum import einsum


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"tile_stat": 0}, "tile_stat=0 must be a whole number of at least 1"),
        ({"tile_mov": -4}, "tile_mov=-4"),
        ({"block_k": 0}, "block_k=0"),
        ({"cores": True}, "cores=True"),
        ({"tile_k": 2.5}, "tile_k=2.5"),
        ({"order": "smkk"}, "permutation of s, m and k"),
        ({"order": "smx"}, "permutation of s, m and k"),
        ({"order": "sm"}, "permutation of s, m and k"),
        ({"shard": "zz"}, "shard='zz'"),
        ({"shard": "m0s"}, "shard='m0s'"),
        ({"shard": "m99999999999999999999s"}, "shard='m9999"),
        ({"acc": "x"}, "acc='x'"),
        ({"stationary": "left"}, "stationary='left'"),
    ],
)
def test_trainium_refuses_a_point_it_cannot_read(change: dict[str, Any], says: str) -> None:
    t, p = get_target("trn2", ONE_CORE), gemm(512, 512, 512)
    assert t.check(p, t.mapping(p, NKI)) == []
    with pytest.raises(ValueError, match="not a point of this target") as e:
        t.mapping(p, {**NKI, **change})
    assert says in str(e.value)
    point = dict(NKI)
    del point["order"]
    with pytest.raises(ValueError, match="order is missing"):
        t.mapping(p, point)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"base_m": 0}, "base_m=0"),
        ({"l1_k": 0}, "l1_k=0"),
        ({"base_n": -16}, "base_n=-16"),
        ({"base_k": True}, "base_k=True"),
        ({"double_buffer": 1}, "double_buffer=1 must be true or false"),
        ({"core_grid": "1x2x2x6"}, "is not BxMxN"),
    ],
)
def test_ascend_refuses_a_point_it_cannot_read(change: dict[str, Any], says: str) -> None:
    t, p = get_target("ascend-910b"), gemm(256, 1024, 512, "f16", "f16")
    good = {**CATLASS, "core_grid": "1x2x2"}
    assert t.check(p, t.mapping(p, good)) == []
    with pytest.raises(ValueError) as e:
        t.mapping(p, {**good, **change})
    assert says in str(e.value)
    rows = einsum("ij->i", {"i": 64, "j": 256}, dtype="f32", reduce_op="mul")
    with pytest.raises(ValueError, match="row_block=0"):
        t.mapping(rows, {"row_block": 0, "col_block": 8, "double_buffer": True})


def test_tensix_names_the_knobs_a_point_lacks() -> None:
    t, p = get_target("wormhole-n150"), gemm(1024, 1024, 1024)
    with pytest.raises(ValueError, match=r"memory, act_block_h, .* missing"):
        t.mapping(p, {"layout": "width/64"})
    knobs = tt("block/8x8", "l1-sharded", 128, 4, "1x4")
    assert t.check(p, t.mapping(p, knobs)) == []
    with pytest.raises(ValueError, match="missing"):
        t.mapping(p, {"layout": "block/8x8", "act_block_h_rank": 0})
