"""The service's limits on a request, each naming the setting that raises it.

The engine has hard limits of its own (16 axes, 2^24 per axis); these are the operator's, at or
below them, plus the size of the work (MACs, trials, seconds) and the jobs one client may have
waiting at once.
"""

from __future__ import annotations

from app.api.errors import TooMany, Unprocessable
from app.jobs.runner import Prepared
from app.settings import Settings


def _over(what: str, value: float, limit: float, setting: str) -> Unprocessable:
    return Unprocessable(
        f"{what} {value:g} exceeds this service's limit of {limit:g}",
        limit=setting.removeprefix("TM_").lower(),
        hint=f"ask for less, or raise the limit with {setting}",
    )


def check_request_limits(prep: Prepared, settings: Settings) -> None:
    """Raise a 422 problem for the first limit the prepared request exceeds."""
    req = prep.request
    if req.trials > settings.max_trials:
        raise _over("trials", req.trials, settings.max_trials, "TM_MAX_TRIALS")
    if req.seconds > settings.max_search_seconds:
        raise _over("seconds", req.seconds, settings.max_search_seconds, "TM_MAX_SEARCH_SECONDS")
    for p in prep.problems:
        if len(p.axes) > settings.max_axes:
            raise _over(f"{p.label or 'the problem'}: axes", len(p.axes), settings.max_axes, "TM_MAX_AXES")
        for axis, size in p.axes.items():
            if size > settings.max_axis_size:
                raise _over(f"axis {axis} size", size, settings.max_axis_size, "TM_MAX_AXIS_SIZE")
    macs = sum(p.macs for p in prep.problems) * len(req.target_list)
    if macs > settings.max_macs:
        raise _over("total MACs (every layer, every target)", macs, settings.max_macs, "TM_MAX_MACS")


def check_client_quota(active: int, settings: Settings) -> None:
    """429 when the client already has `max_active_per_client` jobs queued or running."""
    if active >= settings.max_active_per_client:
        raise TooMany(
            f"this client already has {active} jobs queued or running",
            limit="max_active_per_client",
            hint="wait for some to finish or cancel them, or raise the limit with TM_MAX_ACTIVE_PER_CLIENT",
        )
