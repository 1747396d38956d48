"""tt-metal's block-float formats ``bfloat8_b`` and ``bfloat4_b``: quantisation exactly as tt-metal packs them.

Sources (tt-metal, ``tt_metal/impl/data_format/blockfloat_common.cpp`` at commit 034fc8c7f283, and
tt-buda ``docs/public/dataformats.rst``, "Block Floating Point"):

- **Blocks.** 16 values share one 8-bit exponent (the ``_b`` formats keep float32's 8-bit exponent).
  A tile is packed face by face (16 x 16 faces) and each face row by row
  (``pack_fp32_vec_as_bfp_tiles``), so a block is 16 consecutive values along the tile's row: along
  the last dimension of the tensor tt-metal holds, starting at multiples of 16. Tile padding past the
  tensor's edge is zeros. Which dimensions of a problem's operand make up that last dimension (a grouped
  conv's activation holds its channels ``C = g x ci`` there) is `workload.block_layout`'s rule, carried
  here by a `Packing`.
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

import math
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


@dataclass(frozen=True)
class Packing:
    """Where an array's blocks lie: the run of its trailing dimensions tt-metal packs along, and where runs start.

    The array is an operand as the problem lays it out. Its last `merge` dimensions, flattened, are one run of
    a row tt-metal packs (a stretch of the last dimension of the tensor tt-metal holds); blocks are the 16
    consecutive values of that row starting at its multiples of 16. With `offset_dim` (the index of one of the
    dimensions before the run), the run is the slice of a longer row, zeros elsewhere, that starts at column
    ``i * offset_step``, ``i`` being the array's index along `offset_dim`: its first block then starts
    ``(i * offset_step) % 16`` columns before it. `workload.block_layout.block_packing` decides it per operand.
    """

    merge: int = 1
    offset_dim: int | None = None
    offset_step: int = 0


#: blocks along the array's last dimension from its first element (einsum operands, convs without groups)
ALONG_LAST = Packing()

#: blocks `quantize` decodes at once: bounds its int64 temporaries to a few MiB whatever the tensor's size
CHUNK_BLOCKS = 1 << 14


def _starts(lead: tuple[int, ...], packing: Packing) -> np.ndarray | None:
    """The column each run starts at within its first block, per run (None when every run starts at 0)."""
    d = packing.offset_dim
    if d is None or packing.offset_step % BLOCK == 0:
        return None
    if not 0 <= d < len(lead):
        raise ValueError(f"offset_dim {d} is not one of the {len(lead)} dimensions before the packed run")
    if lead[d] == 1:
        return None
    index = np.arange(lead[d]).reshape([-1 if i == d else 1 for i in range(len(lead))])
    return np.ascontiguousarray(np.broadcast_to((index * packing.offset_step) % BLOCK, lead)).reshape(-1)


def _rows(x: np.ndarray, packing: Packing) -> tuple[np.ndarray, np.ndarray | None, int]:
    """float32 values as tt-metal rows, zero padded to whole blocks: ``(rows, cols, n)``.

    `rows` has one row per run (the product of the dimensions before it) and a multiple of 16 columns; a run's
    ``n`` values lie at ``rows[:, :n]`` when `cols` is None, else at the columns `cols` (``(runs, n)``).
    """
    merge = max(1, min(packing.merge, x.ndim))
    lead = x.shape[: x.ndim - merge]
    n = math.prod(x.shape[x.ndim - merge :])
    flat = x.reshape(-1, n)
    starts = _starts(lead, packing)
    if starts is None:
        width = -(-n // BLOCK) * BLOCK
        if width == n:
            return np.ascontiguousarray(flat), None, n
        rows = np.zeros((flat.shape[0], width), dtype=np.float32)
        rows[:, :n] = flat
        return rows, None, n
    cols = starts[:, None] + np.arange(n)
    rows = np.zeros((flat.shape[0], -(-(n + BLOCK - 1) // BLOCK) * BLOCK), dtype=np.float32)
    np.put_along_axis(rows, cols, flat, axis=1)
    return rows, cols, n


def _values(rows: np.ndarray, cols: np.ndarray | None, n: int) -> np.ndarray:
    """The runs' values back out of `rows` (the inverse of `_rows`' placement)."""
    return rows[:, :n] if cols is None else np.take_along_axis(rows, cols, axis=1)


def _shared(blocks: np.ndarray) -> np.ndarray:
    """The largest biased exponent of each block of 16 (``get_max_exp``), one per row of `blocks`."""
    return ((blocks.view(np.uint32) >> np.uint32(23)) & np.uint32(0xFF)).max(axis=1)


def shared_exponents(values: np.ndarray, packing: Packing = ALONG_LAST) -> np.ndarray:
    """The shared (biased) exponent of every block of 16 (``get_max_exp``), the blocks laid out by `packing`."""
    rows, _, _ = _rows(np.atleast_1d(np.asarray(values, dtype=np.float32)), packing)
    return _shared(rows.reshape(-1, BLOCK))


def _decode(blocks: np.ndarray, fmt: BlockFormat) -> np.ndarray:
    """Blocks of 16 float32 values packed (``convert_u32_to_bfp``) and decoded (``convert_bfp_to_u32``)."""
    bits = blocks.view(np.uint32).astype(np.int64)
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
    return out.astype(np.float32)


def quantize(values: np.ndarray, dtype: str, packing: Packing = ALONG_LAST) -> np.ndarray:
    """`values` rounded to block-float `dtype` as tt-metal packs them, returned as exact float32.

    Args:
        values: any real array (rounded to float32 first, as ``pack_as_bfp_tiles`` reads float32).
        dtype: ``bfloat8_b`` or ``bfloat4_b``.
        packing: where the blocks lie (`Packing`; by default along the last dimension).

    Returns:
        float32 array of the same shape holding the decoded block-float values.
    """
    fmt = FORMATS[dtype]
    shape = np.shape(values)
    x = np.atleast_1d(np.asarray(values, dtype=np.float32))
    if x.size == 0:
        return np.zeros(shape, dtype=np.float32)
    rows, cols, n = _rows(x, packing)
    blocks = rows.reshape(-1, BLOCK)
    out = np.empty(blocks.shape, dtype=np.float32)
    for i in range(0, blocks.shape[0], CHUNK_BLOCKS):
        out[i : i + CHUNK_BLOCKS] = _decode(blocks[i : i + CHUNK_BLOCKS], fmt)
    return _values(out.reshape(rows.shape), cols, n).reshape(shape)


def unit(values: np.ndarray, dtype: str, packing: Packing = ALONG_LAST) -> np.ndarray:
    """The weight of a mantissa's last bit in each value's block, per element (``2**(shared - 127 - (W-1))``)."""
    fmt = FORMATS[dtype]
    shape = np.shape(values)
    x = np.atleast_1d(np.asarray(values, dtype=np.float32))
    if x.size == 0:
        return np.zeros(shape)
    rows, cols, n = _rows(x, packing)
    shared = _shared(rows.reshape(-1, BLOCK)).astype(np.int64)
    per = np.ldexp(1.0, shared - 127 - (fmt.mantissa_bits - 1))
    return _values(np.repeat(per, BLOCK).reshape(rows.shape), cols, n).reshape(shape)
