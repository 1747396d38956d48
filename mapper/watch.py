"""What a caller hears and says while a search runs: progress, and a request to stop.

The engine calls `Watch.report` after every trial (or enumeration chunk) and asks
`Watch.cancelled` before the next one; a search asked to stop returns the best mapping found so
far with stop reason ``cancelled``. Both are cheap no-ops unless the caller gives callables, so a
plain `mapper.tune` pays nothing for them. The CLI draws a progress bar from `report`; the
service's workers write it to the job row and read cancellation from it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: (done, total, best first-objective value so far or None)
Progress = Callable[[int, int, float | None], None]


@dataclass
class Watch:
    """Callbacks a running search calls; either may be None. `unit` is what the last report counted."""

    progress: Progress | None = None
    cancel: Callable[[], bool] | None = None
    unit: str = ""

    def report(self, done: int, total: int, best: float | None, unit: str = "trials") -> None:
        """Tell the caller how far the search is: `done` of `total` `unit`s (trials, points or layers)."""
        self.unit = unit
        if self.progress is not None:
            self.progress(done, total, best)

    def cancelled(self) -> bool:
        """Whether the caller asked the search to stop."""
        return self.cancel is not None and bool(self.cancel())


def as_watch(progress: Progress | Watch | None) -> Watch | None:
    """A `Watch` from a bare progress callable (or None / a `Watch` as they are)."""
    if progress is None or isinstance(progress, Watch):
        return progress
    return Watch(progress=progress)
