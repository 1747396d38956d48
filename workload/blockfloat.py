"""tt-metal's block-float formats ``bfloat8_b`` and ``bfloat4_b``: quantisation exactly as tt-metal packs them.

Sources (tt-metal, ``tt_metal/impl/data_format/blockfloat_common.cpp`` at commit 034fc8c7f283, and
tt-buda ``docs/public/dataformats.rst``, "Block Floating Point"):

- **Blocks.** 16 values share one 8-bit exponent (the ``_b`` formats keep float32's 8-bit exponent).
  A tile is packed face by face (16 x 16 faces) and each face row by row
  (``pack_fp32_vec_as_bfp_tiles``), so a block is 16 consecutive values along the tile's row: along
  a tensor's last dimension, starting at multiples of 16. Tile padding past the tensor's edge is zeros.
- **Shared exponent.** The largest biased float32 exponent of the block's 16 values (``get_max_exp``).
- **Mantissa** (``convert_u32_to_bfp``): the float32 significand with its hidden 1 made explicit (24 bits)
  is shifted right by ``shared_exp - exp`` (bits shifted out are dropped), then rounded to ``W`` bits
  (``W = 7`` for bfloat8_b, 3 for bfloat4_b, sign apart) to nearest with ties to even, judged on the
  bits that remain after the shift; a result of ``2**W`` saturates to ``2**W - 1`` (the shared exponent
  is never bumped). A zero mantissa is +0 (values far below the block's largest underflow to zero).
- **Value** (``convert_bfp_to_u32``): ``(-1)**sign * m * 2**(shared_exp - 127 - (W - 1))``.
- **Tile bytes** (tt-metal ``tt_metal/api/tt-metalium/constants.hpp``): ``BFLOAT8_B_TILE_HW = TILE_HW + 64``
  = 1088 bytes ("1B per BFP8 datum + 4x16B exponent section") and ``BFLOAT4_B_TILE_HW = TILE_HW / 2 + 64``
  = 576 bytes for a 32 x 32 tile.

Everything here is pure numpy on float32 bit patterns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: values that share one exponent (tt-buda dataformats.rst: "a block of 16 elements")
BLOCK = 16
#: elements of a 32 x 32 tile (tt-metal constants.hpp TILE_HW)
TILE_HW = 32 * 32
#: bytes of the exponent section of a tile: 64 blocks of one byte (constants.hpp: "4x16B exponent section")
EXPONENT_SECTION_BYTES = TILE_HW // BLOCK


@dataclass(frozen=True)
class BlockFormat:
    """One block-float format: its mantissa width (sign apart) and its tile size in bytes."""

    name: str
    mantissa_bits: int  # W of convert_u32_to_bfp: magnitude bits, the explicit leading 1 included
    tile_bytes: int

    @property
    def bytes_per_element(self) -> float:
        """Bytes of a whole tile per element (1088 / 1024 for bfloat8_b): the exponent section included."""
        return self.tile_bytes / TILE_HW


#: the formats (tt-metal constants.hpp BFLOAT8_B_TILE_HW / BFLOAT4_B_TILE_HW; widths from convert_u32_to_bfp)
FORMATS: dict[str, BlockFormat] = {
    "bfloat8_b": BlockFormat("bfloat8_b", 7, TILE_HW + EXPONENT_SECTION_BYTES),
    "bfloat4_b": BlockFormat("bfloat4_b", 3, TILE_HW // 2 + EXPONENT_SECTION_BYTES),
}


def is_block(dtype: str) -> bool:
    """Is `dtype` (a canonical name) one of tt-metal's block-float formats?"""
    return dtype in FORMATS


def _blocks(values: np.ndarray) -> tuple[np.ndarray, int]:
    """float32 values as rows of 16 along the last axis (zero padded), and the padded last length."""
    x = np.atleast_1d(np.asarray(values, dtype=np.float32))
    n = x.shape[-1]
    width = -(-n // BLOCK) * BLOCK
    if width != n:
        x = np.concatenate([x, np.zeros((*x.shape[:-1], width - n), dtype=np.float32)], axis=-1)
    return np.ascontiguousarray(x).reshape(-1, BLOCK), width


def shared_exponents(values: np.ndarray) -> np.ndarray:
    """The shared (biased) exponent of every block of 16 along the last axis (``get_max_exp``)."""
    rows, _ = _blocks(values)
    return ((rows.view(np.uint32) >> np.uint32(23)) & np.uint32(0xFF)).max(axis=1)


def quantize(values: np.ndarray, dtype: str) -> np.ndarray:
    """`values` rounded to block-float `dtype` as tt-metal packs them, returned as exact float32.

    Args:
        values: any real array (rounded to float32 first, as ``pack_as_bfp_tiles`` reads float32).
        dtype: ``bfloat8_b`` or ``bfloat4_b``.

    Returns:
        float32 array of the same shape holding the decoded block-float values.
    """
    fmt = FORMATS[dtype]
    arr = np.asarray(values)
    shape = arr.shape
    rows, width = _blocks(arr)
    bits = rows.view(np.uint32).astype(np.int64)
    exp = (bits >> 23) & 0xFF
    sign = bits >> 31
    shared = exp.max(axis=1, keepdims=True)
    mant = (bits & 0x7FFFFF) | (1 << 23)  # the hidden 1 made explicit
    diff = shared - exp
    mant = np.where(diff >= 32, 0, mant >> np.minimum(diff, 31))
    shift = 24 - fmt.mantissa_bits
    rem = mant & ((1 << shift) - 1)
    tie = 1 << (shift - 1)
    q = mant >> shift
    odd = (q & 1) == 1
    q = q + ((rem > tie) | ((rem == tie) & odd)).astype(np.int64)
    q = np.minimum(q, (1 << fmt.mantissa_bits) - 1)
    q = np.where((bits & 0x7FFFFFFF) == 0, 0, q)  # +-0.0 packs to 0
    out = np.ldexp(np.where(sign == 1, -q, q).astype(np.float64), (shared - 127 - (fmt.mantissa_bits - 1)))
    out = out.astype(np.float32).reshape(*arr.shape[:-1] if arr.ndim else (), width)[..., : shape[-1] if shape else 1]
    return out.reshape(shape)


def unit(values: np.ndarray, dtype: str) -> np.ndarray:
    """The weight of a mantissa's last bit in each value's block, per element (``2**(shared - 127 - (W-1))``)."""
    fmt = FORMATS[dtype]
    arr = np.asarray(values)
    shared = shared_exponents(arr).astype(np.float64)
    per = np.ldexp(1.0, (shared - 127 - (fmt.mantissa_bits - 1)).astype(np.int64))
    width = -(-(arr.shape[-1] if arr.ndim else 1) // BLOCK) * BLOCK
    full = np.repeat(per, BLOCK).reshape(*arr.shape[:-1] if arr.ndim else (), width)
    return full[..., : arr.shape[-1] if arr.ndim else 1].reshape(arr.shape)
