"""The point-independent work of one problem on one Ascend preset, done once per problem.

The mapper scores the same problem many times (in chunks by the enumerator, once per trial by
the search), so everything that does not depend on the point (the GEMM view, the space and its
`SpaceCoder`, the supports() verdict, the constants of the formulas and the per-parameter tables
over the space's choices) is computed once; the target keeps it in a `ProblemMemo`.

Points given as choice codes (`Target.score_codes`) are priced from the cube tables over the
space's choices (param_tables.py, grid or gather path). Once the points scored for a binary
problem add up to `TABULATE_SHARE` of its space (each call counting as at least `CALL_POINTS`),
and the space has at most `TABULATE_MAX` points, the whole space is priced at once
(ascend/cube_grid.py) and kept, so every later point only reads its cell. A unary problem's
space (at most 128 points) is priced at once, from its value columns, on first use. A call whose
points are consecutive ones of the space (a chunk of an enumeration, `param_tables.run_start`)
reads slices of the kept table (read-only views where it keeps a column per point, see
`CubeTable`); other points get copies of their cells. Points with a value outside the space
(the general path of `score_batch`, and `check`/`cost` of such a point) are priced from tables
built over the distinct values they hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial

import numpy as np

from costmodels.ascend import cost as cc
from costmodels.ascend.cost import SCORE_OUTPUTS
from costmodels.ascend.cube_grid import CubeTable, tabulate_cube
from costmodels.ascend.cube_tables import CUBE_ORDER, cube_tables
from costmodels.ascend.energy import CUBE_LEVELS, VECTOR_LEVELS
from costmodels.ascend.hardware import AscendHardware
from costmodels.ascend.space import CUBE_PARAMS, CubeSetup, build_space, cube_setup
from costmodels.ascend.vector import VectorSetup, vector_arrays, vector_feasible, vector_terms
from costmodels.ascend.violations import supports
from costmodels.choice_codes import SpaceCoder, plain
from costmodels.energy import EnergyPricer, pricer
from costmodels.param_tables import (
    GRID_CELLS_PER_POINT,
    Encoded,
    Table,
    evaluate,
    flat_index,
    gather_fields,
    grid_fields,
    run_start,
)
from costmodels.protocol import SearchSpace, Violation
from workload.problem import Problem

Arrays = dict[str, np.ndarray]
#: Tabulate a whole space of at most this many points (about 10 bytes kept per point, `CubeTable`) ...
TABULATE_MAX = 1 << 21  # the enumeration limit (2M points): the larger spaces of issue #12 tabulate too
#: ... once the points scored for the problem reach this share of it, each call counting as at least
#: `CALL_POINTS` points (what a call's own overhead costs, so many one-point calls tabulate too).
TABULATE_SHARE = 1 / 8
CALL_POINTS = 1 << 10
#: How the general path reads a column of values of each cube parameter.
CONVERT: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    **{p: (lambda a: np.asarray(a, dtype=np.int64)) for p in CUBE_PARAMS[:6]},
    "double_buffer": lambda a: np.asarray(a, dtype=bool),
    "core_grid": lambda a: np.asarray(a).astype(str),
}


@dataclass(frozen=True, eq=False)
class PlainTable:
    """`SCORE_OUTPUTS` of every point of a space, in its C order (read-only: runs of points get views)."""

    arrays: Arrays

    def __post_init__(self) -> None:
        for arr in self.arrays.values():
            arr.flags.writeable = False

    def run(self, start: int, n: int) -> Arrays:
        return {k: v[start : start + n] for k, v in self.arrays.items()}

    def take(self, idx: np.ndarray) -> Arrays:
        return {k: np.take(v, idx) for k, v in self.arrays.items()}


class Prepared:
    """Facts of one problem on one preset that every point shares."""

    def __init__(self, problem: Problem, hw: AscendHardware, preset: str) -> None:
        self.problem = problem
        self.hw = hw
        self.preset = preset
        self.scored = 0  # points priced by code so far (decides when to tabulate)
        self.table: CubeTable | PlainTable | None = None  # the scores of every point of the space, once tabulated
        self.boxes = PricedBoxes()  # boxes of codes priced by a structure bound, kept for their scoring
        #: floors of several objectives of every structure per (fixed names, objectives) (`structure_front_cells`)
        self.front_floors: dict[tuple[tuple[str, ...], tuple[str, ...]], np.ndarray] = {}
        #: the last points' cells (`structure_cell_of_points`): their code columns (held, so their ids stay theirs)
        #: and each point's cell; a search passes the same inner columns for every structure
        self.cells_of: tuple[tuple[np.ndarray, ...], np.ndarray] | None = None

    @cached_property
    def reasons(self) -> tuple[Violation, ...]:
        """Why the preset cannot run the problem (empty when it can)."""
        return tuple(supports(self.problem, self.hw, self.preset))

    @cached_property
    def cube(self) -> CubeSetup:
        return cube_setup(self.problem, self.hw)

    @cached_property
    def energy(self) -> EnergyPricer:
        """The problem's energy model over the levels its cost report counts (TMATMUL or vector)."""
        levels = CUBE_LEVELS if self.problem.is_binary else VECTOR_LEVELS
        return pricer(self.hw.energy, self.problem, levels)

    @cached_property
    def vector(self) -> VectorSetup:
        return VectorSetup(problem=self.problem, hw=self.hw)

    @cached_property
    def space(self) -> SearchSpace:
        return build_space(self.problem, self.hw, self.cube if self.problem.is_binary else self.vector)

    @cached_property
    def coder(self) -> SpaceCoder:
        return SpaceCoder(self.space)

    @cached_property
    def names(self) -> tuple[str, ...]:
        return self.space.names()

    @cached_property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(p.choices) for p in self.space.params)

    @cached_property
    def size(self) -> int:
        return math.prod(self.shape)

    @cached_property
    def consts(self) -> cc.CubeConsts:
        return cc.cube_consts(self.cube)

    @cached_property
    def tables(self) -> tuple[Table, ...]:
        """The cube tables over the space's choices."""
        return cube_tables(self.cube, tuple(p.choices for p in self.space.params))

    @cached_property
    def report_tables(self) -> tuple[Table, ...]:
        return cube_tables(self.cube, tuple(p.choices for p in self.space.params), report=True)

    @cached_property
    def footprint_grid(self) -> np.ndarray:
        """The footprint of every point of a binary problem's space but for the core grid, on which it does not
        depend (`cube_grid.CubeTable`), over the other parameters' choices in the space's order, whether the point
        is feasible or not: ``(fa + fb) x h + acc_m x acc_n``, `cost.cube_scores`' terms in its order."""
        f = grid_fields(self.tables, [0] * len(self.shape), [n - 1 for n in self.shape], CUBE_ORDER)
        foot = (f["fa"] + f["fb"]) * f["h"] + f["acc_m"] * f["acc_n"]  # over `CUBE_ORDER` axes, the grid's of size 1
        foot = np.transpose(foot, [CUBE_ORDER.index(d) for d in range(len(CUBE_ORDER))])[..., 0]
        return np.ascontiguousarray(np.broadcast_to(foot, self.shape[:-1]))

    # ---- points by code (score_codes) -------------------------------------------------------------
    def scores(self, codes: dict[str, np.ndarray], n: int) -> Arrays:
        """`SCORE_OUTPUTS` of `n` points given as codes into the space's choices.

        A unary problem's space (at most 128 points) is tabulated at once, from its value columns;
        a binary problem's once `TABULATE_SHARE` of it has been asked for (and it is small enough).
        From a kept table, consecutive points read slices of it (`run`), other points their cells (`take`).
        """
        table = self.table
        if table is None:
            if not self.problem.is_binary:
                table = PlainTable(self.vector_values(self.space.columns()))
            else:
                self.scored += max(n, CALL_POINTS)
                if self.size > TABULATE_MAX or self.scored < TABULATE_SHARE * self.size:
                    return self._by_tables(codes, n)
                table = tabulate_cube(self.tables, self.shape, self.consts, self.energy)
            self.table = table
        cols = [codes[nm] for nm in self.names]
        start = run_start(cols, self.shape)
        return table.run(start, n) if start is not None else table.take(flat_index(cols, self.shape))

    def price_box(self, lo: list[int], hi: list[int]) -> Arrays:
        """`SCORE_OUTPUTS` over the box of codes ``lo..hi`` (laid out in `CUBE_ORDER`), as `evaluate`'s grid
        path prices it; kept in `boxes` so that scoring the same box reads it (`_by_tables`)."""
        key = (tuple(lo), tuple(hi))
        res = self.boxes.get(key)
        if res is None:
            res = cc.cube_scores(self.consts, grid_fields(self.tables, lo, hi, CUBE_ORDER), energy=self.energy)
            self.boxes.offer(key, res)
        return res

    def _by_tables(self, codes: dict[str, np.ndarray], n: int) -> Arrays:
        if n == 0:
            return {k: np.zeros(0, dtype=dt) for k, dt in SCORE_OUTPUTS.items()}
        enc = []
        for p in self.space.params:
            c = codes[p.name]
            enc.append(Encoded(codes=c, values=p.choices, lo=int(c.min()), hi=int(c.max())))
        lo, hi = [e.lo for e in enc], [e.hi for e in enc]
        box = tuple(hi[d] - lo[d] + 1 for d in CUBE_ORDER)
        kept = self.boxes.get((tuple(lo), tuple(hi)))
        if kept is not None and math.prod(box) <= GRID_CELLS_PER_POINT * n:  # evaluate's grid path, priced already
            cell = flat_index([enc[d].codes - lo[d] for d in CUBE_ORDER], box)
            return {k: np.take(np.broadcast_to(kept[k], box).reshape(-1), cell) for k in SCORE_OUTPUTS}
        return evaluate(
            self.tables, enc, partial(cc.cube_scores, self.consts, energy=self.energy), SCORE_OUTPUTS, CUBE_ORDER
        )

    # ---- points by value (the general path of score_batch, check and cost) ------------------------
    def vector_values(self, columns: dict[str, np.ndarray]) -> Arrays:
        """`SCORE_OUTPUTS` of points given by value (unary problems)."""
        _, t, feas = self.vector_terms(columns)
        ok = np.ones(len(t["cycles"]), dtype=bool)
        for arr in feas.values():
            ok &= np.asarray(arr, dtype=bool)
        return {
            "ok": ok,
            "latency": np.where(ok, t["cycles"] / self.hw.clock_hz, np.inf),
            "offchip_bytes": np.where(ok, t["offchip"], np.inf),
            "footprint": np.where(ok, t["footprint"], np.inf),
            "energy": np.where(ok, self.energy.total({"hbm": t["offchip"], "ub": t["ub_in"] + t["ub_out"]}), np.inf),
        }

    def vector_terms(self, columns: dict[str, np.ndarray]) -> tuple[Arrays, Arrays, Arrays]:
        """Per-point arrays, model terms and constraint checks of points given by value (unary problems)."""
        a = vector_arrays(self.vector, columns)
        t = vector_terms(self.vector, a)
        return a, t, vector_feasible(self.vector, t)

    def cube_values(self, columns: dict[str, np.ndarray]) -> Arrays:
        """`SCORE_OUTPUTS` of points given by value, priced from tables over the values they hold."""
        enc = _distinct(columns)
        tables = cube_tables(self.cube, tuple(e.values for e in enc))
        return evaluate(
            tables, enc, partial(cc.cube_scores, self.consts, energy=self.energy), SCORE_OUTPUTS, CUBE_ORDER
        )

    def cube_point(self, columns: dict[str, np.ndarray]) -> tuple[Arrays, Arrays]:
        """Fields and model terms of a few points given by value (check/cost), with the report fields."""
        codes, known = self.coder.encode(columns)
        if known.all():
            tables, sizes = self.report_tables, self.shape
            code_list = [codes[nm] for nm in CUBE_PARAMS]
        else:
            enc = _distinct(columns)
            tables = cube_tables(self.cube, tuple(e.values for e in enc), report=True)
            sizes, code_list = tuple(len(e.values) for e in enc), [e.codes for e in enc]
        f = gather_fields(tables, code_list, sizes)
        return f, cc.cube_model(self.consts, f)


