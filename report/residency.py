"""Which memory holds each operand's tile at each level of a family's loop nest.

The loop-nest IR (`costmodels.ir.Mapping`) names levels, not memories; this table says, per
family and level, where the data one iteration of that level works on lives, for the three roles
every contraction engine has (`costmodels.gemm_view`): the ``moving`` (streamed) input, the
``stationary`` (weight) input and the ``output``. Memory names are those of `CostReport.bytes`
where the family prices that memory. A level missing from the table is drawn without memories.

Sources (reference documents of this project):
- rngd: hardware-facts.md §1.1 (hierarchy Chip > Cluster > Slice > Lane/Row; DM 512 KB per slice;
  TRF the weight register file per lane; Time Reducer and Packet Reducer accumulate) and §1.2
  steps 2-4 (HBM -> DM by DMA, DM -> Fetch -> Stream Adapter, weights to TRF).
- trainium: hardware-facts.md §2.1 ("Tensor Engine ... reads SBUF, writes PSUM"; nc_matmul tile
  limits: the stationary tile is loaded into the PE array, the moving tile streams from SBUF).
- ascend: hardware-facts.md §3.2 (pipes MTE2 GM -> L1, MTE1 L1 -> L0A / L0B, cube, FIX L0C -> GM;
  GM is the HBM); vector path: the AIV cores work out of their unified buffer (UB), §3.1 rates.
- tenstorrent: tenstorrent-conv2d.md "Implementation of Convolution Operation on a Single Tensix
  Core" (activations in DRAM or L1, weights in DRAM, blocks in L1) and hardware-facts.md §4.1
  (Dst register holds the output sub-block); the tile's SrcA holds the weight, SrcB the
  activation (tt-isa-documentation ELWMUL.md, as in `executor/fidelity.py`).
"""

from __future__ import annotations

from collections.abc import Mapping as MappingABC

Roles = tuple[str, str, str]  # (moving, stationary, output)
ROLES: tuple[str, str, str] = ("moving", "stationary", "output")

RESIDENCY: dict[str, dict[str, Roles]] = {
    "rngd": {
        "chip": ("hbm", "hbm", "hbm"),
        "cluster": ("hbm", "hbm", "hbm"),
        "slice": ("dm", "dm", "dm"),
        "row": ("dm", "trf", "dm"),
        "time": ("stream", "trf", "time reducer"),
        "packet": ("stream", "trf", "packet reducer"),
    },
    "trainium": {
        "chip": ("hbm", "hbm", "hbm"),
        "hbm": ("hbm", "hbm", "hbm"),
        "sbuf": ("sbuf", "sbuf", "psum"),
        "nc_matmul": ("sbuf", "pe array", "psum"),
    },
    "ascend": {
        "cores": ("hbm", "hbm", "hbm"),
        "blocks": ("hbm", "hbm", "l0c"),
        "l1": ("l1", "l1", "l0c"),
        "l0": ("l0a", "l0b", "l0c"),
        "tile": ("l0a", "l0b", "l0c"),
        "vcores": ("hbm", "-", "hbm"),
    },
    "tenstorrent": {
        "batch": ("{act}", "dram", "{act}"),
        "grid": ("{act}", "dram", "{act}"),
        "block": ("l1", "l1", "l1"),
        "kblock": ("l1", "l1", "l1"),
        "subblock": ("l1", "l1", "dst"),
        "tile": ("srcB", "srcA", "dst"),
    },
}

#: the Ascend vector path (unary problems) reuses level names of the cube path with other memories
_ASCEND_VECTOR: dict[str, Roles] = {
    "vcores": ("hbm", "-", "hbm"),
    "blocks": ("ub", "-", "ub"),
    "tile": ("ub", "-", "ub"),
}


def residency(family: str, level: str, knobs: MappingABC[str, object], *, binary: bool = True) -> dict[str, str]:
    """Role -> memory holding that operand's tile at `level` (empty when the table has no entry).

    Tenstorrent activations live in L1 when the mapping shards them there (knob ``memory``
    ``l1-sharded``), else in DRAM (``dram-interleaved``).
    """
    table = _ASCEND_VECTOR if family == "ascend" and not binary else RESIDENCY.get(family, {})
    roles = table.get(level)
    if roles is None:
        return {}
    act = "l1" if str(knobs.get("memory", "")).startswith("l1") else "dram"
    out = {role: mem.replace("{act}", act) for role, mem in zip(ROLES, roles, strict=True)}
    return {r: m for r, m in out.items() if m != "-"}
