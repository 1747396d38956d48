"""Content keys of a request: problem hash, cost-model version and the cache key.

The cost-model version is derived from the source of the target's family module (and of the
shared protocol and IR), so editing a formula invalidates every cached result of that family
without anyone remembering to bump a number.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from costmodels.protocol import Target
from mapper.settings import SearchSettings
from workload.canonical import content_hash
from workload.problem import Problem


def problem_hash(problem: Problem) -> str:
    """Content hash of the canonical problem (labels excluded)."""
    return content_hash(problem)


def _package_version() -> str:
    try:
        return metadata.version("tensormapper")
    except metadata.PackageNotFoundError:
        return "0+local"


@cache
def _source_digest(module_name: str) -> str:
    """sha256 of a module's file; for a package, of every .py and preset .yaml file under it."""
    try:
        mod = importlib.import_module(module_name)
    except ImportError:
        return "missing"
    if not mod.__file__:
        return "builtin"
    path = Path(mod.__file__)
    files = sorted([*path.parent.rglob("*.py"), *path.parent.rglob("*.yaml")]) if hasattr(mod, "__path__") else [path]
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(path.parent).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def cost_model_version(target: Target) -> str:
    """Version of the model that priced a result: package version + digest of the cost-model sources.

    The digest covers the whole ``costmodels`` package (formulas and preset data files) and the
    module defining the target, so any change to a model invalidates cached results, at the price
    of also invalidating other families' results when one family changes.
    """
    digest = hashlib.sha256((_source_digest("costmodels") + _source_digest(type(target).__module__)).encode())
    return f"{_package_version()}+{target.family}.{digest.hexdigest()[:12]}"


def cache_key(problem: Problem, preset: str, overrides: dict[str, Any], version: str, settings: SearchSettings) -> str:
    """Key of a request: identical inputs give the same key, any change gives another."""
    payload = {
        "problem": problem_hash(problem),
        "target": preset,
        "overrides": overrides,
        "cost_model": version,
        "settings": settings.model_dump(mode="json"),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
