"""The Tenstorrent Tensix hardware model (validated from costmodels/presets/<preset>.yaml).

Every field's source is recorded in the preset's ``sources:`` mapping; the numbers come from
hardware-facts.md §4.1 and tenstorrent-conv2d.md.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from costmodels.energy import EnergyTable

Fidelity = Literal["LoFi", "HiFi2", "HiFi3", "HiFi4"]
FIDELITIES: tuple[str, ...] = ("LoFi", "HiFi2", "HiFi3", "HiFi4")
#: the memory levels of the cost report's bytes priced by the preset's energy table (noc_weights and
#: noc_activations are the noc level's two operands, not levels of their own)
ENERGY_LEVELS: tuple[str, ...] = ("dram", "noc", "l1", "halo")


class TensixHardware(BaseModel):
    """One Tenstorrent chip as the cost model sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    grid_x: int = Field(ge=1, le=64, description="compute grid columns")
    grid_y: int = Field(ge=1, le=64, description="compute grid rows")
    l1_kib: int = Field(ge=64, description="L1 SRAM per Tensix core, KiB")
    l1_reserved_kib: int = Field(ge=0, description="L1 kept for firmware, kernels and config tensors, KiB")
    tile: int = Field(ge=1, description="tile height and width (32)")
    tile_cycles: dict[Fidelity, int] = Field(description="cycles per 32x32x32 tile product at each math fidelity")
    dst_tiles: int = Field(ge=1, description="output tiles in the destination register (bf16, half sync)")
    dst_tiles_fp32: int = Field(ge=1, description="output tiles in the destination register with fp32 accumulation")
    noc_link_bytes_per_cycle: float = Field(gt=0, description="NoC link bandwidth per NoC")
    noc_hop_cycles: int = Field(ge=0, description="router latency per hop")
    l1_port_bytes_per_cycle: float = Field(gt=0, description="NoC <-> L1 read bandwidth per NoC")
    dram_gb_per_s: float = Field(gt=0, description="aggregate DRAM bandwidth, GB/s")
    clock_ghz: float = Field(gt=0, description="AICLK")
    subblock_overhead_cycles: int = Field(ge=0, description="pack/unpack overhead per output sub-block and K block")
    fidelities: tuple[Fidelity, ...] = Field(
        min_length=1,
        description="math fidelities the search may pick for bf16/f32 inputs (the fidelity policy); LoFi and "
        "HiFi2 multiply fewer mantissa bits, so the preset allows only ttnn's HiFi4 default",
    )

    bf16_accumulation: bool = Field(
        default=False,
        description="may the search accumulate in the 16-bit destination register (fp32_acc off)? The problem "
        "declares f32 accumulation for bf16/f32 inputs, so this precision loss is opt-in",
    )

    energy: EnergyTable = Field(description="pJ per MAC by dtype and per byte by level, each with its source")

    # Where the activations come from and go (issue #13). Placement options of one layer in a
    # network, not chip facts: a request sets them as overrides; the defaults price a lone problem
    # as before (input read from DRAM, output written to DRAM). `tenstorrent.cost` prices them.
    input_in_l1: bool = Field(
        default=False,
        description="the input arrives L1-sharded (from the previous layer) instead of being read from DRAM",
    )
    input_layout: str = Field(
        default="",
        description="the layout the L1-sharded input arrives in (height/R, block/RxC, width/C); empty: the "
        "mapping's own layout. A mapping of another layout pays a reshard over the NoC",
    )
    output_in_l1: bool = Field(
        default=False, description="the output stays L1-sharded for the next layer instead of being written to DRAM"
    )
    l1_live_bytes: int = Field(
        default=0,
        ge=0,
        description="L1 bytes per core held by other live tensors (residual branches) while the layer runs",
    )

    @model_validator(mode="after")
    def _consistent(self) -> TensixHardware:
        self.energy.require(ENERGY_LEVELS, ())  # a number format without a figure costs the dearest MAC
        missing = [f for f in FIDELITIES if f not in self.tile_cycles]
        if missing:
            raise ValueError(f"tile_cycles lacks {', '.join(missing)}")
        cyc = [self.tile_cycles[f] for f in FIDELITIES]  # type: ignore[index]
        if any(c < 1 for c in cyc) or cyc != sorted(cyc):
            raise ValueError("tile_cycles must be positive and not decrease from LoFi to HiFi4")
        if self.dst_tiles_fp32 > self.dst_tiles:
            raise ValueError("dst_tiles_fp32 cannot exceed dst_tiles (fp32 entries are twice as wide)")
        if len(set(self.fidelities)) != len(self.fidelities):
            raise ValueError("fidelities lists a fidelity twice")
        if self.input_layout and not re.fullmatch(r"height/\d+|width/\d+|block/\d+x\d+", self.input_layout):
            raise ValueError(f"input_layout {self.input_layout!r} is not height/R, block/RxC or width/C (or empty)")
        if self.input_layout and math.prod(int(n) for n in re.findall(r"\d+", self.input_layout)) > self.cores:
            raise ValueError(f"input_layout {self.input_layout} uses more cores than the {self.cores} of the grid")
        if self.l1_reserved_kib >= self.l1_kib:
            raise ValueError("l1_reserved_kib must leave some L1 free")
        return self

    @property
    def cores(self) -> int:
        return self.grid_x * self.grid_y

    @property
    def l1_free_bytes(self) -> int:
        return (self.l1_kib - self.l1_reserved_kib) * 1024

    @property
    def clock_hz(self) -> float:
        return self.clock_ghz * 1e9

    @property
    def dram_bytes_per_cycle(self) -> float:
        return self.dram_gb_per_s / self.clock_ghz

    @property
    def tile_macs(self) -> int:
        return self.tile**3

    @property
    def peak_macs_per_cycle_core(self) -> float:
        """MACs per cycle per core at the fastest fidelity (LoFi)."""
        return self.tile_macs / min(self.tile_cycles.values())

    @property
    def preferred_fidelity(self) -> str:
        """The most precise allowed fidelity (warm starts and knob defaults)."""
        return max(self.fidelities, key=FIDELITIES.index)
