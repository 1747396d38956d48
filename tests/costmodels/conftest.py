"""Fixtures of the cost-model tests."""

from __future__ import annotations

import pytest


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test asking for `trip_code` runs once per code of its module's ``CODES``."""
    if "trip_code" in metafunc.fixturenames:
        metafunc.parametrize("trip_code", metafunc.module.CODES)


@pytest.fixture
def tripped(request: pytest.FixtureRequest, trip_code: str) -> tuple[str, set[str]]:
    """A family's code and the codes its module's ``TRIPS[code]`` case gets (a table with a case for
    every code of ``CODES`` and no other); every reason it gets must say what is wrong."""
    table, codes = request.module.TRIPS, request.module.CODES
    assert set(table) == set(codes), "TRIPS must hold one case for each code of CODES"
    found = table[trip_code]()
    assert all(len(v.message) > 20 for v in found), found
    return trip_code, {v.code for v in found}
