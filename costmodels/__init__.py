"""Cost models of AI accelerators behind one `Target` protocol, and the loop-nest IR they share.

One subpackage per accelerator family (`rngd`, `trainium`, `ascend`, `tenstorrent`), each with
the same module roles; hardware presets are data files under ``costmodels/presets/``. Look a
target up by preset name with `get_target`.
"""

from costmodels.ir import Level, Loop, Mapping
from costmodels.protocol import (
    OBJECTIVES,
    BatchScore,
    Bound,
    Choice,
    CostReport,
    LowerBound,
    Objective,
    Param,
    SearchSpace,
    Target,
    Violation,
)
from costmodels.registry import FAMILIES, get_target, target_names

__all__ = [
    "FAMILIES",
    "OBJECTIVES",
    "BatchScore",
    "Bound",
    "Choice",
    "CostReport",
    "Level",
    "Loop",
    "LowerBound",
    "Mapping",
    "Objective",
    "Param",
    "SearchSpace",
    "Target",
    "Violation",
    "get_target",
    "target_names",
]
