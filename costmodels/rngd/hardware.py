"""The RNGD hardware preset model: validated numbers of the contraction engine and its memories.

The values live in ``costmodels/presets/rngd.yaml`` with a citation per field (hardware-facts.md
§1.1, contraction-engine-rngd.txt). A request may override any field, for example a smaller
part with fewer slices or a smaller TRF; the validators reject values the model cannot price.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from costmodels.energy import EnergyTable
from workload import dtypes

#: Lane counts the Row level accepts (contraction-engine-rngd.txt, Constraints, Row utilization).
ROW_CHOICES: tuple[int, ...] = (1, 2, 4, 8)
#: the memory levels of the cost report's bytes, each priced by the preset's energy table
ENERGY_LEVELS: tuple[str, ...] = ("hbm", "dm", "trf")


class RngdHardware(BaseModel):
    """Numbers of one RNGD part (see the preset file for the source of each)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    clock_hz: float = Field(gt=0)
    clusters: int = Field(ge=1, le=64)
    slices_per_cluster: int = Field(ge=1, le=4096)
    rows: int = Field(ge=1, le=8)
    packet_bytes: int = Field(ge=8, le=256)
    flit_bytes: int = Field(ge=8, le=256)
    flit_buffer_bytes: int = Field(ge=8)
    max_feed_flits: int = Field(ge=1, le=8)
    default_feed_flits: int = Field(ge=1, le=8)
    trf_bytes_per_slice: int = Field(ge=64)
    trf_half_bytes_per_slice: int = Field(ge=32)
    dm_bytes_per_slice: int = Field(ge=1024)
    fetch_bytes_per_cycle: float = Field(gt=0)
    trf_fill_bytes_per_cycle: float = Field(gt=0)
    accumulator_cells_per_row: int = Field(ge=1)
    drain_elements_per_cycle: float = Field(gt=0)
    reducer_latency: dict[str, int]
    shift_range: dict[str, tuple[int, int]]
    input_dtypes: tuple[str, ...]
    dma_bytes_per_cycle_per_engine: float = Field(gt=0)
    dma_engines: int = Field(ge=1)
    dma_startup_cycles: float = Field(ge=0)
    hbm_bytes_per_second: float = Field(gt=0)
    dm_stream_bytes_per_cycle: float = Field(gt=0, description="seed figure, kept with its conflict noted")
    energy: EnergyTable = Field(description="pJ per MAC by dtype and per byte by level, each with its source")

    @model_validator(mode="after")
    def _consistent(self) -> RngdHardware:
        if self.rows not in ROW_CHOICES:
            raise ValueError(f"rows must be one of {ROW_CHOICES} (the Row level holds 1, 2, 4 or 8 lanes)")
        if self.packet_bytes % self.flit_bytes:
            raise ValueError("packet_bytes must be a whole number of flits")
        if self.trf_half_bytes_per_slice > self.trf_bytes_per_slice:
            raise ValueError("trf_half_bytes_per_slice (double-buffered TRF) cannot exceed trf_bytes_per_slice")
        if self.max_feed_flits * self.flit_bytes > self.flit_buffer_bytes:
            raise ValueError("max_feed_flits flits must fit the flit buffer")
        if self.default_feed_flits > self.max_feed_flits:
            raise ValueError("default_feed_flits cannot exceed max_feed_flits")
        for name in self.input_dtypes:
            dtypes.canonical_dtype(name)
            if name not in self.reducer_latency or name not in self.shift_range:
                raise ValueError(f"input dtype {name} needs a reducer_latency and a shift_range entry")
        self.energy.require(ENERGY_LEVELS, self.input_dtypes)
        return self

    @property
    def slices(self) -> int:
        """Slices of the whole chip."""
        return self.clusters * self.slices_per_cluster

    @property
    def hbm_bytes_per_cycle(self) -> float:
        """HBM bandwidth in bytes per engine clock (1.5 TB/s at 1 GHz = 1500 B/cycle)."""
        return self.hbm_bytes_per_second / self.clock_hz

    @property
    def dma_bytes_per_cycle(self) -> float:
        """Chip DMA rate: engines x per-engine rate, capped by HBM (hardware-facts.md §1.2 step 4)."""
        return min(self.dma_bytes_per_cycle_per_engine * self.dma_engines, self.hbm_bytes_per_cycle)

    def packet_elements(self, dtype: str, feed_flits: int | None = None) -> int:
        """Elements of one packet: 64 B holds 32 bf16, 64 i8/f8, 128 i4 (hardware-facts.md §1.1)."""
        full = self.packet_bytes // self.flit_bytes
        flits = full if feed_flits is None else min(feed_flits, full)
        return int(flits * self.flit_bytes * 8 // dtypes.info(dtype).bits)

    def peak_macs_per_cycle(self, dtype: str) -> int:
        """Chip peak: every slice, every row, one full packet per cycle."""
        return self.slices * self.rows * self.packet_elements(dtype)
