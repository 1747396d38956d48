"""The Optuna objective: one trial = one structural choice, its sub-space scored with numpy.

Optuna suggests the structural parameters; every combination of the inner parameters is then
scored at once with `Target.score_codes` (as choice indices) and the trial reports the best of them. A sub-space
with no feasible point makes the trial infeasible: the constraints its first point violates
(from `Target.check`, which explains what is wrong) are set with ``trial.set_constraint`` and
listed in the trial's user attributes, so the study's history says what was ruled out and why.
Repeated structural choices are answered from a memo without scoring again; with `skip_seen` (what
`OptunaStudy` runs) a trial that proposes a structure already scored or bounded out is not answered
at all but pruned (``optuna.TrialPruned``, the way Optuna's FAQ "How can I ignore duplicated
samples?" and optuna/optuna#2021 advise: TPE ranks a pruned trial without intermediate values behind
every complete one, so it is less likely to propose it again), and `unseen` hands the study the next
structures no trial has covered, for ``study.enqueue_trial``: a sampler that has converged cannot
keep the search from reaching the last structures.

Branch and bound (one objective): before scoring a structure the evaluator asks its admissible
bound (`mapper.bounds.StructureBounds`); a structure whose bound is not below the best found is
not scored (*pruned by bound*: none of its points can be better) and the trial reports the bound.
The memo records which structures were scored and which pruned, for the certificate. Several
objectives (`front_bounds`): a structure whose bound vector the front found so far dominates is
pruned the same way (`mapper.bounds.FrontBounds`), and the trial reports its bound vector.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import optuna

from costmodels.protocol import BatchScore, Choice, SearchSpace, Target
from mapper.bounds import FrontBounds, StructureBounds
from mapper.enumerate import point_at, scored_values, subspace_codes
from mapper.pareto import pareto_front
from mapper.strategies.encoding import CONSTRAINT_PREFIX, Encoding
from mapper.strategies.first_visit import staircase_first
from workload.problem import Problem

#: points of an infeasible trial's sub-space checked one by one for the constraints they violate
CHECKED = 4
#: bytes of the live-point masks' points `Evaluator` keeps (`_live`: a few masks recur on Trainium)
KEPT_MASK_BYTES = 16 << 20
#: value an infeasible trial reports (Optuna ranks it behind every feasible trial via its constraints anyway)
PENALTY = 1e30


@dataclass
class Outcome:
    """The best point of one structural choice (None when its sub-space has no feasible point)."""

    point: dict[str, Choice] | None
    values: tuple[float, ...] | None
    violations: tuple[tuple[str, str], ...] = ()  # (code, message)
    bound: float | None = None  # set when the structure was pruned by this bound instead of scored
    bound_values: tuple[float, ...] = ()  # several objectives: the bound vector it was pruned by
    front: list[tuple[dict[str, Choice], tuple[float, ...]]] = field(default_factory=list)  # several objectives


@dataclass(frozen=True)
class Ahead:
    """A structure's points priced ahead of its visit (`Evaluator.score_ahead`)."""

    version: int  # the front's (`Evaluator._version`) when they were chosen
    idx: np.ndarray | None  # their numbers in the structure's sub-space (None: every point)
    codes: dict[str, np.ndarray]  # their code columns
    left_out: int  # the points of cells the front dominated then
    score: BatchScore


