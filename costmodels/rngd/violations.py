"""Reasons a user understands, for every RNGD constraint a problem or a mapping breaks.

Problem-level (`supports_violations`): contraction-engine-rngd.txt, Constraints, "Data type
support" (inputs i4, i8, f8, bf16 only; f32 goes to the Vector Engine) and the Einsum section
(the engine contracts two operands; reductions across slices are the Vector Engine's).
Mapping-level (`violation_messages`): the masks of `rngd.cost.evaluate` at one point.
"""

from __future__ import annotations

import numpy as np

from costmodels.family import KNOBS, RULE_CODES, ProblemRules
from costmodels.protocol import Choice, Violation
from costmodels.rngd.cost import CONSTRAINTS, kib
from costmodels.rngd.hardware import ROW_CHOICES, RngdHardware
from costmodels.rngd.space import grid_label, roles_of
from workload import dtypes
from workload.problem import Problem

#: problem-level reasons (`supports`) the contraction engine shares with other families
RULES = ProblemRules(
    unary="the contraction engine contracts two operands (einsum: broadcast, multiply, reduce-add); "
    "a one-input reduction runs on the Vector Engine, which this model does not price: a sum becomes a "
    "contraction when multiplied by a ones tensor (the Reducer only adds); any other reduction: pick another "
    "target (ascend-910b and ascend-a5 reduce rows on their vector cores, in f16 or f32)",
    reduce_op="the Reducer sums products (reduce_op = `Add`); a {op} reduction runs on the "
    "Vector Engine: use reduce op add, or pick another target",
    dtype="input {name} is {dtype}: the contraction engine takes only {allowed} inputs (the Reducer has no "
    "{dtype} multiplier); cast {name} to bf16 (or i8/f8), or do the {dtype} computation on the Vector Engine "
    "after contraction",
)


#: every code `supports` and `check` can return
CODES: tuple[str, ...] = (*RULE_CODES, KNOBS, *CONSTRAINTS)


def supports_violations(problem: Problem, hw: RngdHardware) -> list[Violation]:
    """Why this target cannot run the problem at all (empty when it can)."""
    out = RULES.violations(problem, hw.input_dtypes)
    if not problem.is_binary:
        return out
    kinds = {dtypes.info(o.dtype).is_int for o in problem.inputs}
    floats = {o.dtype for o in problem.inputs if not dtypes.info(o.dtype).is_int}
    if len(kinds) > 1 or len(floats) > 1:
        out.append(
            Violation(
                code="dtype",
                message=f"inputs {problem.inputs[0].dtype} x {problem.inputs[1].dtype}: the multiplier pairs integer "
                "with integer and a float type with the same float type: cast both inputs to one type",
            )
        )
    return out


