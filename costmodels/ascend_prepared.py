"""The point-independent work of one problem on one Ascend preset, done once per problem.

`score_batch` is called many times for the same problem (in chunks by the enumerator, once
per trial by the mapper), so everything that does not depend on the point (the GEMM view, the
space, the supports() verdict, the constants of the formulas and the per-parameter tables) is
computed once and kept by the target in a small memo keyed by the problem object.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from functools import cached_property, partial

import numpy as np

from costmodels import ascend_cube_cost as cc
from costmodels.ascend_batch import Table, evaluate, gather_fields
from costmodels.ascend_codes import Encoded, Kind, encode
from costmodels.ascend_cube import CUBE_PARAMS, CubeSetup, cube_setup, cube_space
from costmodels.ascend_cube_tables import cube_tables
from costmodels.ascend_hw import AscendHardware
from costmodels.ascend_rules import supports
from costmodels.ascend_vector import VectorSetup, vector_space
from costmodels.protocol import SearchSpace, Violation
from workload.problem import Problem

CUBE_KINDS: dict[str, Kind] = {
    **{p: "int" for p in CUBE_PARAMS[:6]},
    "double_buffer": "bool",
    "core_grid": "str",
}
CONVERT: dict[Kind, Callable[[np.ndarray], np.ndarray]] = {
    "int": lambda a: np.asarray(a, dtype=np.int64),
    "bool": lambda a: np.asarray(a, dtype=bool),
    "str": lambda a: np.asarray(a).astype(str),
}
SCORE_OUTPUTS = {
    "ok": np.dtype(bool),
    "latency": np.dtype(np.float64),
    "offchip_bytes": np.dtype(np.float64),
    "footprint": np.dtype(np.float64),
}


class Prepared:
    """Facts of one problem on one preset that every point shares."""

    def __init__(self, problem: Problem, hw: AscendHardware, preset: str) -> None:
        self.problem = problem
        self.hw = hw
        self.preset = preset
        self._tables: dict[tuple[object, ...], tuple[Table, ...]] = {}

    @cached_property
    def unsupported(self) -> list[Violation]:
        return supports(self.problem, self.hw, self.preset)

    @cached_property
    def cube(self) -> CubeSetup:
        return cube_setup(self.problem, self.hw)

    @cached_property
    def vector(self) -> VectorSetup:
        return VectorSetup(problem=self.problem, hw=self.hw)

    @cached_property
    def space(self) -> SearchSpace:
        return cube_space(self.cube) if self.problem.is_binary else vector_space(self.vector)

    @cached_property
    def consts(self) -> cc.CubeConsts:
        return cc.cube_consts(self.cube)

    def encode(self, columns: dict[str, np.ndarray]) -> list[Encoded]:
        """The cube columns as codes into the space's choices (or into the values they hold)."""
        choices = {p.name: p.choices for p in self.space.params}
        return [
            encode(columns[name], CUBE_KINDS[name], choices[name], CONVERT[CUBE_KINDS[name]]) for name in CUBE_PARAMS
        ]

    def tables(self, encoded: list[Encoded], report: bool = False) -> tuple[Table, ...]:
        key = (report, *(e.values for e in encoded))
        found = self._tables.get(key)
        if found is None:
            if len(self._tables) >= 8:
                self._tables.clear()
            found = self._tables[key] = cube_tables(self.cube, tuple(e.values for e in encoded), report=report)
        return found

    def cube_scores(self, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Feasibility and objectives of every point (binary problems)."""
        enc = self.encode(columns)
        return evaluate(self.tables(enc), enc, partial(cc.cube_scores, self.consts), SCORE_OUTPUTS)

    def cube_point(self, columns: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Fields and model terms of a few points (check/cost), with the report fields."""
        enc = self.encode(columns)
        tables = self.tables(enc, report=True)
        f = gather_fields(tables, [e.codes for e in enc], [len(e.values) for e in enc])
        return f, cc.cube_model(self.consts, f)


class PreparedMemo:
    """The last few `Prepared` of a target, keyed by problem identity (problems are frozen)."""

    def __init__(self, hw: AscendHardware, preset: str, size: int = 8) -> None:
        self.hw = hw
        self.preset = preset
        self.size = size
        self._items: OrderedDict[int, Prepared] = OrderedDict()

    def get(self, problem: Problem) -> Prepared:
        key = id(problem)
        item = self._items.get(key)
        if item is not None and item.problem is problem:
            self._items.move_to_end(key)
            return item
        item = Prepared(problem, self.hw, self.preset)
        self._items[key] = item
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return item
