"""The energy objective, shared by every family: a preset's energy table and the pure pricing formulas.

A preset file's ``energy:`` section holds picojoules per MAC by input dtype (``mac_pj``) and
picojoules per byte moved at each memory level of the family's `CostReport.bytes` (``byte_pj``),
each number with its citation beside it (``{pj: 0.075, source: "..."}``). A family's hardware
model holds it as an `EnergyTable` and checks it covers its levels and input dtypes
(`EnergyTable.require`). A request overrides one figure with a dotted key and a bare number
(``energy.byte_pj.hbm=40``, `costmodels.presets.load_preset`), or the whole section.

The model (the same for every family, one point or many):

    energy_pj = mac_pj[dtype] x useful MACs + sum over levels of byte_pj[level] x bytes[level]

- ``dtype`` is the widest input dtype of the problem (`mac_dtype`) [ASSUMPTION: a mixed-precision
  MAC costs what a MAC of its wider input costs];
- useful MACs are the problem's MACs: MACs on padding and idle lanes are not charged [ASSUMPTION:
  the datapaths clock-gate lanes whose operands are padding; what a mapping wastes shows in its
  latency instead];
- no static (leakage) energy: a slower mapping is not charged for its extra time [ASSUMPTION:
  the objective compares the dynamic energy of mappings of one problem].

`pricer` fixes the model for one problem on one target (`EnergyPricer`): its ``parts`` are the
``energy_breakdown`` (``"mac"`` and one entry per level) and ``total`` sums them in that order, so
the scorers' ``energy`` column and `cost()` add the same numbers in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from workload import dtypes
from workload.problem import Problem

#: the source recorded for a figure a request overrides with a bare number
OVERRIDE_SOURCE = "per-request override"


class EnergyFigure(BaseModel):
    """One energy number and where it comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    pj: float = Field(ge=0, allow_inf_nan=False, description="picojoules")
    source: str = Field(min_length=3, description="citation (document and section), or [ASSUMPTION] and why")

    @model_validator(mode="before")
    @classmethod
    def _bare_number(cls, data: Any) -> Any:
        """A bare number (a per-request override) is a figure whose source is the request."""
        if isinstance(data, int | float) and not isinstance(data, bool):
            return {"pj": data, "source": OVERRIDE_SOURCE}
        if not isinstance(data, dict | EnergyFigure):
            raise ValueError(f"an energy figure is a number of picojoules (or {{pj, source}}), not {data!r}")
        return data


class EnergyTable(BaseModel):
    """A preset's ``energy:`` section: pJ per MAC by input dtype and pJ per byte by memory level."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    mac_pj: dict[str, EnergyFigure] = Field(description="input dtype -> pJ per multiply-accumulate")
    byte_pj: dict[str, EnergyFigure] = Field(description="memory level (as in CostReport.bytes) -> pJ per byte moved")
    references: dict[str, str] = Field(default_factory=dict, description="short citation name -> the full reference")

    def require(self, levels: Iterable[str], input_dtypes: Iterable[str]) -> None:
        """Raise ValueError unless the table prices exactly `levels` and every dtype of `input_dtypes`."""
        want = tuple(levels)
        if set(self.byte_pj) != set(want):
            raise ValueError(f"energy.byte_pj must price exactly the memory levels {', '.join(want)}")
        for name in input_dtypes:
            if dtypes.canonical_dtype(name) not in self.mac_pj:
                raise ValueError(f"energy.mac_pj has no entry for input dtype {name}: add one with its source")
        if not self.mac_pj:
            raise ValueError("energy.mac_pj needs at least one dtype")
        for name in self.mac_pj:
            dtypes.canonical_dtype(name)

    def mac(self, dtype: str) -> float:
        """pJ per MAC of a problem whose widest input dtype is `dtype`; a dtype the table does not list
        costs the table's dearest MAC [ASSUMPTION: a format added without a figure is priced high, not free]."""
        figure = self.mac_pj.get(dtypes.canonical_dtype(dtype))
        return figure.pj if figure is not None else max(f.pj for f in self.mac_pj.values())


def mac_dtype(problem: Problem) -> str:
    """The dtype whose MAC energy a problem pays: its widest input (the first of equal width)."""
    names = [dtypes.canonical_dtype(op.dtype) for op in problem.inputs]
    return max(names, key=lambda n: dtypes.info(n).bits)


@dataclass(frozen=True)
class EnergyPricer:
    """The energy model of one problem on one target: its MACs' pJ and the pJ per byte of each level."""

    mac: float  # pJ of the problem's useful MACs
    per_byte: tuple[tuple[str, float], ...]  # (level, pJ per byte) in the family's level order

    def parts(self, level_bytes: Mapping[str, Any]) -> dict[str, Any]:
        """pJ per component: ``"mac"`` then each level (bytes of one point as floats, or of many as arrays)."""
        out: dict[str, Any] = {"mac": self.mac}
        for level, pj in self.per_byte:
            out[level] = pj * level_bytes[level]
        return out

    def total(self, level_bytes: Mapping[str, Any]) -> Any:
        """The sum of `parts` in their order (the scorers and `cost()` add the same way, so they agree)."""
        total: Any = 0.0
        for v in self.parts(level_bytes).values():
            total = total + v
        return total

    def column(self, level_bytes: Mapping[str, Any], bad: np.ndarray) -> np.ndarray:
        """The scorers' ``energy`` objective: `total` per point, inf where ``bad``."""
        total = np.asarray(self.total(level_bytes), dtype=float)
        return np.where(bad, np.inf, np.broadcast_to(total, np.shape(bad)))

    def operand_energy(self, operand_bytes: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
        """pJ per level and operand: each level's bytes per operand at the level's pJ per byte."""
        pj = dict(self.per_byte)
        return {level: {op: pj[level] * b for op, b in ops.items()} for level, ops in operand_bytes.items()}


def pricer(table: EnergyTable, problem: Problem, levels: Iterable[str]) -> EnergyPricer:
    """The `EnergyPricer` of `problem` with the figures of `table` for the memory `levels`."""
    mac = table.mac(mac_dtype(problem)) * float(problem.macs)
    return EnergyPricer(mac=mac, per_byte=tuple((lv, table.byte_pj[lv].pj) for lv in levels))
