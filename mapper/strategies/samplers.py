"""The Optuna samplers a study strategy can run, looked up by name in one table.

Optuna 5 defaults: TPE is multivariate with the constant liar, and is also the default for
several objectives; constraints come from ``trial.set_constraint`` (``constraints_func`` is
deprecated), so no sampler here is given one.
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

#: a sampler factory: (seed, number of objectives, startup trials) -> sampler
SamplerFactory = Callable[[int, int, int], optuna.samplers.BaseSampler]


def _tpe(seed: int, n_objectives: int, n_startup: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup)


def _random(seed: int, n_objectives: int, n_startup: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed)


def _nsga2(seed: int, n_objectives: int, n_startup: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(8, min(50, n_startup * 2)))


def _cmaes(seed: int, n_objectives: int, n_startup: int) -> optuna.samplers.BaseSampler:
    if n_objectives > 1:
        raise ValueError("CMA-ES optimises one objective: use nsga2 or tpe for several")
    try:
        import cmaes  # noqa: F401
    except ImportError:
        raise ValueError("strategy cmaes needs the 'cmaes' package: pip install cmaes") from None
    return optuna.samplers.CmaEsSampler(
        seed=seed,
        n_startup_trials=n_startup,
        independent_sampler=optuna.samplers.RandomSampler(seed=seed),
        warn_independent_sampling=False,
    )


#: strategy name -> its sampler (a new Optuna sampler is one line here and one name in `Strategy`)
SAMPLERS: dict[str, SamplerFactory] = {"tpe": _tpe, "random": _random, "nsga2": _nsga2, "cmaes": _cmaes}


def make_sampler(strategy: str, seed: int, n_objectives: int, n_startup: int = 10) -> optuna.samplers.BaseSampler:
    """The Optuna sampler of a strategy (a name in `SAMPLERS`)."""
    factory = SAMPLERS.get(strategy)
    if factory is None:
        raise ValueError(f"no Optuna sampler for strategy {strategy!r}")
    return factory(seed, n_objectives, n_startup)
