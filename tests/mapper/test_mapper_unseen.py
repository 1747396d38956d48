"""A study never spends a trial scoring a structure twice, and reaches every structure (issue #12).

A sampler that has converged keeps proposing the structure it likes; the study prunes such a
trial unscored and enqueues structures no trial has covered, so it proves the optimum within
``structures + log2`` trials even when the sampler proposes nothing new at all (`Stuck`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import optuna
import pytest

from mapper.bounds import StructureBounds
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.strategies import SAMPLERS, Encoding, split_params
from mapper.strategies.objective import Evaluator
from tests.mapper.fake_target import FakeMatmulTarget, matmul
from tests.mapper.test_mapper_bounds import BoundedFake

P = matmul(1024, 512, 2048)  # 896 points


class Stuck(optuna.samplers.BaseSampler):
    """Proposes the first choice of every parameter, every time: a sampler that learns nothing new."""

    def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
        return {}

    def sample_relative(self, study: Any, trial: Any, search_space: Any) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: Any, trial: Any, name: str, dist: Any) -> Any:
        return dist.choices[0] if isinstance(dist, optuna.distributions.CategoricalDistribution) else dist.low


@pytest.fixture
def stuck(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SAMPLERS, "random", lambda seed, n_obj, n_startup: Stuck())


@pytest.mark.parametrize("target", [FakeMatmulTarget(), BoundedFake()], ids=["generic", "hook"])
def test_a_stuck_sampler_still_reaches_every_structure_and_proves_the_optimum(stuck: None, target: Any) -> None:
    optimum = tune(P, FakeMatmulTarget(), SearchSettings(strategy="exhaustive"), validate=False).values
    s = SearchSettings(strategy="random", inner_points=8, max_trials=500, patience=0, warm_start=False)
    r = tune(P, target, s, validate=False)
    cert = r.certificate
    assert cert is not None and r.stop_reason == "space-exhausted" and r.proven_optimal and cert.complete
    assert r.values == optimum
    structures, c = cert.structures_total, r.counts
    assert structures == 112  # 896 points / 8 per structure
    # every structure costs at most one trial; the repeated proposals double the batch handed out each time
    assert c.trials - c.duplicates <= structures and c.duplicates <= math.ceil(math.log2(structures)) + 2
    assert c.points_scored == cert.scored * cert.inner_points  # no structure scored twice
    assert c.complete + c.infeasible + c.pruned_by_bound + c.duplicates == c.trials
    if isinstance(target, BoundedFake):  # structures handed out are bounded first: some never need a trial
        assert cert.pruned_by_bound > c.pruned_by_bound


def test_before_handing_out_structures_a_stuck_sampler_would_never_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same study with the hand-out switched off runs to its trial budget: the test above tests something."""
    monkeypatch.setitem(SAMPLERS, "random", lambda seed, n_obj, n_startup: Stuck())
    monkeypatch.setattr(Evaluator, "unseen", lambda self, n, deadline=None: [])
    s = SearchSettings(strategy="random", inner_points=8, max_trials=60, patience=0, warm_start=False)
    r = tune(P, FakeMatmulTarget(), s, validate=False)
    assert r.stop_reason == "trials" and not r.proven_optimal and r.counts.duplicates == 59


def test_unseen_hands_out_uncovered_structures_in_order_and_records_the_bounded_out() -> None:
    t = BoundedFake()
    space = t.space(P)
    structural, inner = split_params(space, 8)
    names = [p.name for p in structural]
    enc = Encoding.of(structural)
    ev = Evaluator(t, P, space, ("latency",), enc, tuple(p.name for p in inner), skip_seen=True)
    order = list(itertools.product(*(p.choices for p in structural)))
    ev.memo[order[0]] = ev._score(dict(zip(names, order[0], strict=True)))
    # no best known yet, so nothing is bounded out: the next three in the numbering, the scored one skipped
    assert ev.unseen(3) == [enc.encode(dict(zip(names, k, strict=True))) for k in order[1:4]]
    opt = tune(P, t, SearchSettings(strategy="exhaustive"), validate=False)  # the best is now the optimum
    ev.best_point, ev.best_values = opt.point, (opt.values["latency"],)
    ev.bounds = StructureBounds(t, P, "latency")
    assert opt.point is not None
    ev.bounds.learn_clock(opt.point)
    rest: list[dict[str, Any]] = []
    while batch := ev.unseen(1000):
        rest.extend(batch)
    # every structure is now scored, bounded out (recorded without a trial) or handed out, and only once
    pruned = [k for k, o in ev.memo.items() if o.bound is not None]
    assert 3 + len(rest) + len(ev.memo) == enc.size and pruned
    assert len({tuple(sorted(h.items())) for h in rest}) == len(rest)
    best = ev.best_values[0]  # type: ignore[index]
    for k in pruned:  # a structure recorded as bounded out truly cannot beat the best
        assert (ev.memo[k].bound or 0.0) * (1 + 1e-9) >= best
        assert t.structure_bound(P, dict(zip(names, k, strict=True))) * (1 + 1e-9) >= best
