"""AWS Trainium tensor engine (presets ``trn1``, ``trn2``): nki-nc_matmul.txt, hardware-facts.md §2."""

from costmodels.trainium.hardware import TrainiumHardware
from costmodels.trainium.target import TrainiumTarget, make_target

__all__ = ["TrainiumHardware", "TrainiumTarget", "make_target"]
