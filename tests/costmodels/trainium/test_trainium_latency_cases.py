"""Trainium's latency cases: a later dominance pass cuts each core split into its loop orders and exact block
sizes for latency beside off-chip bytes or energy (issue #12, two objectives; `refetch.footprint_cases` with
``latency``, `front_cells._live_cases`).

- admissible: every feasible point of a structure is, on latency, off-chip bytes and energy, no better than
  one of its splits' case rows (`bounds.split_cells` with ``latency_cases``), and the later pass keeps a
  structure against a front just worse than the structure's own exact front, on random small problems, on
  the presets and on parts with a small SBUF and few PSUM banks, where the capacities, the SBUF
  accumulation's adds and the padding of whole blocks bind;
- tighter: on a Llama-7B-like prefill GEMM the later pass leaves out structures whose core splits alone
  (the first pass's cells) stay live, each checked point by point.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from costmodels.trainium import front_cells
from costmodels.trainium.bounds import TILE_PARAMS, split_cells
from costmodels.trainium.front_cells import CaseYield
from costmodels.trainium.repeats import repeated_structures
from costmodels.trainium.target import TrainiumTarget
from mapper.bounds import RTOL, dominated_rows, live_structures
from mapper.pareto import pareto_front
from tests.costmodels.trainium.tile_structures import (
    every_tile_target,
    random_problem,
    structure_choices,
    structure_codes,
)
from workload.einsum import einsum
from workload.problem import Problem

#: parts where the capacities bind on small problems (`test_trainium_front_cells.SMALL_PARTS`), and the presets'
PARTS: list[dict[str, object]] = [{}, {"sbuf_partition_bytes": 4096}, {"sbuf_partition_bytes": 16384, "psum_banks": 2}]


def _problem(rng: random.Random) -> Problem:
    """Random small problems with several k tiles (several k blocks) and wider convs."""
    return random_problem(rng, m=(1, 300), k=(100, 3000), channels=(8, 200))


def _points(t: TrainiumTarget, p: Problem, flat: int, objectives: tuple[str, ...]) -> np.ndarray:
    s = t.score_codes(p, structure_codes(t.space(p), flat))
    values = np.stack([np.asarray(s.objectives[o], dtype=np.float64) for o in objectives], axis=1)
    return values[np.asarray(s.feasible)]


def _later_pass(t: TrainiumTarget, p: Problem, objectives: tuple[str, ...], front: np.ndarray, asked: np.ndarray):
    total = asked.size
    blocks = t.structure_front_cell_blocks(p, TILE_PARAMS, objectives, front, asked)
    assert blocks is not None
    return live_structures(blocks, total, front)


def _case_rows(t: TrainiumTarget, p: Problem, flat: int) -> np.ndarray:
    """(latency s, off-chip bytes, energy pJ) of every case of every core split of structure `flat`."""
    space = t.space(p)
    choices = {q.name: q.choices for q in space.params}
    narrowed = {**choices, **{n: (v,) for n, v in structure_choices(space, flat).items()}}
    consts = t._run_consts(p)  # the target's own problem constants (what its cells use)
    rows = []
    for _, _, lat, floors in split_cells(p, t.hardware, narrowed, consts, latency_cases=True):
        assert floors is not None and lat.ndim == 4  # (cases, tile_stat, tile_mov, tile_k)
        cols = [lat / t.hardware.te_clock_hz, floors["offchip_bytes"], floors["energy"]]
        rows.append(np.stack([np.broadcast_to(c, lat.shape).reshape(-1) for c in cols], axis=1))
    return np.concatenate(rows)


@pytest.mark.parametrize("seed", range(8))
def test_every_feasible_point_is_no_better_than_one_of_its_case_rows(seed: int) -> None:
    rng = random.Random(50 + seed)  # each problem on one part, the parts in turn
    p, t = _problem(rng), every_tile_target(rng.choice(["trn1", "trn2"]), **PARTS[seed % len(PARTS)])
    objectives = ("latency", "offchip_bytes", "energy")
    total = int(np.prod([len(q.choices) for q in t.space(p).params[:4]]))
    checked = 0
    for flat in sorted({rng.randrange(total) for _ in range(10)}):
        points = np.unique(_points(t, p, flat, objectives), axis=0)
        rows = _case_rows(t, p, flat)
        covered = np.all(rows[None, :, :] <= points[:, None, :] * (1 + RTOL), axis=2).any(axis=1)
        assert covered.all(), (p.label, t.name, flat, points[~covered][:3])
        checked += len(points)
    assert checked > 0


@pytest.mark.parametrize("seed", range(8))
def test_a_structure_stays_live_against_a_front_just_worse_than_its_own(seed: int) -> None:
    """The later pass must keep a structure whose own exact front the given front does not reach (each point
    taken 1e-6 worse on every objective): a case row above the structure's points would leave it out."""
    rng = random.Random(seed)  # each problem on one part, the parts in turn
    p, t = _problem(rng), every_tile_target(rng.choice(["trn1", "trn2"]), **PARTS[seed % len(PARTS)])
    objectives = rng.choice([("latency", "offchip_bytes"), ("latency", "energy")])
    params = t.space(p).params[:4]
    total = int(np.prod([len(q.choices) for q in params]))
    # (a structure that repeats another point for point is left out for it: `test_trainium_repeats`)
    kept = np.flatnonzero(~repeated_structures(p, {q.name: q.choices for q in params}).reshape(-1)).tolist()
    checked = 0
    for flat in sorted({rng.choice(kept) for _ in range(10)}):
        points = _points(t, p, flat, objectives)
        if not len(points):
            continue
        own = points[pareto_front(points)]
        asked = np.zeros(total, dtype=bool)
        asked[flat] = True
        worse = _later_pass(t, p, objectives, own * (1 + 1e-6), asked)
        assert worse is not None and worse[flat], (p.label, t.name, flat, objectives)
        checked += 1
    assert checked > 0


