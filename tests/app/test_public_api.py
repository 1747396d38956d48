"""The packages' public APIs: what `__all__` promises is importable, and the docstring examples run."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["workload", "executor", "mapper"])
def test_all_names_import_and_examples_run(name: str) -> None:
    mod = importlib.import_module(name)
    assert mod.__all__ and all(hasattr(mod, n) for n in mod.__all__)
    result = doctest.testmod(mod)
    assert result.failed == 0


def test_from_mapper_import_tune_works_for_a_python_user() -> None:
    from costmodels.registry import get_target
    from mapper import SearchSettings, tune
    from workload import conv2d

    r = tune(conv2d(batch=1, in_channels=16, out_channels=16, input_height=8, input_width=8, kernel=3, padding=1),
             get_target("wormhole-n150"), SearchSettings())  # fmt: skip
    assert r.feasible and r.validation_passed and r.proven_optimal
