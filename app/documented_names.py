"""Request fields that name a target preset, an objective or a workload, documented with the names the service knows.

Each type is a plain string to validation: an unknown name is still the engine's 422 (or a path's 404) that lists
the known names. The OpenAPI document gives the field those names as its ``enum``, so the console lists them and a
client generated from the document (or a fuzzer) picks a known one. The names are the registry's and
the shipped catalog's when the app is built (`costmodels.registry.target_names`, `mapper.settings.OBJECTIVES`:
the objectives some target prices, `workload.named.names`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import JsonValue

from costmodels.registry import target_names
from mapper.settings import OBJECTIVES
from workload import named
from workload.spec import documented_names

#: a target preset (GET /v1/targets)
TargetName = Annotated[str, documented_names(list(target_names()))]
#: an objective to minimise (one that some target prices)
ObjectiveName = Annotated[str, documented_names(list(OBJECTIVES))]
#: a named workload (GET /v1/workloads)
WorkloadName = Annotated[str, documented_names(named.names())]


def given(name: str, kind: str) -> dict[str, JsonValue]:
    """The JSON Schema of "field `name` is given, of JSON type `kind`" (null counts as not given), titled so that
    the console names the branch."""
    return {"title": f"with {name}", "required": [name], "properties": {name: {"type": kind}}}


def one_of_given(fields: dict[str, str], title: str) -> dict[str, JsonValue]:
    """A model's JSON Schema addition saying that exactly one of `fields` (name -> its JSON type when given) is
    given: one ``oneOf`` branch per field (`given`). Documentation only: the model's validator says which were
    given and what to do."""
    return {"title": title, "oneOf": [given(name, kind) for name, kind in fields.items()]}
