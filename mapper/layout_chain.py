"""The chain a network plan runs over: its steps, their edges, the skip tensor and what stays alive in L1.

A step is a conv layer (a `Problem`) or a max pool / residual add put back between them
(`workload.network_ops`). Between two consecutive steps whose tensors match (the output of one is
the input of the next: a *chain edge*) the activation may stay L1-sharded; elsewhere it goes
through DRAM.

Residual blocks (layers sharing a label prefix up to the last dot) keep a second tensor, the
*skip*: the block input, kept for the add (tenstorrent-conv2d.md, "CNN Models: ResNet-50": the
skip connection adds the block input to the bottleneck's output). When the block has its add,
the plan tracks where the skip is (DRAM, or L1 in a layout) with the step *modes*:

* ``open``: the block's first conv; the tensor it reads becomes the skip.
* ``swap``: the projection shortcut; it reads the skip (the block input, in its L1 layout when kept
  there) and the main branch's output, which it does not read, becomes the skip for the add.
* ``close``: the add; it reads the chain operand and the skip, and the block ends.
* ``keep``: every other step; the skip is carried unchanged.

Live bytes: while a block's other layers run, the block input (and, during the projection, the
main branch's output) stays alive; their bytes, spread over the grid's cores ([ASSUMPTION]
evenly), are passed to the layer as ``l1_live_bytes`` so they shrink what fits. [ASSUMPTION]
counted whether the skip sits in L1 or in DRAM (conservative when it is in DRAM: a layer's table
then does not depend on the skip's place).

Folded convs (`FoldedConv`, chosen by `mapper.layout_forms`): a strided conv the plan runs folded
keeps its place, label, mode and live bytes in the chain (all computed on the layers as given), but
its step's `item` is the folded stride-1 conv and its input never arrives in L1: the fold op runs on
tt-metal's DRAM path (``fold_multi_core_dram_program_factory.cpp``: it reads the original input from
DRAM and writes the folded input back), so its predecessor writes its output to DRAM (or, for a
projection shortcut, the skip must be in DRAM) and the folded conv reads the folded tensor from DRAM.
The fold op's price is part of the conv step's price. Its output is the original conv's output
tensor, so the edge out of it is an ordinary chain edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workload import dtypes
from workload.conv_fold import ConvFold
from workload.network_ops import Dims, NetworkOp, block_of, conv_tensors, with_network_ops
from workload.problem import Problem


@dataclass(frozen=True)
class FoldedConv:
    """A strided conv run folded in the plan: the layer as given, its fold, the folded conv, the fold op's price."""

    original: Problem
    fold: ConvFold
    problem: Problem  # the folded stride-1 conv (`workload.conv_fold.folded_problem`)
    op_seconds: float  # the fold op on the DRAM path (`mapper.transforms.fold_op_seconds`, input in DRAM)


#: a strided conv's form in the plan: None for a conv the fold does not apply to (or not offered)
Forms = dict[int, FoldedConv | None]


@dataclass(frozen=True)
class Step:
    """One step of the chain."""

    item: Problem | NetworkOp
    chained: bool  # reads the previous step's output (a chain edge)
    out_l1: bool  # may keep its output in L1 (the next step reads it, now or as the skip)
    mode: str  # keep / open / swap / close (see the module docstring)
    live_bytes: int  # bytes of other tensors alive in L1 while it runs (whole tensors, all cores)
    form: str = ""  # a strided conv the fold is offered for: "as given" or "folded"; "" otherwise
    fold: FoldedConv | None = None  # when folded: `item` is the folded conv (module docstring)

    @property
    def label(self) -> str:
        return self.fold.original.label if self.fold is not None else self.item.label

    @property
    def is_conv(self) -> bool:
        return isinstance(self.item, Problem)

    @property
    def in_l1(self) -> bool:
        """May its input arrive in L1 (a chain edge, or the skip for the projection; never a folded conv's)?"""
        return (self.chained or self.mode == "swap") and self.fold is None

    @property
    def fold_seconds(self) -> float:
        """The fold op's seconds, part of the step's price (0 unless folded)."""
        return 0.0 if self.fold is None else self.fold.op_seconds


def _nbytes(dims: tuple[int, ...], dtype: str) -> int:
    return int(np.prod(dims)) * int(dtypes.info(dtype).bytes)


def _tensors(item: Problem | NetworkOp) -> tuple[Dims, Dims] | None:
    if isinstance(item, NetworkOp):
        return item.dims, item.out_dims
    return conv_tensors(item)


def build_chain(problems: list[Problem], network_ops: bool = True, forms: Forms | None = None) -> list[Step]:
    """The steps of a layer list, with the max pool and the adds put back when `network_ops` (module docstring).

    `forms` maps an index of `problems` to its form: a `FoldedConv` runs folded, None as given (the
    fold offered but not chosen); a layer not in it is as given and its row names no form.
    """
    forms = forms or {}
    at = {id(p): k for k, p in enumerate(problems)}
    items: list[Problem | NetworkOp] = with_network_ops(problems) if network_ops else list(problems)
    ts = [_tensors(x) for x in items]
    convs = [isinstance(x, Problem) for x in items]
    blocks = [block_of(x.label) if c else None for x, c in zip(items, convs, strict=True)]
    first: dict[str, int] = {}
    size: dict[str, int] = {}
    for i, b in enumerate(blocks):
        if b is not None:
            first.setdefault(b, i)
            size[b] = size.get(b, 0) + 1
    closed = {x.label.rsplit(".", 1)[0] for x in items if isinstance(x, NetworkOp) and x.kind == "add"}
    modes: list[str] = []
    chained: list[bool] = []
    live: list[int] = []
    for i, x in enumerate(items):
        t, prev = ts[i], ts[i - 1] if i > 0 else None
        ch = t is not None and prev is not None and prev[1] == t[0]
        b = blocks[i]
        mode = "close" if isinstance(x, NetworkOp) and x.kind == "add" else "keep"
        nbytes = 0
        if t is not None and b is not None and size[b] > 1:
            f = first[b]
            ft = ts[f]
            reads_block_input = not ch and ft is not None and ft[0] == t[0]  # the projection shortcut
            if b in closed:
                mode = "open" if i == f else "swap" if reads_block_input else mode
            if ft is not None and i != f and not reads_block_input:
                nbytes += _nbytes(ft[0], items[f].inputs[0].dtype)  # type: ignore[union-attr]  # the block input
            if not ch and i > 0 and blocks[i - 1] == b and prev is not None:
                nbytes += _nbytes(prev[1], items[i - 1].output.dtype)  # type: ignore[union-attr]  # main branch out
        modes.append(mode)
        chained.append(ch)
        live.append(nbytes)
    n = len(items)
    keys = [at.get(id(x)) if isinstance(x, Problem) else None for x in items]
    folds = [forms.get(k) if k is not None else None for k in keys]
    names = ["" if k not in forms else "folded" if forms[k] is not None else "as given" for k in keys]
    reads_l1 = [(chained[i] or modes[i] == "swap") and folds[i] is None for i in range(n)]
    return [
        Step(
            item=folds[i].problem if folds[i] is not None else items[i],  # type: ignore[union-attr]
            chained=chained[i],
            out_l1=i + 1 < n and reads_l1[i + 1],
            mode=modes[i],
            live_bytes=live[i],
            form=names[i],
            fold=folds[i],
        )
        for i in range(n)
    ]
