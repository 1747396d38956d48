"""The one interface every search strategy implements."""

from __future__ import annotations

from abc import ABC, abstractmethod

from costmodels.protocol import SearchSpace, Target
from mapper.report import Found
from mapper.settings import SearchSettings
from mapper.watch import Watch
from workload.problem import Problem


class Strategy(ABC):
    """A way to search a problem's space on a target within a deadline.

    `run` reports progress to `watch` after every step (an enumeration chunk, an Optuna trial) and
    stops between steps when the watch cancels (stop reason ``cancelled``, best so far kept).
    """

    #: the name results report (``exhaustive`` or an Optuna sampler's name)
    name: str

    @abstractmethod
    def run(
        self,
        problem: Problem,
        target: Target,
        space: SearchSpace,
        settings: SearchSettings,
        *,
        deadline: float,
        watch: Watch | None = None,
    ) -> Found:
        """Search until done, the `deadline` (a ``time.perf_counter()`` value) or a cancel."""
