"""Which run of an operand's dimensions holds its block-float blocks: the one rule every user of the formats calls.

tt-metal packs a ``bfloat8_b`` / ``bfloat4_b`` tensor tile by tile, 16 consecutive values of a tile row
sharing one exponent (`workload.blockfloat`): blocks run along the last dimension *of the tensor tt-metal
holds*. `block_packing` says where that is in an operand as the problem lays it out; the reference's random
inputs (`workload.reference.random_inputs`), the executor's packed inputs (`executor.validate`), the
format bound's units (`executor.format_bound`) and the tolerance's text (`executor.tolerance`) all ask it.

- **Einsum operands** (and anything that is not a grouped conv): the tensor is the operand, blocks run
  along its last dimension (`blockfloat.ALONG_LAST`).
- **Conv activation** ``X[n, h, w, g, ci]`` (`workload.conv2d`'s layout, and the ONNX importer's 1-D/3-D
  convs in the same layout): ttnn holds it channels last, ``(N, H, W, C)`` flattened to
  ``[1, 1, N*H*W, C]`` (tenstorrent-conv2d.md, "conv2d takes 4D input_tensor with dimensions ordered as
  (N, H, W, C) (channels last)"; tt-metal ``ttnn/cpp/ttnn/operations/conv/conv2d/conv2d_utils.cpp`` @
  002a3f412aeb, ``determine_input_memory_config``: the input's padded shape is ``{1, 1, N*H*W, C}`` with C
  rounded up at its end; the ttnn.conv2d traces of docs.tenstorrent.com/tt-torch show inputs
  ``tensor<[1,1,262144,128]>``). So its blocks run along the flattened channels ``C = g x ci``: 16
  consecutive channels share an exponent across group boundaries (a depthwise conv's ci = 1 does not give
  every value its own block). ``Packing(merge=2)``.
- **Conv weight** ``W[fh, fw, g, ci, co]``: tt-metal ``prepare_conv2d_weights.cpp`` @ 002a3f412aeb
  (``prepare_conv_weights_internal``) packs the tiled weight *matrix* (``ttnn::to_dtype`` after the tilize),
  whose rows are ``(kh, kw, input channel)`` and whose columns are output channels
  ("[1, 1, KhKwCi, Co]"), after one of two group transforms:

  - ``convert_conv_weight_tensor_to_grouped_layout`` (groups > 1): the weight is zero-padded to
    ``[Co, Ci, Kh, Kw]``, each filter holding its own group's input channels only. A matrix row
    ``(fh, fw, g*ci_g + ci)`` is zero but for its group's output columns ``g*co_g .. (g+1)*co_g - 1``, so a
    block holds the output channels of one ``(fh, fw, g, ci)`` that share a 16-aligned window of the
    flattened ``g*co_g + co``. ``Packing(merge=1, offset_dim=<g>, offset_step=co_g)``. Without groups this is
    plain packing along co.
  - the depthwise layouts (groups = in = out channels): a 2-D depthwise conv (``conv2d_utils.cpp``
    ``is_2d_depthwise_conv``: a kernel larger than 1x1 and neither dimension 1-D, a dimension being 1-D
    when its kernel and image sizes are both 1) goes through
    ``convert_conv_weight_tensor_to_2d_depthwise_layout``, whose every face row holds 16 consecutive
    channels of one kernel position; a 1-D one (``is_1d_depthwise_conv``: 1x1 kernel on a
    1-high image, no bias: a problem has none) through ``convert_conv_weight_tensor_to_depthwise_layout``,
    which repeats each channel's weight down the rows, the channels along the columns. Both pack 16
    consecutive channels of one kernel position together: ``W``'s trailing ``(g, ci, co) = (C, 1, 1)``
    flattened, ``Packing(merge=3)``. Other depthwise convs (1x1 kernels on taller images, 1-D along one
    dimension only) take the grouped layout, where each weight is alone in its block.

  Version note: these are the layouts of the tt-metal commit cited. The 2-D depthwise path is recent (its
  design notes add it before the ``convert_conv_weight_tensor_to_grouped_layout`` call that depthwise weights
  took until then, one weight per block); the grouped layout and the channels-last activation are older.
  Sharding does not move the columns: ``prepare_conv_weights_internal`` pads the output channels to
  ``cores x 32`` before the block-sharded split, so every core's slice is whole tiles and column = channel.
  A 3-D conv (the ONNX importer's) takes the grouped layout, depthwise or not: tt-metal's experimental conv3d
  (``ttnn/cpp/ttnn/operations/experimental/conv3d/prepare_conv3d_weights.cpp`` @ 00bd910034fb) zero-pads
  grouped weights the same way, then lays them out ``[kD*kH*kW*Ci, Co]``, and has no depthwise layout.
"""

