"""The engine routes' examples are found when the OpenAPI document is built, not when the app starts."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
from app.main import create_app
from app.api.examples_engine import _first_feasible
app = create_app()
before = _first_feasible.cache_info().currsize
doc = app.openapi()
body = doc["paths"]["/v1/mappings/evaluate"]["post"]["requestBody"]["content"]["application/json"]
valid = doc["paths"]["/v1/mappings/validate"]["post"]["requestBody"]["content"]["application/json"]
print(before, _first_feasible.cache_info().currsize, len(body["examples"]), len(valid["examples"]))
"""


def test_examples_are_computed_with_the_document_not_at_start_up() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=300)
    before, after, evaluate, validate = (int(x) for x in out.stdout.split())
    assert before == 0  # creating the app found no warm start
    assert after == 4  # the document did: one per example problem
    assert evaluate == 8 and validate == 4  # a point each, two mappings, a knob point, one override; a mapping each
