"""Hardware presets as validated data files, with per-request overrides.

Each preset is a YAML file in ``costmodels/presets/`` named after the preset. Its ``family`` key
picks the pydantic model it is validated into; every other key is a field of that model. A
request may override any field (a smaller part sends its own core count or SRAM size); unknown
keys and out-of-range values are rejected with the field name. A dotted key overrides one entry of
a nested section (``energy.byte_pj.hbm: 40``).
"""

from __future__ import annotations

import copy
from functools import cache
from importlib import resources
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from workload.errors import ProblemError

M = TypeVar("M", bound=BaseModel)


def preset_names() -> list[str]:
    files = resources.files("costmodels") / "presets"
    return sorted(p.name.removesuffix(".yaml") for p in files.iterdir() if p.name.endswith(".yaml"))


@cache
def _raw(name: str) -> dict[str, Any]:
    path = resources.files("costmodels") / "presets" / f"{name}.yaml"
    if name not in preset_names() or not path.is_file():  # a name, never a path: no ../ escapes the folder
        raise ProblemError(f"unknown target {name!r}", token=name, hint=f"use one of {', '.join(preset_names())}")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or "family" not in data:
        raise RuntimeError(f"preset file {name}.yaml has no family")
    return data


def preset_family(name: str) -> str:
    return str(_raw(name)["family"])


def load_preset(name: str, model: type[M], overrides: dict[str, Any] | None = None) -> M:
    """Validate preset `name` (plus `overrides`) into `model`.

    Raises:
        ProblemError: an override names an unknown field or gives an invalid value.
    """
    data = copy.deepcopy({k: v for k, v in _raw(name).items() if k not in ("family", "sources")})
    for key, value in (overrides or {}).items():
        if "." in key and key.split(".")[0] in model.model_fields:
            _set_nested(data, key, value, name)
            continue
        if key not in model.model_fields:
            raise ProblemError(
                f"target {name} has no setting {key!r}",
                token=key,
                hint=f"overridable settings: {', '.join(sorted(model.model_fields))}",
            )
        data[key] = value
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        what = f"invalid value for {field} of target {name}" if field else f"inconsistent settings of target {name}"
        raise ProblemError(
            f"{what}: {str(first['msg']).removeprefix('Value error, ')}",
            token=field or name,
            hint="check the overrides",
        ) from None


def _set_nested(data: dict[str, Any], key: str, value: Any, name: str) -> None:
    """Set ``data[a][b][c] = value`` for the dotted key ``a.b.c`` (the sections on the way must exist)."""
    *path, last = key.split(".")
    node: Any = data
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            raise ProblemError(
                f"target {name} has no section {key.rsplit('.', 1)[0]!r} to override",
                token=key,
                hint="a dotted override names a section of the preset and one of its entries, e.g. energy.byte_pj.hbm",
            )
    node[last] = value


def preset_sources(name: str) -> dict[str, str]:
    """The citations recorded in a preset file (field -> source)."""
    return dict(_raw(name).get("sources", {}))
