"""Number formats of operands and accumulators.

Accumulation rules follow the reference documents:
- RNGD contraction engine: "Output types are widened automatically (i4/i8 -> i32, f8/bf16 -> f32)"
  (contraction-engine-rngd.txt, section "Constraints", Data type support).
- Trainium `nc_matmul`: "The matmul accumulation and results are always in float32"
  (nki-nc_matmul.txt).
- Ascend TMATMUL: (int32, int8, int8) and float accumulators for half/bf16/float inputs
  (pto-tmatmul.txt, "Constraints").
- tt-metal's block-float formats ``bfloat8_b`` and ``bfloat4_b`` (`workload.blockfloat`): 16 values
  share an 8-bit exponent; input formats of the Tenstorrent targets only, accumulated in f32 like bf16
  (the Tensix source registers hold them as floats, the destination register accumulates in fp32 or
  bf16). Their bytes per element are a whole tile's bytes (exponent section included) over its 1024
  elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import ml_dtypes
import numpy as np

from workload import blockfloat

DType = Literal["i4", "i8", "i32", "f8e4m3", "f8e5m2", "bf16", "f16", "f32", "bfloat8_b", "bfloat4_b"]
DTYPES: tuple[str, ...] = get_args(DType)

#: Accepted spellings of each dtype (lower-case), mapped to the canonical name.
ALIASES: dict[str, str] = {
    "i4": "i4",
    "int4": "i4",
    "s4": "i4",
    "i8": "i8",
    "int8": "i8",
    "s8": "i8",
    "i32": "i32",
    "int32": "i32",
    "f8": "f8e4m3",
    "fp8": "f8e4m3",
    "f8e4m3": "f8e4m3",
    "f8_e4m3": "f8e4m3",
    "e4m3": "f8e4m3",
    "float8_e4m3fn": "f8e4m3",
    "f8e5m2": "f8e5m2",
    "f8_e5m2": "f8e5m2",
    "e5m2": "f8e5m2",
    "float8_e5m2": "f8e5m2",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "f16": "f16",
    "fp16": "f16",
    "half": "f16",
    "float16": "f16",
    "f32": "f32",
    "fp32": "f32",
    "float": "f32",
    "float32": "f32",
    "bfloat8_b": "bfloat8_b",
    "bfp8_b": "bfloat8_b",
    "bf8_b": "bfloat8_b",
    "bfloat4_b": "bfloat4_b",
    "bfp4_b": "bfloat4_b",
    "bf4_b": "bfloat4_b",
}


@dataclass(frozen=True)
class DTypeInfo:
    """Static facts about one number format."""

    name: str
    bits: int
    is_int: bool
    numpy: np.dtype  # storage dtype (ml_dtypes for the low-precision ones)
    accumulator: str  # the accumulation type the references derive for this input type
    block: bool = False  # a block-float format (values share an exponent per block of 16)
    tile_bytes: int = 0  # block floats: bytes of a 32x32 tile, exponent section included

    @property
    def bytes(self) -> float:
        """Bytes per element (0.5 for i4; a tile's bytes over its 1024 elements for block floats)."""
        return self.tile_bytes / blockfloat.TILE_HW if self.block else self.bits / 8


_INFO: dict[str, DTypeInfo] = {
    "i4": DTypeInfo("i4", 4, True, np.dtype(ml_dtypes.int4), "i32"),
    "i8": DTypeInfo("i8", 8, True, np.dtype(np.int8), "i32"),
    "i32": DTypeInfo("i32", 32, True, np.dtype(np.int32), "i32"),
    "f8e4m3": DTypeInfo("f8e4m3", 8, False, np.dtype(ml_dtypes.float8_e4m3fn), "f32"),
    "f8e5m2": DTypeInfo("f8e5m2", 8, False, np.dtype(ml_dtypes.float8_e5m2), "f32"),
    "bf16": DTypeInfo("bf16", 16, False, np.dtype(ml_dtypes.bfloat16), "f32"),
    "f16": DTypeInfo("f16", 16, False, np.dtype(np.float16), "f32"),
    "f32": DTypeInfo("f32", 32, False, np.dtype(np.float32), "f32"),
    # block floats: `bits` is one datum (sign + mantissa); decoded values are exact in float32
    **{
        f.name: DTypeInfo(f.name, f.mantissa_bits + 1, False, np.dtype(np.float32), "f32", True, f.tile_bytes)
        for f in blockfloat.FORMATS.values()
    },
}


def canonical_dtype(name: str) -> str:
    """Return the canonical dtype name for an accepted spelling, or raise ValueError."""
    key = str(name).strip().lower()
    if key not in ALIASES:
        raise ValueError(f"unknown dtype {name!r}: use one of {', '.join(DTYPES)}")
    return ALIASES[key]


def info(name: str) -> DTypeInfo:
    """Facts about a (canonical or alias) dtype."""
    return _INFO[canonical_dtype(name)]


def is_block(name: str) -> bool:
    """Is `name` one of tt-metal's block-float formats (bfloat8_b, bfloat4_b)?"""
    return info(name).block


def accumulator_of(names: list[str] | tuple[str, ...]) -> str:
    """Accumulation type for a set of input dtypes: i32 if all are integers, else f32."""
    infos = [info(n) for n in names]
    return "i32" if all(i.is_int for i in infos) else "f32"


def nbytes(dtype: str, elements: int) -> float:
    """Bytes occupied by `elements` values of `dtype` (packed, so i4 counts half a byte)."""
    return elements * info(dtype).bytes
