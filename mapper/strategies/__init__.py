"""Search strategies behind one interface: `Strategy.run(problem, target, space, settings) -> Found`.

`Enumeration` scores the whole space (``exhaustive``); `OptunaStudy` runs one Optuna study with a
sampler from the `SAMPLERS` table (``tpe``, ``random``, ``cmaes``, ``nsga2``). `strategy_for`
turns a strategy name into its object.
"""

from mapper.planning import Probe
from mapper.strategies.base import Searched, Strategy
from mapper.strategies.encoding import CONSTRAINT_PREFIX, Encoding, is_ordinal, split_params
from mapper.strategies.enumeration import Enumeration
from mapper.strategies.samplers import SAMPLERS, make_sampler
from mapper.strategies.study import OptunaStudy, StopRule


def strategy_for(name: str, probe: Probe | None = None, inner_points: int | None = None) -> Strategy:
    """The strategy object of a (resolved, not ``auto``) strategy name."""
    if name == Enumeration.name:
        return Enumeration(probe)
    return OptunaStudy(name, inner_points, probe)


__all__ = [
    "CONSTRAINT_PREFIX",
    "SAMPLERS",
    "Encoding",
    "Enumeration",
    "OptunaStudy",
    "Searched",
    "StopRule",
    "Strategy",
    "is_ordinal",
    "make_sampler",
    "split_params",
    "strategy_for",
]
