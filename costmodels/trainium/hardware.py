"""The Trainium hardware preset model: validated numbers of one NeuronCore generation and its chip.

The values live in ``costmodels/presets/trn1.yaml`` (NeuronCore-v2) and ``trn2.yaml``
(NeuronCore-v3) with a citation per field (hardware-facts.md §2.1, nki-nc_matmul.txt). A request
may override any field (a part with fewer cores, a smaller SBUF); the validators reject values
the cost model cannot price.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from costmodels.energy import EnergyTable

#: the memory levels of the cost report's bytes, each priced by the preset's energy table
ENERGY_LEVELS: tuple[str, ...] = ("hbm", "sbuf", "psum")
#: the input dtypes nc_matmul takes (nki-nc_matmul.txt), each needing a MAC energy
ENERGY_DTYPES: tuple[str, ...] = ("f8e4m3", "f8e5m2", "bf16", "f16", "f32")
#: fields that are search options, not chip facts: no preset cites them (their default is in the model)
SEARCH_OPTIONS: frozenset[str] = frozenset({"tile_space"})


class TrainiumHardware(BaseModel):
    """Numbers of one Trainium part (see the preset file for the source of each)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    generation: str = Field(description="NeuronCore generation, e.g. NeuronCore-v2")
    pe_rows: int = Field(ge=1, le=1024, description="tensor engine rows = contraction (partition) size per instruction")
    pe_cols: int = Field(ge=1, le=1024, description="tensor engine columns = stationary free size limit")
    moving_free_max: int = Field(ge=1, le=65536, description="moving free size limit of nc_matmul")
    te_clock_hz: float = Field(gt=0, description="tensor engine clock")
    ve_clock_hz: float = Field(gt=0, description="vector engine clock (PSUM eviction)")
    cores_per_chip: int = Field(ge=1, le=256)
    sbuf_partitions: int = Field(ge=1, le=1024)
    sbuf_partition_bytes: int = Field(ge=1024, description="SBUF bytes per partition")
    psum_banks: int = Field(ge=1, le=64, description="PSUM banks per partition")
    psum_bank_bytes: int = Field(ge=64, description="bytes per PSUM bank per partition")
    hbm_bytes_per_s: float = Field(gt=0, description="HBM bandwidth per chip")
    dma_engines_per_core: int = Field(ge=1, le=1024)
    dma_engine_bytes_per_s: float = Field(gt=0)
    fp8_double_row: bool = Field(description="fp8 double_row mode: contraction up to 2 x pe_rows per instruction")
    matmul_floor_cycles: int = Field(ge=0, description="the 64 of max(min(64, N_stationary), N_moving)")
    fp32_cost_factor: float = Field(ge=1, description="fp32 nc_matmul costs this many times the bf16 cost")
    access_overhead_cycles: float = Field(ge=0, description="static overhead of one SBUF/PSUM access")
    energy: EnergyTable = Field(description="pJ per MAC by dtype and per byte by level, each with its source")
    # A search option, not a chip fact: which tile space the mapper offers (issue #12). The default
    # is every legal tile count (rule T1), searched by best-first branch and bound with a proof over
    # it (costmodels/trainium/tiles.py); "ladder" is the smaller space offered before, enumerated whole.
    tile_space: Literal["ladder", "every"] = Field(
        default="every",
        description="tiles offered: 'ladder' (2^a and 3*2^a caps within 2 M points, enumerated) or 'every' "
        "(every tile count, proven by best-first branch and bound over the whole tile space)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> TrainiumHardware:
        if self.pe_rows > self.sbuf_partitions:
            raise ValueError("pe_rows cannot exceed sbuf_partitions: the contraction runs over SBUF partitions")
        if self.moving_free_max * 4 > self.psum_bank_bytes:
            raise ValueError(
                "moving_free_max fp32 results must fit one PSUM bank (moving_free_max * 4 <= psum_bank_bytes)"
            )
        self.energy.require(ENERGY_LEVELS, ENERGY_DTYPES)
        return self

    # ---- derived numbers -----------------------------------------------------------------
    @property
    def core_dma_bytes_per_s(self) -> float:
        """DMA bandwidth one NeuronCore can drive (its engines; hardware-facts.md §2.2 step 5 cap)."""
        return self.dma_engines_per_core * self.dma_engine_bytes_per_s

    def max_contraction(self, double_row: bool) -> int:
        """Contraction elements one nc_matmul takes: pe_rows, or twice that with fp8 double_row."""
        return self.pe_rows * (2 if double_row and self.fp8_double_row else 1)

    def peak_macs_per_cycle(self, *, fp32: bool, double_row: bool) -> float:
        """Peak MACs per tensor-engine cycle of one core for an input dtype class."""
        base = self.pe_rows * self.pe_cols * (2 if double_row and self.fp8_double_row else 1)
        return base / (self.fp32_cost_factor if fp32 else 1.0)