def test_the_later_pass_leaves_out_structures_the_core_splits_alone_keep(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Llama-7B prefill-shaped GEMM (tokens x 4096 x 11008, scaled down): the fastest points of a structure
    compute whole blocks of tiles (padding), load large first blocks and, where PSUM cannot hold the open output
    tiles, add the k blocks in SBUF; the fewest fetches need exactly those. One cell per core split pairs the
    least latency with the least bytes; the cases do not, so the later pass leaves out structures the first
    pass kept, and every point of each is dominated by (or equal to) a front point."""
    monkeypatch.setattr(CaseYield, "TRIAL", 10**9)  # the cases priced throughout (their yield: the next test)
    p, t, objectives, front, first = _prefill_pass()
    again = _later_pass(t, p, objectives, front, first)
    assert again is not None and not (again & ~first).any()
    out = np.flatnonzero(first & ~again)
    assert len(out) > 0.02 * first.sum(), (int(first.sum()), len(out))  # 3,506 of 65,490 when written
    for flat in out[:: max(1, len(out) // 10)][:10].tolist():
        assert dominated_rows(_points(t, p, flat, objectives), front * (1 + RTOL)).all(), flat


def test_a_pass_stops_pricing_cases_that_leave_out_too_few(monkeypatch: pytest.MonkeyPatch) -> None:
    """`CaseYield`: after its trial a pass prices cases only while they leave out at least `LEAST` of the
    structures priced; the rest of the pass yields the split's own rows, floors too: such a pass leaves live a
    superset of what the cases would, within the structures asked, and prices no case after the trial."""
    y = CaseYield()
    assert y.pays()
    y.count(CaseYield.TRIAL, CaseYield.TRIAL)  # none left out
    assert not y.pays()
    y.count(0, -int(CaseYield.LEAST * y.priced) - 1)  # (as if that many more were left out)
    assert y.pays()
    p, t, objectives, front, first = _prefill_pass()
    monkeypatch.setattr(CaseYield, "TRIAL", 10**9)
    cases = _later_pass(t, p, objectives, front, first)
    priced: list[int] = []
    real = front_cells._live_cases

    def counted(*args: object, **kwargs: object) -> np.ndarray | None:
        priced.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(front_cells, "_live_cases", counted)
    monkeypatch.setattr(CaseYield, "pays", lambda self: False)  # a pass past a trial that did not pay
    rows = _later_pass(t, p, objectives, front, first)
    assert cases is not None and rows is not None and not priced
    assert not (rows & ~first).any() and not (cases & ~rows).any() and rows.sum() > cases.sum()


def _prefill_pass() -> tuple[Problem, TrainiumTarget, tuple[str, ...], np.ndarray, np.ndarray]:
    """A Llama-7B prefill-shaped GEMM, a front of 150 random structures' points and the first pass's live ones."""
    p = einsum("mk,kn->mn", {"m": 512, "k": 1024, "n": 1376}, dtype="bf16", weight=1)
    t = every_tile_target("trn1")
    objectives = ("latency", "offchip_bytes")
    params = t.space(p).params[:4]
    total = int(np.prod([len(q.choices) for q in params]))
    rng = random.Random(3)
    scored = [_points(t, p, flat, objectives) for flat in rng.sample(range(total), 150)]
    points = np.concatenate(scored)
    front = points[pareto_front(points)]
    first = live_structures(t.structure_front_cell_blocks(p, TILE_PARAMS, objectives, front), total, front)
    assert first is not None and first.any()
    return p, t, objectives, front, first
