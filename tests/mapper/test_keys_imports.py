"""The cost-model version's import scan (`mapper.keys._costmodels_imports`) reads import statements from the text:
it must find every ``costmodels`` module the syntax tree finds, on every source file of the project and on the
statement forms Python allows (a missed import would leave a result cached across a change of the model)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mapper import keys

ROOT = Path(keys.__file__).resolve().parent.parent


def parsed_imports(path: Path) -> set[str]:
    """`_costmodels_imports` from the syntax tree: the reference."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("costmodels.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "costmodels":
                out |= {f"costmodels.{a.name}" for a in node.names}
            elif node.module.startswith("costmodels."):
                out.add(node.module)
    return out


def _sources() -> list[Path]:
    skip = {"node_modules", "__pycache__"}
    files = sorted(ROOT.rglob("*.py"))
    return [f for f in files if not any(p.startswith(".") or p in skip for p in f.relative_to(ROOT).parts)]


def test_the_text_scan_finds_what_the_syntax_tree_finds_in_every_source() -> None:
    files = _sources()
    assert len(files) > 100
    for f in files:
        found, parsed = keys._costmodels_imports(f), parsed_imports(f)
        assert parsed <= found, (f, parsed - found)
        if f.relative_to(ROOT).parts[0] in {"costmodels", "mapper", "app", "executor", "workload"}:
            assert found == parsed, (f, found - parsed)  # (and no more: they hold no import-like text)


@pytest.mark.parametrize(
    "source",
    [
        "from costmodels.trainium.bounds import (\n    TILE_PARAMS,  # the tiles\n    tile_bounds,\n)\n",
        "from costmodels import (\n    registry,  # a comment, with a comma\n    protocol as p,\n)\n",
        "from costmodels import energy, ir as the_ir  # two modules\n",
        "import numpy as np, costmodels.dominance as dom\n",
        "import costmodels.cancel; import costmodels.protocol\n",
        "def f():\n    if True:\n        from costmodels.presets import preset_family\n    return 1\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from costmodels.ir import Mapping\n",
        "x = 1\nfrom costmodels.family import KNOBS as K, RULE_CODES\n",
    ],
)
def test_every_import_form_is_found(tmp_path: Path, source: str) -> None:
    f = tmp_path / "m.py"
    f.write_text(source)
    parsed = parsed_imports(f)
    assert parsed and parsed <= keys._costmodels_imports(f)
