"""Kept for `test_mapper_cli.py`, which imports the mapper's test double under this name.

The double lives in `tests/mapper/fake_target.py` (fixtures in `tests/mapper/conftest.py`); this
module goes once that test imports it from there.
"""

from tests.mapper.fake_target import FakeHardware, FakeMatmulTarget, fake_target, matmul

__all__ = ["FakeHardware", "FakeMatmulTarget", "fake_target", "matmul"]
