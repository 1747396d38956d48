"""FuriosaAI RNGD contraction engine (preset ``rngd``): contraction-engine-rngd.txt, hardware-facts.md §1."""

from costmodels.rngd.hardware import RngdHardware
from costmodels.rngd.target import RngdTarget, make_target

__all__ = ["RngdHardware", "RngdTarget", "make_target"]
