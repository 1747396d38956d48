"""The Ascend hardware model (A2/A3 = 910B, A5 = 950) as seen through the PTO tile ISA.

Presets ``ascend-910b`` and ``ascend-a5`` (costmodels/presets/) are validated into
`AscendHardware`; every field carries a citation in the preset's ``sources:``. The model
derives the per-dtype cube facts the cost model uses (fractal K, cube repeats, peak MACs).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from costmodels.energy import EnergyTable
from workload import dtypes

Generation = Literal["a2a3", "a5"]
#: the memory levels of the cost reports' bytes (cube: hbm gm l1 l0a l0b l0c; vector: hbm ub), each priced
#: by the preset's energy table
ENERGY_LEVELS: tuple[str, ...] = ("hbm", "gm", "l1", "l0a", "l0b", "l0c", "ub")

#: PTO C++ element type names, for rendering tile types (pto-tmatmul.txt, Constraints).
CPP_TYPES: dict[str, str] = {
    "f16": "half",
    "bf16": "bfloat16_t",
    "f32": "float",
    "i8": "int8_t",
    "i32": "int32_t",
    "i4": "int4b_t",
    "f8e4m3": "float8_e4m3_t",
    "f8e5m2": "float8_e5m2_t",
}


class AscendHardware(BaseModel):
    """One Ascend generation: core counts, fractals, buffers, data-path rates, vector costs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    generation: Generation
    clock_hz: PositiveFloat
    aic_cores: PositiveInt = Field(description="cube (AI) cores")
    aiv_cores: PositiveInt = Field(description="vector cores")
    fractal_m: PositiveInt
    fractal_n: PositiveInt
    fractal_k: dict[str, PositiveInt] = Field(description="input dtype -> K of one cube fractal (32 B / sizeof)")
    fractal_bytes: PositiveInt
    acc_fractal_bytes: PositiveInt
    cube_head_cycles: int = Field(ge=0)
    fp32_cube_repeats: PositiveInt
    tmatmul_max_dim: PositiveInt
    matmul_triples: tuple[tuple[str, str, str], ...] = Field(description="(accumulator, left, right) dtypes")
    l0a_bytes: PositiveInt
    l0b_bytes: PositiveInt
    l0c_bytes: PositiveInt
    l1_bytes: PositiveInt
    ub_bytes: PositiveInt
    l2_bytes: int = Field(ge=0)
    alignment_bytes: PositiveInt
    l1_to_l0a_bytes_per_cycle: PositiveFloat
    l1_to_l0b_bytes_per_cycle: PositiveFloat
    hbm_bytes_per_cycle_per_core: PositiveFloat
    l2_bytes_per_cycle_per_core: PositiveFloat
    l0c_to_gm_bytes_per_cycle: PositiveFloat
    gm_to_ub_bytes_per_cycle: PositiveFloat
    ub_to_gm_bytes_per_cycle: PositiveFloat
    vector_repeat_bytes: PositiveInt
    vector_block_bytes: PositiveInt
    vector_repeat_cycles: PositiveFloat
    vector_fixed_cycles: float = Field(ge=0)
    vcadd_repeat_cycles: PositiveFloat
    vcadd_head_cycles: float = Field(ge=0)
    vcadd_tail_cycles: float = Field(ge=0)
    vector_dtypes: tuple[str, ...]
    rowprod_register_tree: bool = Field(description="A5: vmul + vintlv register tree; A2/A3: vmul per block + scalar")
    rowprod_block_cycles: PositiveFloat
    rowprod_scalar_cycles_per_element: float = Field(ge=0)
    rowprod_sync_cycles: float = Field(ge=0)
    rowprod_tree_steps_b16: PositiveInt
    rowprod_tree_steps_b32: PositiveInt
    vf_cycles_per_instruction: PositiveFloat
    recommended_base_mkn: tuple[PositiveInt, PositiveInt, PositiveInt]
    energy: EnergyTable = Field(description="pJ per MAC by dtype and per byte by level, each with its source")

    @model_validator(mode="after")
    def _consistent(self) -> AscendHardware:
        for name in (*self.fractal_k, *(d for t in self.matmul_triples for d in t), *self.vector_dtypes):
            try:
                dtypes.canonical_dtype(name)
            except ValueError as e:
                raise ValueError(f"unknown dtype {name!r} in the preset: {e}") from None
        for acc, left, right in self.matmul_triples:
            for d in (left, right):
                if d not in self.fractal_k:
                    raise ValueError(f"matmul triple ({acc}, {left}, {right}) uses {d}, which has no fractal_k")
            if acc not in ("i32", "f32"):
                raise ValueError(f"accumulator {acc} of a matmul triple must be i32 or f32")
        for d, k0 in self.fractal_k.items():
            if k0 * dtypes.info(d).bits != 32 * 8:
                raise ValueError(f"fractal_k[{d}] = {k0} is not 32 B / sizeof({d})")
        if self.aiv_cores < self.aic_cores:
            raise ValueError("aiv_cores must be at least aic_cores (split architecture, 2 AIV per AIC)")
        self.energy.require(ENERGY_LEVELS, (*self.fractal_k, *self.vector_dtypes))
        return self

    # ---- derived facts ----------------------------------------------------------------------
    def k0(self, dtype: str) -> int:
        """K of one cube fractal for a left-operand dtype (hardware-facts.md §3.2 step 1)."""
        return self.fractal_k[dtype]

    def cube_repeats(self, dtype: str) -> int:
        """r of the cube formula: 2 for fp32 inputs, else 1 (hardware-facts.md §3.1 Cube cycle model)."""
        return self.fp32_cube_repeats if dtype == "f32" else 1

    def macs_per_cycle(self, dtype: str) -> float:
        """Peak MACs per cycle of one AIC: one fractal per r cycles."""
        return self.fractal_m * self.k0(dtype) * self.fractal_n / self.cube_repeats(dtype)

    def supports_triple(self, acc: str, left: str, right: str) -> bool:
        return (acc, left, right) in self.matmul_triples

    def cpp(self, dtype: str) -> str:
        return CPP_TYPES.get(dtype, dtype)