from __future__ import annotations

from workload.blockfloat import ALONG_LAST, Packing
from workload.problem import Problem


def _conv_roles(problem: Problem) -> tuple[int, int] | None:
    """(activation index, weight index) of a grouped-conv layout problem (`workload.conv2d`), else None.

    The layout: output ``[..., g, co]``, an activation ending in ``(g, ci)`` and a weight ending in
    ``(g, ci, co)``, every one of these dimensions a plain axis.
    """
    if not problem.is_binary or not {"g", "ci", "co"} <= set(problem.axes):
        return None
    if tuple(str(d) for d in problem.output.dims[-2:]) != ("g", "co"):
        return None
    for x, w in ((0, 1), (1, 0)):
        xs = tuple(str(d) for d in problem.inputs[x].dims[-2:])
        ws = tuple(str(d) for d in problem.inputs[w].dims[-3:])
        if xs == ("g", "ci") and ws == ("g", "ci", "co") and len(problem.inputs[x].dims) >= 3:
            return x, w
    return None


def depthwise_layout(problem: Problem) -> bool:
    """Does tt-metal lay this conv's weight out depthwise (16 channels of one kernel position per block)?

    A problem in the conv layout (`_conv_roles`) with groups = in = out channels (ci = co = 1, g > 1) whose
    kernel and image take tt-metal's 2-D or 1-D depthwise path (module docstring). A 1-D conv (one spatial
    dimension) runs as a 2-D one of height 1; a 3-D conv's weights take the grouped layout (conv3d has no
    depthwise one).
    """
    roles = _conv_roles(problem)
    if roles is None or problem.axes["ci"] != 1 or problem.axes["co"] != 1 or problem.axes["g"] == 1:
        return False
    x, w = (problem.inputs[i] for i in roles)
    kernel, image = problem.shape(w)[:-3], problem.shape(x)[1:-2]
    if len(kernel) != len(image) or len(kernel) not in (1, 2):
        return False
    (kh, kw), (h, wd) = ((1, *kernel), (1, *image)) if len(kernel) == 1 else (kernel, image)
    if kh == 1 and h == 1:  # is_1d_conv: is_1d_depthwise_conv takes 1x1 kernels only
        return kw == 1
    return not (kw == 1 and wd == 1) and (kh > 1 or kw > 1)  # is_2d_depthwise_conv


def block_packing(problem: Problem, index: int) -> Packing:
    """Where input `index`'s blocks lie, as the problem lays it out (module docstring).

    A conv without groups packs along its operands' last dimensions (``C = ci``, and the weight's output
    channels from 0): `blockfloat.ALONG_LAST`, exactly as an einsum's.
    """
    roles = _conv_roles(problem)
    if roles is None or problem.axes["g"] == 1:
        return ALONG_LAST
    x, w = roles
    if index == x:
        return Packing(merge=2)  # channels last: C = g x ci
    if depthwise_layout(problem):
        return Packing(merge=3)  # 16 channels of one kernel position
    dims = len(problem.inputs[w].dims)
    return Packing(merge=1, offset_dim=dims - 3, offset_step=problem.axes["co"])  # grouped layout


def describe(problem: Problem, index: int) -> str:
    """Where input `index`'s blocks of 16 lie, in words (for the tolerance's reason)."""
    packing = block_packing(problem, index)
    if packing == ALONG_LAST:
        return "along the last dimension"
    if packing.merge == 2:
        return "along the channels C = g x ci, across group boundaries"
    if packing.merge == 3:
        return "along the channels of one kernel position (tt-metal's depthwise weight layout)"
    return "along the output channels g x co of one weight-matrix row (tt-metal's grouped weight layout)"
