"""Content keys of a request: problem hash, cost-model version and the cache key.

The cost-model version is derived from the sources of the target's family (its package, the shared
``costmodels`` modules it imports and its preset file), so editing a formula invalidates every
cached result of that family, and only of that family, without anyone remembering to bump a number.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import threading
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from costmodels.presets import preset_family, preset_names
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


def _files_of(module_name: str) -> list[Path]:
    """A module's file, or every .py file under a package (none when it cannot be found)."""
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return []
    origin = Path(spec.origin)
    if spec.submodule_search_locations and module_name.count(".") >= 1:
        return sorted(origin.parent.rglob("*.py"))
    return [origin]


#: an import statement at the start of a line (a lazy one inside a function too): ``from M import names`` (names in
#: parentheses may span lines) or ``import a, b``
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)|import[ \t]+([^\n]*))", re.MULTILINE
)


def _costmodels_imports(path: Path) -> set[str]:
    """The ``costmodels`` modules a source file imports (``from costmodels import x`` names module x).

    Read from the import statements' text (`_IMPORT`), not a parse of the whole file: a process's first result
    paid about 50 ms to parse a family's sources (a CLI call's start; 6.5 ms this way, trn2). The same sets as
    the syntax tree's on every source file of the project (`tests/mapper/test_keys_imports.py`); a statement-like
    line in a docstring can only add a module, so the version then covers more files, never fewer."""
    out: set[str] = set()
    for m in _IMPORT.finditer(path.read_text().replace(";", "\n")):  # (statements after a ';' start a line)
        module, names, plain = m.group(1), m.group(2), m.group(3)
        if plain is not None:
            for part in plain.split("#")[0].split(","):
                name = part.split()[0] if part.split() else ""
                if name.startswith("costmodels."):
                    out.add(name)
        elif module == "costmodels":
            body = " ".join(line.split("#")[0] for line in names.strip("()").splitlines())
            out |= {f"costmodels.{n.split()[0]}" for n in body.split(",") if n.split()}
        elif module.startswith("costmodels."):
            out.add(module)
    return out


@cache
def model_files(module_name: str) -> tuple[Path, ...]:
    """The sources that price a target defined in `module_name`: its family's package (``costmodels.<family>``;
    the module alone for a target defined elsewhere) and the shared ``costmodels`` modules they import, transitively."""
    parts = module_name.split(".")
    root = ".".join(parts[:2]) if parts[0] == "costmodels" and len(parts) > 2 else module_name
    files = set(_files_of(root))
    todo = list(files)
    while todo:
        for name in _costmodels_imports(todo.pop()):
            for f in _files_of(name):
                if f not in files:
                    files.add(f)
                    todo.append(f)
    return tuple(sorted(files))


def _digest(files: list[Path]) -> str:
    home = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in files:
        h.update((f.resolve().relative_to(home).as_posix() if f.resolve().is_relative_to(home) else f.name).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def cost_model_version(target: Target) -> str:
    """Version of the model that priced a result: package version + digest of the family's sources.

    The digest covers the target's family package, the shared ``costmodels`` modules that package
    imports (protocol, IR, scoring pieces) and the family's preset files, so editing one family's
    model invalidates that family's cached results only.
    """
    return _version(type(target).__module__, target.family)


_version_lock = threading.Lock()


@cache
def _version_unlocked(module_name: str, family: str) -> str:
    files = [*model_files(module_name), *_preset_files(family)]
    return f"{_package_version()}+{family}.{_digest(files)}"


def _version(module_name: str, family: str) -> str:
    """Computed once per process: the sources do not change under a running process. Locked, because
    the service computes it in request threads at once and `ast.parse` is not safe to run concurrently."""
    with _version_lock:
        return _version_unlocked(module_name, family)


def _preset_files(family: str) -> list[Path]:
    """The preset files of a family (the data its model prices with)."""
    folder = Path(str(resources.files("costmodels") / "presets"))
    return [folder / f"{name}.yaml" for name in preset_names() if preset_family(name) == family]


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
