"""Tune every layer of a workload in one call, layers spread over worker processes.

Identical layers (same content hash) are searched once. Results are looked up in and stored to
the cache by this (parent) process only, so workers never write to a shared storage; a layer
already in the cache costs a lookup. Workers run `mapper.search.tune` and send back JSON.

On a Tenstorrent target, a latency tuning also chooses every layer's layout jointly
(`mapper.layout_plan`: activations kept in L1 between layers, reshards, spills) and reports the
plan beside the layer-by-layer optimum in `WorkloadResult.network`.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from optuna.storages import BaseStorage
from pydantic import BaseModel, ConfigDict, Field

from costmodels.protocol import Target
from mapper.cache import ResultCache, TargetFactory, answers, resolve_factory
from mapper.keys import cache_key, cost_model_version, problem_hash
from mapper.layout_plan import NetworkPlan, PlanCancelled, plan_layouts
from mapper.result import TuneResult
from mapper.search import check_request, tune
from mapper.settings import SearchSettings
from mapper.watch import Watch
from workload.errors import ProblemError
from workload.imported import ImportedModel
from workload.problem import Problem


class LayerSummary(BaseModel):
    """One layer of the workload and how its search went."""

    model_config = ConfigDict(frozen=True)
    index: int
    label: str
    problem_hash: str
    key: str
    feasible: bool
    value: float | None = Field(description="first objective of the best mapping")
    gap: float | None
    proven_optimal: bool
    stop_reason: str
    seconds: float
    cached: bool
    duplicate_of: int | None = Field(default=None, description="index of the identical layer searched instead")


class WorkloadResult(BaseModel):
    """Per-layer summaries, the distinct results, and totals."""

    model_config = ConfigDict(frozen=True)
    complete: bool = Field(default=True, description="False when the tuning was cancelled before every layer ended")
    workload: str
    target: str
    objective: str
    layers: list[LayerSummary]
    results: dict[str, TuneResult] = Field(description="problem hash -> result (each distinct layer once)")
    total_value: float | None = Field(
        description="sum of the first objective over every layer (None if any infeasible)"
    )
    distinct: int
    searched: int = Field(description="distinct layers searched (not served from the cache)")
    proven_optimal: int
    seconds: float = Field(description="wall time of the whole call")
    layer_workers: dict[str, str] = Field(
        default_factory=dict, description="problem hash -> the worker process that searched it (service only)"
    )
    network: NetworkPlan | None = Field(
        default=None,
        description="Tenstorrent, latency: the layouts chosen jointly over the layer chain (activations kept in "
        "L1, reshards, spills), beside the layer-by-layer optimum (mapper.layout_plan)",
    )


def check_layer(problem: Problem, index: int, target: Target, settings: SearchSettings) -> None:
    """`mapper.search.check_request` for one layer of a network, its error naming the layer."""
    try:
        check_request(problem, target, settings)
    except ProblemError as e:
        hint = e.hint or (
            "leave such layers out of the list or tune another target; for an ONNX model, import only the operators "
            "the target runs (--op Conv --op MatMul, ops=[...], ?op=...)"
        )
        raise ProblemError(f"layer {problem.label or index}: {e.message}", token=e.token, hint=hint) from None


def _tune_json(
    problem: Problem,
    preset: str,
    overrides: dict[str, Any],
    settings: SearchSettings,
    validate: bool,
    factory: TargetFactory,
) -> str:
    """Worker entry point: search one layer, return the result as JSON."""
    target = factory(preset, overrides)
    return tune(problem, target, settings, overrides=overrides, validate=validate).model_dump_json()


def tune_layers(
    problems: list[Problem],
    preset: str,
    settings: SearchSettings | None = None,
    *,
    name: str = "workload",
    overrides: dict[str, Any] | None = None,
    storage: str | BaseStorage | None = None,
    workers: int = 2,
    validate: bool = True,
    factory: TargetFactory | None = None,
    watch: Watch | None = None,
    plan_network: bool = True,
) -> WorkloadResult:
    """Tune a list of layers (see the module docstring).

    `plan_network` (Tenstorrent, latency objective): also choose the layouts jointly (`mapper.layout_plan`).

    With a `watch`, layers are searched one after another in this process, progress is reported
    per distinct layer (unit ``layers``) and a cancel stops the running layer's search and skips
    the rest: the result then has ``complete=False`` and the skipped layers say ``cancelled``. The
    network plan reports to the same watch and stops on its cancel too (no plan, ``complete=False``).
    """
    t0 = time.perf_counter()
    settings = settings or SearchSettings()
    overrides = dict(overrides or {})
    factory = resolve_factory(factory)
    target = factory(preset, overrides)
    version = cost_model_version(target)
    cache_ = ResultCache(storage)
    hashes = [problem_hash(p) for p in problems]
    first: dict[str, int] = {}
    for i, h in enumerate(hashes):
        first.setdefault(h, i)
    for i in first.values():  # before any search, naming the layer a target cannot run
        check_layer(problems[i], i, target, settings)
    results: dict[str, TuneResult] = {}
    todo: list[tuple[str, Problem]] = []
    for h, i in first.items():
        hit = cache_.get(cache_key(problems[i], target.name, overrides, version, settings))
        if answers(hit, validate):
            assert hit is not None
            results[h] = hit.model_copy(update={"cached": True})
        else:
            todo.append((h, problems[i]))
    if watch is not None:
        watch.report(len(results), len(first), None, unit="layers")
    if len(todo) > 1 and workers > 1 and watch is None:
        with ProcessPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            futures = [(h, pool.submit(_tune_json, p, preset, overrides, settings, validate, factory)) for h, p in todo]
            fresh = [(h, TuneResult.model_validate_json(f.result())) for h, f in futures]
    else:
        fresh = _tune_in_turn(todo, target, settings, overrides, validate, watch, len(results), len(first))
    for h, r in fresh:
        if r.stop_reason != "cancelled":  # a cancelled search is not the layer's answer
            cache_.put(r)
        results[h] = r
    layers = []
    for i, (p, h) in enumerate(zip(problems, hashes, strict=True)):
        if h not in results:  # cancelled before this layer was searched
            layers.append(_not_searched(i, p, h))
            continue
        r = results[h]
        layers.append(
            LayerSummary(
                index=i,
                label=p.label or f"layer {i}",
                problem_hash=h,
                key=r.key,
                feasible=r.feasible,
                value=r.best_value(),
                gap=r.gap,
                proven_optimal=r.proven_optimal,
                stop_reason=r.stop_reason,
                seconds=r.seconds if first[h] == i else 0.0,
                cached=r.cached,
                duplicate_of=None if first[h] == i else first[h],
            )
        )
    values = [lay.value for lay in layers]
    cancelled = any(lay.stop_reason == "cancelled" for lay in layers)
    network = None
    feasible = all(v is not None for v in values)
    if (
        plan_network
        and feasible
        and not cancelled
        and target.family == "tenstorrent"
        and settings.objectives[0] == "latency"
    ):
        try:
            network = plan_layouts(problems, preset, overrides, factory, watch=watch)
        except PlanCancelled:  # asked to stop while planning: the layers' results stand, the plan does not
            cancelled = True
    return WorkloadResult(
        complete=not cancelled,
        workload=name,
        target=target.name,
        objective=settings.objectives[0],
        layers=layers,
        results=results,
        total_value=None if any(v is None for v in values) else sum(v for v in values if v is not None),
        distinct=len(first),
        searched=len(todo),
        proven_optimal=sum(1 for r in results.values() if r.proven_optimal),
        seconds=time.perf_counter() - t0,
        network=network,
    )


def _tune_in_turn(
    todo: list[tuple[str, Problem]],
    target: Target,
    settings: SearchSettings,
    overrides: dict[str, Any],
    validate: bool,
    watch: Watch | None,
    done: int,
    total: int,
) -> list[tuple[str, TuneResult]]:
    """Search the layers one after another in this process, reporting to and stopping with `watch`."""
    inner = Watch(cancel=watch.cancel) if watch is not None else None
    fresh: list[tuple[str, TuneResult]] = []
    for h, p in todo:
        if watch is not None and watch.cancelled():
            break
        r = tune(p, target, settings, overrides=overrides, validate=validate, progress=inner)
        fresh.append((h, r))
        if watch is not None:
            watch.report(done + len(fresh), total, None, unit="layers")
        if r.stop_reason == "cancelled":
            break
    return fresh


def _not_searched(index: int, problem: Problem, h: str) -> LayerSummary:
    return LayerSummary(
        index=index,
        label=problem.label or f"layer {index}",
        problem_hash=h,
        key="",
        feasible=False,
        value=None,
        gap=None,
        proven_optimal=False,
        stop_reason="cancelled",
        seconds=0.0,
        cached=False,
    )


def tune_workload(
    name: str,
    preset: str,
    settings: SearchSettings | None = None,
    *,
    params: dict[str, Any] | None = None,
    **kwargs: Any,
) -> WorkloadResult:
    """Tune every layer of a named workload (`workload.named`), e.g. ``"resnet50"``.

    Raises:
        ProblemError: unknown workload or target.
    """
    from workload.named import load

    return tune_layers(load(name, **(params or {})), preset, settings, name=name, **kwargs)


def tune_model(
    model: ImportedModel, preset: str, settings: SearchSettings | None = None, **kwargs: Any
) -> WorkloadResult:
    """Tune every layer of a network of one's own: an ONNX import (`workload.import_onnx`) or a layer list
    (`workload.load_layers`), like a named workload; keyword arguments as `tune_layers`.

    Raises:
        ProblemError: the model has no layer, or an unknown target.
    """
    return tune_layers(model.problems(), preset, settings, name=model.name, **kwargs)
