"""Tenstorrent Tensix (presets ``wormhole-n150``, ``blackhole-p150``): tenstorrent-conv2d.md,
hardware-facts.md §4."""

from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.target import TenstorrentTarget, make_target

__all__ = ["TensixHardware", "TenstorrentTarget", "make_target"]
