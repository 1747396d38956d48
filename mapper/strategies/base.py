"""The one interface every search strategy implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from costmodels.protocol import Choice, SearchSpace, Target
from mapper.report import Found
from mapper.result import Certificate
from mapper.settings import SearchSettings
from mapper.watch import Watch
from workload.problem import Problem


@dataclass
class Searched(Found):
    """What a strategy found, with the certificate of what it proved (`mapper.certificate.certify`)."""

    certificate: Certificate | None = None
    #: each Tenstorrent strategy's best (`mapper.ties.PerStrategy`), kept by an enumeration in its one pass
    per_strategy: dict[tuple[str, str], tuple[float, dict[str, Choice]]] | None = None


def certificate_notes(cert: Certificate, feasible: bool) -> list[str]:
    """What the certificate says, in the result's notes: the proof, or how close the answer is proven to be."""
    where = f"the target's search space ({cert.space_points:,} points)"
    work = f"{cert.scored:,} of {cert.structures_total:,} structures scored, {cert.pruned_by_bound:,} pruned by bound"
    if cert.complete:
        return [f"proven optimal over {where}: {work}"] if feasible else []
    front = (
        ""
        if cert.front_gap is None
        else f"; the front is within {cert.front_gap:.2%} of every point of {where}: each has a front point at most "
        f"{1 + cert.front_gap:.4g} times it on every objective (from the open cells of the structures left)"
    )
    if cert.gap_bound is None:
        return [f"not proven: {work}, {cert.unexplored:,} unexplored{front or ' (no bound on them)'}"]
    return [
        f"not proven: {work}, {cert.unexplored:,} unexplored; the best is within {cert.gap_bound:.2%} of the optimum "
        f"over {where} (lowest remaining bound {cert.best_remaining_bound:.4g}, from {cert.bound_source}){front}"
    ]


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
    ) -> Searched:
        """Search until done, the `deadline` (a ``time.perf_counter()`` value) or a cancel."""
