"""The non-conv steps of a residual conv network that a layer list leaves out: max pool and residual add.

A named workload (``resnet50``) or a layer list holds the convs only; a network plan
(`mapper.layout_plan`) also needs the ops between them, since they decide whether an activation
can stay in L1 from one conv to the next. `with_network_ops` puts them back, from the layers'
shapes and torchvision labels:

* **Max pool.** Where a conv's output (N, H, W, C) feeds the next conv as (N, H', W', C) with
  ``H' = (H + 2 - 3) // 2 + 1`` (likewise W'), and the next conv opens another block, a 3x3
  stride-2 max pool with padding 1 is inserted: ResNet's stem (He et al. 2016, Table 1: "3x3 max
  pool, stride 2", the source workload/data/resnet50.yaml cites; padding 1 as torchvision's
  ``MaxPool2d(kernel_size=3, stride=2, padding=1)``). Labelled ``<prefix>maxpool``.
* **Residual add.** A residual block is a run of layers sharing a label prefix up to the last dot
  (``layer1.0.conv1`` ... in block ``layer1.0``) whose main branch (the layers reading their
  predecessor's output) ends in a tensor equal to the block input (identity shortcut) or to the
  output of the block's layer that reads the block input (projection shortcut, ``downsample``).
  The add (with the ReLU after it) closes the block (tenstorrent-conv2d.md, "CNN Models:
  ResNet-50": the skip connection adds the block input to the output of the bottleneck).
  Labelled ``<block>.add``.

Other layer lists come back unchanged: only these two patterns are recognised.
"""

from __future__ import annotations

from dataclasses import dataclass

from workload.conv2d import as_conv2d
from workload.problem import Problem

Dims = tuple[int, int, int, int]

#: ResNet's stem max pool (He et al. 2016, Table 1; torchvision MaxPool2d(3, 2, 1))
POOL_KERNEL, POOL_STRIDE, POOL_PADDING = 3, 2, 1


@dataclass(frozen=True)
class NetworkOp:
    """A max pool or a residual add between the convs: its input NHWC, output NHWC and element dtype."""

    kind: str  # "maxpool" or "add"
    label: str
    dims: Dims
    out_dims: Dims
    dtype: str
    kernel: int = 1
    stride: int = 1
    padding: int = 0


def conv_tensors(p: Problem) -> tuple[Dims, Dims] | None:
    """(input dims, output dims) of a conv layer as NHWC, None for other problems."""
    c = as_conv2d(p)
    if c is None:
        return None
    return (c.batch, c.input_height, c.input_width, c.in_channels), (
        c.batch,
        c.output_height,
        c.output_width,
        c.out_channels,
    )


def block_of(label: str) -> str | None:
    """The residual block of a layer label: its prefix up to the last dot (None without a dot)."""
    return label.rsplit(".", 1)[0] if "." in label else None


def _pooled(d: int) -> int:
    return (d + 2 * POOL_PADDING - POOL_KERNEL) // POOL_STRIDE + 1


def _block_add(members: list[tuple[Problem, tuple[Dims, Dims]]], block: str) -> NetworkOp | None:
    """The add closing a block of consecutive conv layers, or None if the block is not residual."""
    if len(members) < 2:
        return None
    block_in = members[0][1][0]
    main_out: Dims | None = None
    shortcut_out: Dims | None = None
    dtype = ""
    for k, (p, (ti, to)) in enumerate(members):
        if k == 0 or members[k - 1][1][1] == ti:
            main_out, dtype = to, p.output.dtype
        elif ti == block_in:
            shortcut_out = to
    if main_out is None or main_out != (shortcut_out or block_in):
        return None
    return NetworkOp("add", f"{block}.add", main_out, main_out, dtype)


def with_network_ops(problems: list[Problem]) -> list[Problem | NetworkOp]:
    """The layers in order with the max pool and the residual adds put back (see the module docstring)."""
    ts = [conv_tensors(p) for p in problems]
    out: list[Problem | NetworkOp] = []
    i, n = 0, len(problems)
    while i < n:
        block = block_of(problems[i].label)
        j = i + 1
        while block is not None and j < n and block_of(problems[j].label) == block:
            j += 1
        run = problems[i:j]
        out.extend(run)
        members = [(p, t) for p, t in zip(run, ts[i:j], strict=True) if t is not None]
        if block is not None and len(members) == len(run):
            add = _block_add(members, block)
            if add is not None:
                out.append(add)
        last, nxt = ts[j - 1], ts[j] if j < n else None
        if last is not None and nxt is not None:
            (_, (b, h, w, c)), (ni, _) = last, nxt
            if ni == (b, _pooled(h), _pooled(w), c) and ni != last[1]:
                prefix = problems[j - 1].label.rpartition("/")[0]
                label = f"{prefix}/maxpool" if prefix else "maxpool"
                out.append(
                    NetworkOp("maxpool", label, last[1], ni, problems[j - 1].output.dtype,
                              POOL_KERNEL, POOL_STRIDE, POOL_PADDING)
                )  # fmt: skip
        i = j
    return out
