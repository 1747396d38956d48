"""Huawei Ascend cube and vector units (presets ``ascend-910b``, ``ascend-a5``): pto-tmatmul.txt,
pto-trowprod.txt, hardware-facts.md §3."""

from costmodels.ascend.hardware import AscendHardware
from costmodels.ascend.target import AscendTarget, make_target

__all__ = ["AscendHardware", "AscendTarget", "make_target"]