class PricedBoxes:
    """Boxes of codes priced by structure bounds (ascend/bounds.py), kept until their structure is scored.

    A best-first search bounds every structure, then scores them by ascending bound; a warm start bounds
    one structure and scores it at once. So the boxes kept are the `KEEP` with the lowest latency and the
    last one priced; each bound is kept too (a float per box), so no box is priced twice for its bound.
    """

    KEEP = 4

    def __init__(self) -> None:
        self.lowest: dict[tuple[tuple[int, ...], tuple[int, ...]], Arrays] = {}
        self.last: tuple[tuple[tuple[int, ...], tuple[int, ...]], Arrays] | None = None
        self.bounds: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}

    def get(self, key: tuple[tuple[int, ...], tuple[int, ...]]) -> Arrays | None:
        if self.last is not None and self.last[0] == key:
            return self.last[1]
        return self.lowest.get(key)

    def offer(self, key: tuple[tuple[int, ...], tuple[int, ...]], res: Arrays) -> None:
        low = float(np.min(res["latency"])) if res["latency"].size else math.inf
        self.bounds[key] = low
        self.last = (key, res)
        self.lowest[key] = res
        if len(self.lowest) > self.KEEP:
            del self.lowest[max(self.lowest, key=self.bounds.__getitem__)]


def _distinct(columns: dict[str, np.ndarray]) -> list[Encoded]:
    """Each cube column as codes into the distinct values it holds."""
    out = []
    for name in CUBE_PARAMS:
        uniq, inv = np.unique(CONVERT[name](np.asarray(columns[name]).reshape(-1)), return_inverse=True)
        values = tuple(plain(u) for u in uniq)
        out.append(Encoded(codes=inv.reshape(-1), values=values, lo=0, hi=len(values) - 1))
    return out
