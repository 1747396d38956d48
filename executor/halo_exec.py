"""Run a height-sharded convolution from its halo configuration, core by core.

Each core assembles its halo buffer from the configuration's chunks only - padding sticks
(zeros), local sticks from its own input shard, remote sticks from other cores' shards - then
computes its output sticks ``[out_start, out_end)`` from that buffer alone. A buffer stick no
chunk fills holds NaN-like poison (it marks the outputs that read it as not written), and a
window that reaches outside the buffer poisons its output too, so a halo that is off by one
stick, or too short, fails validation instead of reading data the core would not have.
"""

from __future__ import annotations

import numpy as np

from costmodels.tenstorrent.halo import PAD, HaloConfig
from executor import numerics
from executor.contract import contract
from executor.tiled import TiledResult
from workload import dtypes
from workload.conv2d import as_conv2d
from workload.errors import ProblemError
from workload.problem import Problem


def input_sticks(problem: Problem, x: np.ndarray) -> np.ndarray:
    """The real activation ``[n, H, W, g, ci]`` as sticks ``[n*H*W, g*ci]`` in the compute type."""
    n, h, w, g, ci = x.shape
    return numerics.to_compute(x, numerics.compute_dtype(problem)).reshape(n * h * w, g * ci)


def assemble_buffer(config: HaloConfig, core: int, shards: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One core's halo buffer and the mask of sticks its chunks filled."""
    ch = config.cores[core]
    channels = shards[0].shape[1]
    buf = np.zeros((ch.buffer_sticks, channels), dtype=shards[0].dtype)
    filled = np.zeros(ch.buffer_sticks, dtype=bool)
    for c in ch.chunks:
        dst0 = max(c.dst_offset, 0)
        dst1 = min(c.dst_offset + c.length, ch.buffer_sticks)
        if dst1 <= dst0:
            continue
        if c.src_core == PAD:
            buf[dst0:dst1] = 0
            filled[dst0:dst1] = True
            continue
        src = shards[c.src_core]
        s0 = c.src_offset + (dst0 - c.dst_offset)
        take = src[max(s0, 0) : s0 + (dst1 - dst0)]
        if s0 < 0 or take.shape[0] < dst1 - dst0:
            continue  # a chunk reading outside its source shard delivers nothing
        buf[dst0:dst1] = take
        filled[dst0:dst1] = True
    return buf, filled


def run_sharded_conv(problem: Problem, config: HaloConfig, inputs: list[np.ndarray]) -> TiledResult:
    """Execute the convolution `problem` core by core from `config` (see the module docstring)."""
    params = as_conv2d(problem)
    if params is None or params != config.params:
        raise ProblemError("the halo configuration does not describe this convolution", token=problem.label)
    x, wt = inputs
    sticks = input_sticks(problem, x)
    shards = [sticks[s:e] for s, e in config.input_shards]
    compute = numerics.compute_dtype(problem)
    w = numerics.to_compute(wt, compute)
    kh, kw = params.kernel
    sh, sw = params.stride
    dh, dw = params.dilation
    wp = params.input_width + 2 * params.padding[1]
    hp = params.input_height + 2 * params.padding[0]
    oh_n, ow_n = params.output_height, params.output_width
    g, ci, co = problem.axes["g"], problem.axes["ci"], problem.axes["co"]
    out_shape = problem.shape(problem.output)
    flat_out = np.zeros((params.batch * oh_n * ow_n, g, co), dtype=numerics.acc_numpy(problem.acc_dtype))
    written = np.zeros(flat_out.shape[0], dtype=bool)
    window = (np.arange(kh)[:, None] * dh * wp + np.arange(kw)[None, :] * dw).reshape(-1)
    for core in range(config.num_cores):
        ch = config.cores[core]
        if ch.out_end <= ch.out_start:
            continue
        buf, filled = assemble_buffer(config, core, shards)
        o = np.arange(ch.out_start, ch.out_end)
        n, rem = np.divmod(o, oh_n * ow_n)
        oh, ow = np.divmod(rem, ow_n)
        rows = (n * hp * wp + oh * sh * wp + ow * sw)[:, None] + window[None, :] - ch.in_start
        inside = (rows >= 0) & (rows < buf.shape[0])
        safe = np.clip(rows, 0, max(buf.shape[0] - 1, 0))
        ok = inside.all(axis=1) & (filled[safe].all(axis=1) if buf.shape[0] else False)
        gathered = buf[safe].reshape(o.size, kh, kw, g, ci) if buf.shape[0] else np.zeros((o.size, kh, kw, g, ci))
        with np.errstate(over="ignore", invalid="ignore"):
            part = contract(
                [gathered, w], [("o", "fh", "fw", "g", "ci"), ("fh", "fw", "g", "ci", "co")], ("o", "g", "co"), "add"
            )
        flat_out[o] = numerics.round_acc(part, problem.acc_dtype)
        written[o] = ok
    values = numerics.to_output(flat_out.reshape(out_shape), problem.output.dtype)
    mask = np.broadcast_to(written.reshape(*out_shape[:3], 1, 1), out_shape).copy()
    if not dtypes.info(problem.output.dtype).is_int:
        values[~mask] = np.nan
    return TiledResult(values=values, written=mask, steps=config.num_cores)
