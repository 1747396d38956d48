"""The mapper's test double honours the contract the mapper relies on (as real targets do)."""

from __future__ import annotations

import math

import numpy as np

from tests.mapper.fake_target import FakeMatmulTarget, matmul


def test_fake_scorer_agrees_with_check_and_cost() -> None:
    t, p = FakeMatmulTarget(), matmul(256, 128, 512)
    cols = t.space(p).columns()
    s = t.score_batch(p, cols)
    n = len(cols["tm"])
    assert 0 < int(np.sum(s.feasible)) < n  # some points infeasible, some not
    for i in range(n):
        pt = {k: v[i].item() for k, v in cols.items()}
        m = t.mapping(p, pt)
        assert (t.check(p, m) == []) == bool(s.feasible[i])
        if s.feasible[i]:
            assert math.isclose(t.cost(p, m).seconds, s.objectives["latency"][i], rel_tol=1e-9)
            assert t.cost(p, m).cycles >= t.lower_bound(p).cycles


def test_fake_check_explains_capacity() -> None:
    t, p = FakeMatmulTarget(), matmul()
    v = t.check(p, t.mapping(p, {"stationary": "A", "tm": 512, "tn": 512, "tk": 256}))
    assert [x.code for x in v] == ["sram-capacity"] and "KiB" in v[0].message
    v = t.check(p, t.mapping(p, {"stationary": "A", "tm": 8, "tn": 8, "tk": 512}))
    assert [x.code for x in v] == ["tk-limit"]