def violation_messages(
    problem: Problem, hw: RngdHardware, point: dict[str, Choice], res: dict[str, np.ndarray]
) -> list[Violation]:
    """One `Violation` per constraint the point breaks, with the numbers and a fix."""

    def bad(code: str) -> bool:
        return bool(res[f"bad:{code}"][0])

    def val(key: str) -> float:
        return float(res[key][0])

    out: list[Violation] = []
    if bad("packet"):
        out.append(
            Violation(
                code="packet",
                message=f"packet_k={point['packet_k']} K elements do not fit a packet of {int(val('p_el'))} "
                f"elements ({point['feed_flits']} flit(s) of {hw.flit_bytes} B): use a power of two <= "
                f"{int(val('p_el'))}, or feed_flits=2 for a full 64 B packet",
            )
        )
    if bad("rows"):
        out.append(
            Violation(
                code="rows",
                message=f"rows={point['rows']}: a slice uses 1, 2, 4 or 8 rows and this part has {hw.rows}: "
                f"use one of {[r for r in ROW_CHOICES if r <= hw.rows]}",
            )
        )
    if bad("shards"):
        out.append(
            Violation(
                code="shards",
                message=f"{point['clusters']} clusters x {grid_label(int(point['slice_grid']))} slices requested, "
                f"the part has {hw.clusters} clusters of {hw.slices_per_cluster} slices: shard over fewer",
            )
        )
    if bad("feed-flits"):
        out.append(
            Violation(
                code="feed-flits",
                message=f"feed_flits={point['feed_flits']}: the Stream Adapter's flit buffer holds "
                f"{hw.flit_buffer_bytes} B ({hw.max_feed_flits} flits); a packet is at most "
                f"{hw.packet_bytes // hw.flit_bytes} flits, and 3 flits are only for conv shift-reuse: use 1 or 2",
            )
        )
    if bad("trf-split"):
        n_axes = roles_of(problem).axes["n"]
        tn = int(np.prod([val(f"t:{a}") for a in n_axes]))
        hn = int(np.prod([val(f"h:{a}") for a in n_axes]))
        smaller = int(val("trf_image"))
        out.append(
            Violation(
                code="trf-split",
                message=f"trf_split={point['trf_split']} loads the TRF {tn} time{'s' if tn != 1 else ''} with "
                f"{hn} N group(s) each; trf_split={smaller} needs no more loads and none larger, so the extra "
                f"loads hold only padding (dummy N) or repeat the smaller split: use trf_split={smaller} "
                "(the space prunes this split)",
            )
        )
    if bad("trf-capacity"):
        need, cap = val("trf_tile"), val("trf_cap")
        half = " (half of the TRF: double buffering)" if point["double_buffer"] else ""
        times = int(np.ceil(need / cap))
        # a load holds hn N groups: a finer trf_split cuts it at most hn-fold (one N group a load), so past that
        # only sharding K (or N) over more slices shrinks it
        hn = int(np.prod([val(f"h:{a}") for a in roles_of(problem).axes["n"]]))
        tile = f"tile N by {times} or more (trf_split), " if times <= hn else ""
        out.append(
            Violation(
                code="trf-capacity",
                message=f"TRF needs {kib(need)} KiB per slice, {kib(cap)} KiB available{half}: {tile}shard "
                f"{'N or K' if tile else 'K (or N)'} over more slices"
                + (", or turn double buffering off" if point["double_buffer"] else "")
                + ("" if tile else f" (one N group a load would still need {kib(need / hn)} KiB)"),
            )
        )
    if bad("accumulator"):
        out.append(
            Violation(
                code="accumulator",
                message=f"the Time Reducer would hold {int(val('cells'))} outputs per row, it has "
                f"{hw.accumulator_cells_per_row} cells: put K innermost (inner='k'), use more rows, "
                "or split N into more TRF chunks",
            )
        )
    if bad("dm-capacity"):
        out.append(
            Violation(
                code="dm-capacity",
                message=f"each slice needs {kib(val('footprint'))} KiB of DM (operand share {kib(val('share'))} KiB "
                f"does not fit, so it streams from HBM with a {kib(val('working'))} KiB working set), its DM has "
                f"{kib(hw.dm_bytes_per_slice)} KiB: shard over more slices or clusters, or split N into more TRF tiles",
            )
        )
    if bad("shift-window"):
        out.append(
            Violation(
                code="shift-window",
                message=f"the filter window ({problem.axes.get('fw')} taps) does not fit {point['feed_flits']} "
                f"flits of the shift buffer: use feed_flits={hw.max_feed_flits} or turn shift-reuse off (im2col)",
            )
        )
    if bad("shift-range"):
        lo, hi = hw.shift_range[max((o.dtype for o in problem.inputs), key=lambda d: dtypes.info(d).bits)]
        reach = (val("geo:shifts") - 1) * val("geo:shift_stride")
        out.append(
            Violation(
                code="shift-range",
                message=f"shift-reuse would shift the window by {int(reach)} elements, the shift buffer reaches "
                f"[{lo}, {hi}] for this type: turn shift-reuse off (im2col) for this kernel width",
            )
        )
    if bad("shift-unsupported"):
        out.append(
            Violation(
                code="shift-unsupported",
                message="shift-reuse applies to a conv2d with kernel width >= 2 whose width dilation is 1 or a "
                "multiple of its stride: set shift=False",
            )
        )
    return out
