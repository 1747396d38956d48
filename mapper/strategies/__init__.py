"""Search strategies behind one interface: `Strategy.run(problem, target, space, settings) -> Found`.

`Enumeration` scores the whole space (``exhaustive``); `BestFirst` visits the structures in
ascending bound order and stops when the next bound cannot beat the best (``bestfirst``);
`OptunaStudy` runs one Optuna study with a sampler from the `SAMPLERS` table (``tpe``, ``random``,
``cmaes``, ``nsga2``). `strategy_for` turns a strategy name into its object.
"""

from mapper.planning import Probe
from mapper.strategies.base import Searched, Strategy
from mapper.strategies.bestfirst import BestFirst
from mapper.strategies.encoding import CONSTRAINT_PREFIX, Encoding, is_ordinal, split_params
from mapper.strategies.enumeration import Enumeration
from mapper.strategies.samplers import SAMPLERS, make_sampler
from mapper.strategies.study import OptunaStudy, StopRule


def strategy_for(name: str, probe: Probe | None = None, inner_points: int | None = None) -> Strategy:
    """The strategy object of a (resolved, not ``auto``) strategy name."""
    if name == Enumeration.name:
        return Enumeration(probe)
    if name == BestFirst.name:
        return BestFirst(inner_points)
    return OptunaStudy(name, inner_points, probe)


__all__ = [
    "CONSTRAINT_PREFIX",
    "SAMPLERS",
    "BestFirst",
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
