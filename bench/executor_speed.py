"""Tiled execution vs one BLAS call on the same problem (`python -m bench.executor_speed`).

For each problem the tiled executor runs a mapping with the given instruction tile (outer loops
over every axis), and the baseline is one ``np.matmul`` (GEMMs, batched matmul) or one
``np.einsum(..., optimize=True)`` over the stride-trick window view (convs), both on operands
already cast to float32. Both timings are the best of a few runs; the ratio is tiled / single.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from costmodels.ir import Level, Loop, Mapping
from executor.tiled import run_mapping
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.problem import Problem
from workload.reference import axis_view, padded_input, random_inputs


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def tiled_mapping(problem: Problem, tile: dict[str, int]) -> Mapping:
    """Outer loops over every axis (ceil(size / tile)), then the instruction tile."""
    outer, inner = [], []
    for a, s in problem.axes.items():
        t = min(tile.get(a, s), s)
        outer.append(Loop(axis=a, factor=-(-s // t)))
        inner.append(Loop(axis=a, factor=t))
    fill = {op.name: dict.fromkeys(problem.reduction_axes, "zero") for op in problem.inputs}
    return Mapping(
        levels=(Level(name="outer", loops=tuple(outer)), Level(name="tile", loops=tuple(inner))),
        acc_dtype=problem.acc_dtype,
        fill=fill,
    )


def _single(problem: Problem, inputs: list[np.ndarray]) -> Callable[[], object]:
    views = [axis_view(problem, i, padded_input(problem, i, x.astype(np.float32)))[0] for i, x in enumerate(inputs)]
    if all(d.is_plain() for o in problem.inputs for d in o.dims):
        a, b = (np.ascontiguousarray(v) for v in views)
        return lambda: np.matmul(a, b)
    letters = {a: chr(97 + i) for i, a in enumerate(problem.axes)}
    subs = ",".join("".join(letters[a] for a in o.axes) for o in problem.inputs)
    subs += "->" + "".join(letters[a] for a in problem.free_axes)
    return lambda: np.einsum(subs, *views, optimize=True)


def cases() -> list[tuple[str, Problem, dict[str, int]]]:
    out: list[tuple[str, Problem, dict[str, int]]] = []
    for n in (512, 1024, 2048):
        p = einsum("mk,kn->mn", {"m": n, "k": n, "n": n}, dtype="f32", weight=1)
        for t in (128, 512):
            out.append((f"gemm {n}^3 f32", p, {"m": t, "n": t, "k": t}))
    pb = einsum("mk,kn->mn", {"m": 1024, "k": 1024, "n": 1024}, dtype="bf16", out_dtype="f32", weight=1)
    out.append(("gemm 1024^3 bf16", pb, {"m": 128, "n": 128, "k": 128}))
    bmm = einsum("vmk,vkn->vmn", {"v": 16, "m": 256, "k": 256, "n": 256}, dtype="f32", weight=1)
    out.append(("bmm 16x256^3 f32", bmm, {"v": 1, "m": 128, "n": 128, "k": 128}))
    convs = {
        "resnet conv1 7x7/2": conv2d(
            batch=1,
            in_channels=3,
            out_channels=64,
            input_height=224,
            input_width=224,
            kernel=7,
            stride=2,
            padding=3,
            dtype="f32",
        ),
        "resnet 3x3 64@56": conv2d(
            batch=1, in_channels=64, out_channels=64, input_height=56, input_width=56, kernel=3, padding=1, dtype="f32"
        ),
        "resnet 3x3 256@14": conv2d(
            batch=1,
            in_channels=256,
            out_channels=256,
            input_height=14,
            input_width=14,
            kernel=3,
            padding=1,
            dtype="f32",
        ),
        "resnet 1x1 1024->256@14": conv2d(
            batch=1, in_channels=1024, out_channels=256, input_height=14, input_width=14, kernel=1, dtype="f32"
        ),
    }
    for name, p in convs.items():
        out.append((name, p, {"oh": 28, "ci": 64, "co": 64}))
    return out


def main() -> None:
    import os

    print(f"threads: OMP/OPENBLAS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    print(f"{'problem':<26} {'tile':<18} {'single ms':>10} {'tiled ms':>10} {'ratio':>7}")
    rng = np.random.default_rng(0)
    for name, p, tile in cases():
        inputs = random_inputs(p, rng)
        mapping = tiled_mapping(p, tile)
        repeat = 3 if p.points <= 2**30 else 2
        single = _best(_single(p, inputs), repeat)
        tiled = _best(lambda p=p, m=mapping, x=inputs: run_mapping(p, m, x), repeat)
        tile_s = "x".join(f"{a}{t}" for a, t in tile.items())
        print(f"{name:<26} {tile_s:<18} {single * 1e3:>10.1f} {tiled * 1e3:>10.1f} {tiled / single:>7.2f}", flush=True)
    memory_cap()


def memory_cap() -> None:
    """Validation of problems over the memory cap: method, share checked, peak traced memory, time."""
    import tracemalloc

    from costmodels.registry import get_target
    from executor.validate import DEFAULT_CAP_BYTES, validate
    from mapper.search import tune
    from workload.einsum import einsum
    from workload.named import load

    big = einsum("mk,kn->mn", {"m": 8192, "k": 8192, "n": 8192}, dtype="bf16", weight=1)
    cases: list[tuple[str, Problem, Mapping]] = [
        ("gemm 8192^3 bf16, tiles 128/512", big, tiled_mapping(big, {"m": 128, "n": 512, "k": 128}))
    ]
    q_proj = next(p for p in load("llama7b-prefill") if p.label.endswith("q_proj"))
    best = tune(q_proj, get_target("rngd"), validate=False).mapping
    assert best is not None
    cases.append(("llama7b prefill q_proj, rngd best", q_proj, best))
    print(f"\nvalidation under the {DEFAULT_CAP_BYTES / 2**20:.0f} MiB memory cap")
    print(f"{'problem':<36} {'method':<7} {'checked':>9} {'peak MiB':>9} {'seconds':>8} {'passed':>7}")
    for name, problem, mapping in cases:
        tracemalloc.start()
        t0 = time.perf_counter()
        report = validate(problem, mapping, seed=0)
        spent = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"{name:<36} {report.method:<7} {report.checked_fraction:>9.2%} {peak / 2**20:>9.0f} {spent:>8.1f} "
            f"{report.passed!s:>7}",
            flush=True,
        )


if __name__ == "__main__":
    main()
