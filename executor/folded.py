"""Validate a folded conv's mapping against the ORIGINAL conv: the proof is about the user's problem.

`validate_folded` draws seeded random inputs for the original (strided) conv, packs them in their
formats, folds them (`workload.conv_fold.fold_inputs`: pad, space-to-depth, kernel pad and fold), runs
the folded conv's mapping on the folded inputs with the executor, and compares the result with the
exact reference of the ORIGINAL problem on the original inputs. A wrong fold (channel order, padding,
kernel placement) therefore fails, as a wrong mapping does.

It runs the mapping as `executor.validate.validate_as_run` would: through its halo configuration
(method ``halo``) when it is an L1-sharded conv the halo executor can judge, else through its loop
nest (``full``), shrunk to a proxy over the memory cap (``proxy``). A proxy of the folded conv runs
fewer images, output rows, columns or channels; the original's reference is then taken over the same
output window (the original conv restricted to the input rows and columns that window reads). A proxy
that would shorten the reduction (kernel or channels) is not a window of the original, and the
validation is refused as too large (`ValidationTooLarge`). Math fidelity phases split each operand
element by element, so the phases of the folded operands are the fold of the original's phases, and
the reference sums the original conv over the same phases (`executor.fidelity.plan`).
"""

from __future__ import annotations

import numpy as np

from costmodels.ir import Mapping, coverage_errors, flat_mapping
from costmodels.tenstorrent.halo_of import halo_config_of
from executor import fidelity as fidelity_mod
from executor import proxy as proxy_mod
from executor.halo_exec import run_sharded_conv
from executor.judgement import judge
from executor.tiled import TiledResult, run_mapping
from executor.validate import (
    DEFAULT_CAP_BYTES,
    HARD_LIMIT_FACTOR,
    PROXY_TARGET,
    Method,
    ValidationReport,
    ValidationTooLarge,
    _halo_unfit,
    _packed,
)
from workload.conv_fold import ConvFold, fold_inputs, folded_problem
from workload.problem import Operand, Problem
from workload.reference import random_inputs

#: free axes of a conv that a proxy may shrink and that index the original's output the same way
WINDOW_AXES = ("n", "oh", "ow", "co")


def window_problem(problem: Problem, fold: ConvFold, sizes: dict[str, int]) -> Problem:
    """The original conv restricted to its first ``sizes`` images, output rows, columns and channels.

    Its input keeps the original's low padding and the leading input rows and columns that the window
    reads (the rest is high padding, or real data past the last index read: a negative high pad).
    """
    p = fold.params
    x, w = problem.inputs
    (sh, sw), (kh, kw), (ph, pw) = p.stride, p.kernel, p.padding
    ext_h, ext_w = (sizes["oh"] - 1) * sh + kh, (sizes["ow"] - 1) * sw + kw
    h = max(1, min(p.input_height, ext_h - ph))
    wd = max(1, min(p.input_width, ext_w - pw))
    pad = ((0, 0), (ph, ext_h - ph - h), (pw, ext_w - pw - wd), (0, 0), (0, 0))
    x2 = Operand(name=x.name, dims=x.dims, dtype=x.dtype, pad=pad)
    axes = {a: sizes.get(a, s) for a, s in problem.axes.items()}
    return Problem(axes=axes, inputs=(x2, w), output=problem.output, reduce_op=problem.reduce_op, weight=problem.weight)


def _proxy(
    problem: Problem, fold: ConvFold, folded: Problem, mapping: Mapping, cap: int
) -> tuple[Problem, Problem, Mapping, list[str]]:
    """(original window, folded proxy, proxy mapping, notes) of a folded validation over the memory cap."""
    run_folded, run_map, notes = proxy_mod.shrink(folded, mapping, int(cap * PROXY_TARGET))
    need = proxy_mod.estimate_bytes(run_folded, run_map)
    if need > HARD_LIMIT_FACTOR * cap:
        raise ValidationTooLarge(
            f"even the smallest proxy of this folded mapping needs about {need / 2**20:,.0f} MiB to validate"
        )
    shrunk = [a for a in folded.axes if run_folded.axes[a] != folded.axes[a]]
    if any(a not in WINDOW_AXES for a in shrunk):
        raise ValidationTooLarge(
            f"the proxy of this folded mapping shortens {', '.join(shrunk)}: not a window of the original conv"
        )
    window = window_problem(problem, fold, {a: run_folded.axes[a] for a in WINDOW_AXES})
    return window, run_folded, run_map, notes


def _slice(problem: Problem, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The leading part of each full input that `problem`'s (smaller) operands hold."""
    return [a[tuple(slice(0, s) for s in problem.shape(op))] for op, a in zip(problem.inputs, arrays, strict=True)]


def validate_folded(
    problem: Problem,
    fold: ConvFold,
    mapping: Mapping,
    *,
    seed: int = 0,
    memory_cap_bytes: int = DEFAULT_CAP_BYTES,
) -> ValidationReport:
    """Run `mapping` (a mapping of the folded conv) on folded inputs; judge it against `problem` (module doc).

    Raises:
        ValidationTooLarge: no proxy of the folded mapping is a window of the original within the cap.
    """
    folded = folded_problem(problem, fold)
    coverage = [e.message for e in coverage_errors(folded, mapping)]
    not_emulated = fidelity_mod.unsupported(folded, mapping)
    originals = random_inputs(problem, np.random.default_rng(seed), pack_blocks=False)
    inputs = _packed(problem, originals)
    f_inputs = fold_inputs(fold, inputs)
    notes = [f"folded: {fold.describe()}; the reference is the original conv on the unfolded inputs"]
    notes += [f"coverage: {m}" for m in coverage]
    method: Method = "full"
    run_orig, run_folded, run_map = problem, folded, mapping
    config, _ = halo_config_of(folded, mapping)
    result: TiledResult
    if config is not None and _halo_unfit(folded, mapping, config, memory_cap_bytes) is None:
        method = "halo"
        result = run_sharded_conv(folded, config, f_inputs)
        notes.append(f"{config.num_cores} cores, {config.total_remote_sticks()} remote sticks")
    else:
        cap = memory_cap_bytes if not_emulated else memory_cap_bytes // fidelity_mod.operand_sets(mapping)
        if (
            max(proxy_mod.estimate_bytes(folded, mapping), proxy_mod.estimate_bytes(problem, flat_mapping(problem)))
            > cap
        ):
            run_orig, run_folded, run_map, more = _proxy(problem, fold, folded, mapping, cap)
            notes += more
            method = "proxy"
            originals, inputs = _slice(run_orig, originals), _slice(run_orig, inputs)
            f_inputs = _slice(run_folded, f_inputs)
        result = run_mapping(run_folded, run_map, f_inputs)
    phases = None if not_emulated else fidelity_mod.plan(run_orig, mapping, inputs)
    operand_sets = [list(pair) for pair in phases.pairs] if phases is not None else [inputs]
    fields, status, reason = judge(
        problem, run_orig, mapping, (originals, inputs), operand_sets, result, phases, coverage, not_emulated, notes
    )
    reason += " against the original (unfolded) conv"
    if method == "proxy":
        reason += f" on a proxy ({run_orig.points / problem.points:.3g} of the points)"
    fields.pop("within")
    return ValidationReport(
        passed=status == "passed",
        status=status,
        reason=reason,
        method=method,
        checked_fraction=run_orig.points / problem.points,
        validated_axes=dict(run_orig.axes),
        notes=tuple(notes),
        **fields,
    )