@dataclass
class Evaluator:
    """Callable Optuna objective that also keeps the search's history."""

    target: Target
    problem: Problem
    space: SearchSpace
    objectives: tuple[str, ...]
    encoding: Encoding
    inner: tuple[str, ...]
    bounds: StructureBounds | None = None  # set: prune structures by bound (one objective)
    front_bounds: FrontBounds | None = None  # set: prune structures the front dominates (several objectives)
    front_values: np.ndarray | None = None  # the values of the front of every structure scored so far
    memo: dict[tuple[Choice, ...], Outcome] = field(default_factory=dict)
    trace: list[float | None] = field(default_factory=list)
    trace_points: list[int] = field(default_factory=list)  # points scored after each trial
    improved_at: int = 0  # trials done when the best last improved
    improved_time: float = field(default_factory=time.perf_counter)
    best_point: dict[str, Choice] | None = None
    best_values: tuple[float, ...] | None = None
    violations: Counter[str] = field(default_factory=Counter)
    messages: dict[str, str] = field(default_factory=dict)
    scored: int = 0
    duplicates: int = 0
    infeasible: int = 0
    pruned: int = 0  # trials answered by a structure's bound instead of scoring it
    cells_left_out: int = 0  # several objectives: points of visited structures in cells the front dominated
    skip_seen: bool = False  # prune a trial proposing a covered structure instead of answering it from the memo
    last_duplicate: bool = False  # the last trial proposed a structure already covered
    _pattern: dict[str, np.ndarray] | None = None
    _cursor: Iterator[tuple[Choice, ...]] | None = None
    #: scores priced ahead of their visit (`score_ahead`), per structure: the front's `_version` then, the points
    #: priced (their numbers, None: all; their code columns; how many were left out) and their scores
    _ahead: dict[tuple[Choice, ...], Ahead] = field(default_factory=dict)
    _version: int = 0  # changes whenever the front does
    #: the points left open by a live-point mask, their inner code columns (read-only) and their bytes, per mask
    _masks: dict[bytes, tuple[np.ndarray, dict[str, np.ndarray], int]] = field(default_factory=dict)
    _mask_bytes: int = 0

    def __call__(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        fixed = self.encoding.suggest(trial)
        key = self._key(fixed)
        outcome = self.memo.get(key)
        self.last_duplicate = outcome is not None
        if outcome is None:
            outcome = self._bound(fixed) or self._score(fixed)
            self.memo[key] = outcome
        else:
            self.duplicates += 1
            if self.skip_seen:  # nothing new to learn: no value, and the trial costs no scoring
                trial.set_user_attr("duplicate", True)
                self._record()
                raise optuna.TrialPruned("structure already scored or bounded out")
        if outcome.bound is not None:
            self.pruned += 1
            trial.set_user_attr("pruned_by_bound", outcome.bound)
            self._record()
            return outcome.bound_values or outcome.bound
        if outcome.point is None or outcome.values is None:
            self.infeasible += 1
            codes = sorted({c for c, _ in outcome.violations})
            for code in codes:
                self.violations[code] += 1
                trial.set_constraint(CONSTRAINT_PREFIX + code, 1.0)
            for code, msg in outcome.violations:
                self.messages.setdefault(code, msg)
            trial.set_user_attr("violations", codes)
            self._record()
            return PENALTY if len(self.objectives) == 1 else tuple(PENALTY for _ in self.objectives)
        trial.set_user_attr("point", outcome.point)
        if len(self.objectives) > 1:  # Optuna sees the structure's ideal point: the best of each objective on its front
            trial.set_user_attr("front_size", len(outcome.front))
        if outcome.front and self.front_bounds is not None:  # several objectives: the running front grows
            self.grow_front(np.array([v for _, v in outcome.front], dtype=np.float64))
        if self.best_values is None or outcome.values[0] < self.best_values[0]:
            self.best_point, self.best_values = outcome.point, outcome.values
            if self.bounds is not None:
                self.bounds.learn_clock(outcome.point)
            if self.front_bounds is not None:
                self.front_bounds.learn_clock(outcome.point)
            self.improved_at, self.improved_time = len(self.trace) + 1, time.perf_counter()
        self._record()
        if len(self.objectives) == 1:
            return outcome.values[0]
        return tuple(min(v[j] for _, v in outcome.front) for j in range(len(self.objectives)))

    def visit(self, fixed: dict[str, Choice]) -> Outcome:
        """Score one structure's sub-space outside Optuna (best-first search): the same bookkeeping as a trial."""
        outcome = self._score(fixed)
        self.settle(fixed, outcome)
        return outcome

    def settle(self, fixed: dict[str, Choice], outcome: Outcome, *, merge: bool = True) -> None:
        """Record a structure's outcome as a visit does: the memo, the counts, the front and the best (`merge`
        False: the caller grows the front once for many outcomes, `grow_front`)."""
        self.memo[self._key(fixed)] = outcome
        if outcome.bound is not None:  # every cell dominated by the front (`_score`): pruned, not infeasible
            self.pruned += 1
        elif outcome.point is None or outcome.values is None:
            self.infeasible += 1
            for code in sorted({c for c, _ in outcome.violations}):
                self.violations[code] += 1
            for code, msg in outcome.violations:
                self.messages.setdefault(code, msg)
        else:
            if merge and outcome.front and self.front_bounds is not None:
                self.grow_front(np.array([v for _, v in outcome.front], dtype=np.float64))
            if self.best_values is None or outcome.values[0] < self.best_values[0]:
                self.best_point, self.best_values = outcome.point, outcome.values
                self.improved_at, self.improved_time = len(self.trace) + 1, time.perf_counter()
        self._record()

    def grow_front(self, values: np.ndarray) -> None:
        """Merge values (points x objectives: one outcome's front, or many outcomes' at once) into the running
        front; a new front array (and `_version`) only when it changed."""
        if not len(values):
            return
        both = values if self.front_values is None else np.concatenate([self.front_values, values])
        front = both[pareto_front(both)]
        if self.front_values is None or not np.array_equal(front, self.front_values):
            self._version += 1
            self.front_values = front  # (unchanged: the same object, which the bounds' kept answers are keyed by)

    def _key(self, fixed: dict[str, Choice]) -> tuple[Choice, ...]:
        """A structure's key in `memo` and `_ahead`: its structural choices in the encoding's order."""
        return tuple(fixed[p.name] for p in self.encoding.params)

    def _record(self) -> None:
        self.trace.append(None if self.best_values is None else self.best_values[0])
        self.trace_points.append(self.scored)

    def _bound(self, fixed: dict[str, Choice]) -> Outcome | None:
        """The outcome of a structure bounded out by the best found or the front (None: it must be scored)."""
        if self.front_bounds is not None:
            if self.front_values is None:
                return None
            vec = self.front_bounds.cheap(fixed)  # (the cells decide; Ascend's exact vector would price the box)
            if not self.front_bounds.out(fixed, self.front_values, vec):
                return None
            return Outcome(None, None, bound=float(vec[0]), bound_values=tuple(float(x) for x in vec))
        if self.bounds is None or self.best_values is None:
            return None
        b = self.bounds(fixed)
        return Outcome(None, None, bound=b) if StructureBounds.bounded_out(b, self.best_values[0]) else None

    def unseen(self, n: int, deadline: float | None = None) -> list[dict[str, Choice]]:
        """Up to `n` structures no trial has covered, as Optuna params (for ``study.enqueue_trial``).

        Structures are taken in the space's numbering (the structural parameters' choices in C
        order) from where the last call stopped, skipping those already scored or pruned; one met on
        the way whose bound is out (`_bound`) is recorded as pruned by bound without a trial. Stops
        early at `deadline` (a ``time.perf_counter()`` value). An empty list once the numbering is
        spent: every structure has then been scored, bounded out or handed out.
        """
        names = [p.name for p in self.encoding.params]
        if self._cursor is None:
            self._cursor = itertools.product(*(p.choices for p in self.encoding.params))
        out: list[dict[str, Choice]] = []
        for key in self._cursor:
            if key in self.memo:
                continue
            fixed = dict(zip(names, key, strict=True))
            bounded = self._bound(fixed)
            if bounded is not None:
                self.memo[key] = bounded
            else:
                params = self.encoding.encode(fixed)
                assert params is not None  # the key is a point of the structural parameters
                out.append(params)
            if len(out) >= n or (deadline is not None and time.perf_counter() > deadline):
                break
        return out

    def structure_codes(self, fixed: dict[str, Choice]) -> dict[str, np.ndarray]:
        """The sub-space of a structural choice as code columns: the inner pattern (built once) beside constants."""
        if self._pattern is None:
            cols = subspace_codes(self.space, {p.name: 0 for p in self.space.params}, self.inner)
            self._pattern = {k: v for k, v in cols.items() if k in self.inner}
            for v in self._pattern.values():
                v.flags.writeable = False  # shared by every trial: a scorer must not write into it
        n = len(next(iter(self._pattern.values()))) if self._pattern else 1
        out: dict[str, np.ndarray] = {}
        for p in self.space.params:
            col = self._pattern.get(p.name)
            if col is None:
                col = np.broadcast_to(np.intp(p.choices.index(fixed[p.name])), (n,))  # read-only, no copy
            out[p.name] = col
        return out

    def _live(self, fixed: dict[str, Choice]) -> tuple[dict[str, np.ndarray], np.ndarray | None, int] | None:
        """The structure's points to score: code columns, their numbers in its sub-space (None: all of them) and
        how many were left out. Several objectives: only the points of cells the front leaves open; None when
        it leaves none (the structure is then pruned by bound)."""
        codes = self.structure_codes(fixed)
        if self.front_bounds is None:
            return codes, None, 0
        live = self.front_bounds.live_points(fixed, self.front_values, codes)
        if live is None or live.all():
            return codes, None, 0
        if not live.any():
            return None
        mask = np.packbits(live).tobytes()  # the same few masks recur (a structure's live cells' points)
        kept = self._masks.get(mask)
        if kept is None:
            idx = np.flatnonzero(live)
            cols = {k: np.take(v, idx) for k, v in codes.items() if k in self.inner}
            for col in cols.values():
                col.flags.writeable = False  # shared by every structure with this mask
            kept = (idx, cols, idx.nbytes + sum(c.nbytes for c in cols.values()))
            self._masks[mask] = kept
            self._mask_bytes += kept[2]
            while self._mask_bytes > KEPT_MASK_BYTES and len(self._masks) > 1:  # oldest out
                self._mask_bytes -= self._masks.pop(next(iter(self._masks)))[2]
        idx, inner, _ = kept
        return (
            {n: inner[n] if n in inner else np.broadcast_to(np.asarray(c)[:1], idx.shape) for n, c in codes.items()},
            idx,
            int(live.size - idx.size),
        )

    def score_ahead(self, structures: list[dict[str, Choice]], max_points: int = 1 << 17) -> int:
        """Price, in one `Target.score_codes` call, the points the coming visits of `structures` will score.

        A scorer whose cost is mostly per call (Trainium prices a structure's few live points with
        about as many numpy calls as a whole grid) then prices them together; `_score` reads a structure's
        scores when it is visited, for the points it scores then (the same or fewer: the front only
        grows). A point's price does not depend on the points priced with it, so the outcome is the same.
        Stops adding structures once `max_points` points are gathered; returns how many it went through.
        """
        todo: list[tuple[tuple[Choice, ...], tuple[dict[str, np.ndarray], np.ndarray | None, int]]] = []
        total, taken = 0, 0
        for fixed in structures:
            if total >= max_points:
                break
            taken += 1
            key = self._key(fixed)
            if key in self._ahead or key in self.memo:
                continue
            got = self._live(fixed)
            if got is not None:
                todo.append((key, got))
                total += len(got[1]) if got[1] is not None else self.inner_size
        if len(todo) < 2:
            return taken
        names = [p.name for p in self.space.params]
        joined = {n: np.concatenate([np.asarray(got[0][n], dtype=np.intp) for _, got in todo]) for n in names}
        score = self.target.score_codes(self.problem, joined)
        feasible = np.asarray(score.feasible, dtype=bool)
        values = {o: np.asarray(score.objectives[o], dtype=np.float64) for o in self.objectives}
        at = 0
        for key, (codes, idx, left_out) in todo:
            n = len(codes[names[0]])
            part = BatchScore(feasible=feasible[at : at + n], objectives={o: v[at : at + n] for o, v in values.items()})
            self._ahead[key] = Ahead(self._version, idx, codes, left_out, part)
            at += n
        return taken

    def _read_ahead(self, key: tuple[Choice, ...], idx: np.ndarray | None) -> BatchScore | None:
        """The scores `score_ahead` priced for the structure's points `idx` (None: all), if it priced them all."""
        got = self._ahead.pop(key, None)
        if got is None:
            return None
        before, score = got.idx, got.score
        if before is None:
            sel = idx
        elif idx is None:
            return None  # (cannot happen: the points left open only shrink as the front grows)
        else:
            sel = np.searchsorted(before, idx)
            if sel.size and (sel[-1] >= before.size or not np.array_equal(before[sel], idx)):
                return None
        if sel is None:
            return score
        return BatchScore(
            feasible=np.asarray(score.feasible)[sel], objectives={o: v[sel] for o, v in score.objectives.items()}
        )

    def _score(self, fixed: dict[str, Choice]) -> Outcome:
        key = self._key(fixed)
        kept = self._ahead.get(key)
        score: BatchScore | None = None
        if kept is not None and kept.version == self._version:  # the front as when priced: the same points
            del self._ahead[key]
            codes, left_out, score = kept.codes, kept.left_out, kept.score
        else:
            got = self._live(fixed)
            if got is None:  # every cell dominated by the front: pruned by its bound, not infeasible
                self._ahead.pop(key, None)
                return self._closed(fixed)
            codes, idx, left_out = got
            score = self._read_ahead(key, idx)
        if score is None and self.front_values is None and self.front_bounds is not None:  # the staircase cells first
            two_step = staircase_first(self.target, self.problem, self.front_bounds, fixed, codes)
            if two_step is not None:
                codes, more, score = two_step
                left_out += more
        self.cells_left_out += left_out
        if score is None:
            score = self.target.score_codes(self.problem, codes)
        return self.priced(fixed, codes, left_out, score)

    def priced(
        self, fixed: dict[str, Choice], codes: dict[str, np.ndarray], left_out: int, score: BatchScore
    ) -> Outcome:
        """A structure's outcome from the scores of its points `codes`, `left_out` others being in cells the front
        dominated (not priced): its sub-front, else why it has no feasible point, else pruned (`_closed`)."""
        feas = np.asarray(score.feasible, dtype=bool)
        self.scored += feas.size
        if not feas.any() and left_out:
            # the cells the front left open hold no feasible point and the others are dominated: nothing of the
            # structure can join the front, as if every cell were dominated (and its points are not all infeasible)
            return self._closed(fixed)
        if not feas.any():  # why: the violations of a few points spread over the sub-space, checked one by one
            n = feas.size
            found = {
                v.code: v.message
                for i in sorted({k * n // min(n, CHECKED) for k in range(min(n, CHECKED))})
                for v in self.target.check(
                    self.problem, self.target.mapping(self.problem, point_at(self.space, codes, i))
                )
            }
            pairs = tuple(found.items()) or (("infeasible", "the scorer rejected every point"),)
            return Outcome(None, None, pairs)
        vals = scored_values(score, self.objectives)
        if len(self.objectives) > 1:  # the sub-space's exact front, one point per distinct value (the earliest)
            idx = pareto_front(vals)
            if idx.size == 0:
                return Outcome(None, None, (("non-finite", "the model returned a non-finite cost"),))
            front = [(point_at(self.space, codes, int(j)), tuple(float(x) for x in vals[j])) for j in idx]
            return Outcome(front[0][0], front[0][1], front=front)  # front[0]: the best first objective
        i = int(np.argmin(vals[:, 0]))  # ties keep the first point: deterministic
        values = tuple(float(x) for x in vals[i])
        if not all(math.isfinite(x) for x in values):
            return Outcome(None, None, (("non-finite", "the model returned a non-finite cost"),))
        point = point_at(self.space, codes, i)
        if self.front_bounds is not None:  # one objective bounded cell by cell: its "front" is the best point
            return Outcome(point, values, front=[(point, values)])
        return Outcome(point, values)

    def _closed(self, fixed: dict[str, Choice]) -> Outcome:
        """A visited structure none of whose points can join the front (`_score`): pruned by its bound vector."""
        assert self.front_bounds is not None
        vec = self.front_bounds.cheap(fixed)
        return Outcome(None, None, bound=float(vec[0]), bound_values=tuple(float(x) for x in vec))

    def merged_front(self) -> list[tuple[dict[str, Choice], tuple[float, ...]]]:
        """The Pareto front of every scored structure's front: exact over what was scored, no duplicate value.

        Of points with equal values the one first in the space's numbering represents them, so the
        front does not depend on the order the structures were tried in.
        """
        cands = [c for o in self.memo.values() for c in o.front]
        if not cands:
            return []
        index = {p.name: {v: i for i, v in enumerate(p.choices)} for p in self.space.params}
        number = [tuple(index[p.name][pt[p.name]] for p in self.space.params) for pt, _ in cands]
        order = np.asarray(sorted(range(len(cands)), key=number.__getitem__), dtype=np.intp)
        front = [cands[int(i)] for i in pareto_front(np.array([v for _, v in cands]), order)]
        return sorted(front, key=lambda c: c[1])

    @property
    def inner_size(self) -> int:
        """Points of each structure's sub-space."""
        return math.prod(len(p.choices) for p in self.space.params if p.name in self.inner)

    @property
    def structural_exhausted(self) -> bool:
        """True once every structural choice has been scored or pruned by bound."""
        return len(self.memo) >= self.encoding.size

    def keys(self) -> tuple[set[tuple[Choice, ...]], set[tuple[Choice, ...]]]:
        """The structures scored and those pruned by bound (keys: structural values in encoding order)."""
        pruned = {k for k, o in self.memo.items() if o.bound is not None}
        return set(self.memo) - pruned, pruned
