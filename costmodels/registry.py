"""The explicit registry of accelerator families and their presets."""

from __future__ import annotations

import importlib
from typing import Any

from costmodels.presets import preset_family, preset_names
from costmodels.protocol import Target

#: family name -> package exporting ``make_target(preset, overrides) -> Target`` (a fifth family: add its folder
#: under costmodels/ and a line here, and give its presets ``family: <name>``)
FAMILIES: dict[str, str] = {
    "rngd": "costmodels.rngd",
    "trainium": "costmodels.trainium",
    "ascend": "costmodels.ascend",
    "tenstorrent": "costmodels.tenstorrent",
}


def get_target(preset: str, overrides: dict[str, Any] | None = None) -> Target:
    """Build the target for a preset name (e.g. ``"rngd"``, ``"trn2"``), with optional overrides."""
    family = preset_family(preset)
    module = importlib.import_module(FAMILIES[family])
    target: Target = module.make_target(preset, overrides or {})
    return target


def target_names() -> list[str]:
    """Every preset whose family is registered."""
    return [p for p in preset_names() if preset_family(p) in FAMILIES]
