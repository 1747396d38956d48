"""The regression baseline of ``mapper tune --baseline FILE``: tuned costs a CI job compares against.

The file is small, stable and meant to be committed and diffed: JSON with sorted keys, two-space
indentation and a final newline, one entry per (target, problem content hash)::

    {
      "entries": {
        "trn2": {
          "b017cccfdbf4fc5276a3c1283eccc4a308561773d26935fe1acaf4029219e214": {
            "label": "A[m, k]:bf16, B[k, n]:bf16 -> Y[m, n]:f32 (add; m=64 k=64 n=64)",
            "objective": "latency",
            "value": 1.2e-06
          }
        }
      },
      "format": "tensormapper-baseline/1"
    }

``value`` is the first objective of the best mapping; ``label`` (the problem summary, or the
workload layer's name) and ``objective`` are kept for people. A tuned value worse than the
baseline's by more than the tolerance is a regression; a problem missing from the baseline (or
recorded for another objective) is reported and is not one. Writing merges: entries of problems
not tuned in this run are kept.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mapper.result import TuneResult
from mapper.workloads import WorkloadResult

FORMAT = "tensormapper-baseline/1"


class BaselineError(Exception):
    """A baseline file or tolerance a user must fix."""


@dataclass(frozen=True)
class Measured:
    """One tuned cost: a problem (by content hash) on a target."""

    target: str
    problem_hash: str
    label: str
    objective: str
    value: float | None


@dataclass(frozen=True)
class Verdict:
    """How one measured cost compares with the baseline."""

    item: Measured
    status: Literal["ok", "improved", "regressed", "missing", "objective-differs", "infeasible"]
    baseline: float | None = None

    @property
    def change(self) -> float | None:
        """value / baseline - 1 (None when either is missing or the baseline is 0)."""
        if self.baseline is None or self.item.value is None or self.baseline == 0:
            return None
        return self.item.value / self.baseline - 1


def parse_tolerance(text: str) -> float:
    """``2%`` or ``0.02`` -> 0.02 (a plain number is a fraction below 1; a percentage may be larger)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise BaselineError(f"--tolerance {text!r} is not a number: write 2% or 0.02") from None
    if not math.isfinite(value) or value < 0:
        raise BaselineError(f"--tolerance {text!r} must be zero or positive: write 2% or 0.02")
    if not raw.endswith("%") and value >= 1:
        raise BaselineError(f"--tolerance {text!r} is ambiguous: write {raw}% for a percentage or a fraction below 1")
    return value


def measured_of_tune(result: TuneResult, label: str = "") -> list[Measured]:
    """The tuned cost of one problem on one target."""
    return [
        Measured(result.target, result.problem_hash, label or result.problem, result.objectives[0], result.best_value())
    ]


def measured_of_workload(w: WorkloadResult) -> list[Measured]:
    """One cost per distinct layer (identical layers share a content hash and are named together)."""
    labels: dict[str, list[str]] = {}
    for lay in w.layers:
        labels.setdefault(lay.problem_hash, []).append(lay.label)
    out = []
    for lay in w.layers:
        if lay.duplicate_of is not None or (lay.value is None and lay.stop_reason == "cancelled"):
            continue  # an identical layer is recorded once; a layer cancelled before its search has no cost
        names = labels[lay.problem_hash]
        label = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        out.append(Measured(w.target, lay.problem_hash, label, w.objective, lay.value))
    return out


def measured_of(result: TuneResult | WorkloadResult) -> list[Measured]:
    """The costs a result records: one for a tuning, one per distinct layer for a workload."""
    return measured_of_workload(result) if isinstance(result, WorkloadResult) else measured_of_tune(result)


def load(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The entries of a baseline file: target -> problem hash -> {label, objective, value}."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"baseline {path} does not exist: record one with --write-baseline {path}") from None
    except OSError as e:
        raise BaselineError(f"cannot read baseline {path}: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise BaselineError(f"baseline {path} is not a JSON baseline file (write it with --write-baseline)") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
        raise BaselineError(f"baseline {path} is not a {FORMAT} file (write it with --write-baseline)")
    entries: dict[str, dict[str, dict[str, Any]]] = {}
    for target, by_hash in data["entries"].items():
        if not isinstance(by_hash, dict):
            raise BaselineError(f"baseline {path}: entries.{target} is not an object")
        for h, entry in by_hash.items():
            value = entry.get("value") if isinstance(entry, dict) else None
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise BaselineError(f"baseline {path}: entries.{target}.{h} has no numeric value")
            entries.setdefault(str(target), {})[str(h)] = dict(entry)
    return entries


def compare(
    items: Iterable[Measured], entries: dict[str, dict[str, dict[str, Any]]], tolerance: float
) -> list[Verdict]:
    """Each measured cost against its baseline entry (lower is better for every objective)."""
    out = []
    for m in items:
        entry = entries.get(m.target, {}).get(m.problem_hash)
        if entry is None:
            out.append(Verdict(m, "missing"))
            continue
        base = float(entry["value"])
        if entry.get("objective", m.objective) != m.objective:
            out.append(Verdict(m, "objective-differs", base))
        elif m.value is None:
            out.append(Verdict(m, "infeasible", base))
        elif m.value > base * (1 + tolerance):
            out.append(Verdict(m, "regressed", base))
        elif m.value < base * (1 - tolerance):
            out.append(Verdict(m, "improved", base))
        else:
            out.append(Verdict(m, "ok", base))
    return out


def regressed(verdicts: Iterable[Verdict]) -> bool:
    """Whether any cost is a regression (an infeasible problem the baseline had a value for counts)."""
    return any(v.status in ("regressed", "infeasible") for v in verdicts)


def write(path: Path, items: Iterable[Measured]) -> int:
    """Record the feasible costs in `path`, merged into its entries if it exists; returns how many were written."""
    entries: dict[str, dict[str, dict[str, Any]]] = {}
    if path.exists():
        entries = load(path)
    n = 0
    for m in items:
        if m.value is None:
            continue
        entries.setdefault(m.target, {})[m.problem_hash] = {
            "label": m.label,
            "objective": m.objective,
            "value": m.value,
        }
        n += 1
    text = json.dumps({"format": FORMAT, "entries": entries}, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise BaselineError(f"cannot write baseline {path}: {e.strerror}") from None
    return n
