"""Named workloads: ResNet-50 convs, BERT-base GEMMs, Llama-7B layers, shipped as YAML data files.

Each file in ``workload/data/`` holds a ``workloads:`` mapping from a workload name to:

- ``description`` and ``source`` (where the dimensions come from);
- ``params``: size parameters, each ``{default, min, max, help}``;
- ``dims``: fixed model dimensions (optional);
- ``problems``: a list of ``{label, einsum, sizes, weight}`` or ``{label, conv2d: {...}}`` entries.
  A size or conv parameter is an integer or the name of a parameter or dimension; conv2d entries
  take their batch from the ``batch`` parameter.

Every workload also accepts the dtype parameters ``dtype`` (inputs, default bf16),
``weights_dtype`` (the weight input, default ``dtype``) and ``out_dtype`` (default ``dtype``, the
way inference graphs store activations; pass the accumulator type, e.g. i32, to keep it wide).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

from workload import dtypes
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.problem import Problem

DTYPE_PARAMS: dict[str, dict[str, Any]] = {
    "dtype": {"default": "bf16", "help": "dtype of the inputs"},
    "weights_dtype": {"default": None, "help": "dtype of the weight input"},
    "out_dtype": {"default": None, "help": "dtype of the output"},
}


@cache
def _catalog() -> dict[str, dict[str, Any]]:
    """Every workload spec of the shipped data files, by name."""
    found: dict[str, dict[str, Any]] = {}
    data = resources.files("workload").joinpath("data")
    for entry in sorted(data.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        doc = yaml.safe_load(entry.read_text(encoding="utf-8"))
        for name, spec in (doc.get("workloads") or {}).items():
            if name in found:
                raise RuntimeError(f"workload {name} is defined twice (second time in {entry.name})")
            found[name] = spec
    return found


def names() -> list[str]:
    """Names of the shipped workloads, sorted."""
    return sorted(_catalog())


def _spec(name: str) -> dict[str, Any]:
    cat = _catalog()
    if name not in cat:
        raise ProblemError(f"unknown workload {name!r}", token=str(name), hint=f"choose one of {', '.join(names())}")
    return cat[name]


def _params(name: str, spec: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """Defaults overridden by `given`, validated."""
    sizes: dict[str, dict[str, Any]] = spec.get("params") or {}
    valid = [*sizes, *DTYPE_PARAMS]
    for key in given:
        if key not in valid:
            raise ProblemError(
                f"workload {name} has no parameter {key!r}",
                token=str(key),
                hint=f"valid parameters: {', '.join(valid)}",
            )
    out: dict[str, Any] = {}
    for key, p in sizes.items():
        v = given.get(key, p["default"])
        if isinstance(v, bool) or not isinstance(v, int):
            raise ProblemError(f"parameter {key} must be an integer", token=f"{key}={v!r}", hint=p.get("help", ""))
        lo, hi = p.get("min", 1), p.get("max")
        if v < lo or (hi is not None and v > hi):
            rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
            raise ProblemError(
                f"parameter {key}={v} is out of range {rng}", token=key, hint=f"{key}: {p.get('help', '')}"
            )
        out[key] = v
    for key, p in DTYPE_PARAMS.items():
        v = given.get(key, p["default"])
        if v is None:
            # the activation dtype; a block-float one is an input format only, so its outputs are bf16
            out[key] = "bf16" if key == "out_dtype" and dtypes.is_block(out["dtype"]) else out["dtype"]
            continue
        try:
            out[key] = dtypes.canonical_dtype(v)
        except ValueError as e:
            raise ProblemError(f"parameter {key}: unknown dtype", token=str(v), hint=str(e)) from None
    return out


def _resolve(value: Any, env: dict[str, Any], where: str) -> Any:
    if isinstance(value, str):
        if value not in env:
            raise RuntimeError(f"{where}: {value!r} is neither a parameter nor a dimension")
        return env[value]
    if isinstance(value, list):
        return [_resolve(v, env, where) for v in value]
    return value


def _build(name: str, entry: dict[str, Any], env: dict[str, Any], p: dict[str, Any]) -> Problem:
    label = f"{name}/{entry['label']}"
    if "conv2d" in entry:
        kw = {k: _resolve(v, env, label) for k, v in entry["conv2d"].items()}
        kw.setdefault("batch", p["batch"])
        return conv2d(**kw, dtype=p["dtype"], weights_dtype=p["weights_dtype"], out_dtype=p["out_dtype"], label=label)
    sizes = {a: _resolve(v, env, label) for a, v in entry["sizes"].items()}
    weight = entry.get("weight")
    dtype: str | dict[str, str] = p["dtype"]
    if weight is not None:
        dtype = {"A": p["dtype"], "B": p["dtype"]}
        dtype["AB"[int(weight)]] = p["weights_dtype"]
    return einsum(
        entry["einsum"],
        sizes,
        dtype=dtype,
        out_dtype=p["out_dtype"],
        reduce_op=entry.get("reduce_op", "add"),
        weight=weight,
        label=label,
    )


def load(name: str, **params: Any) -> list[Problem]:
    """The problems of a named workload, labelled ``"<name>/<layer>"``.

    Args:
        name: one of `names()`.
        **params: size parameters of the workload (see `describe`) and dtype, weights_dtype, out_dtype.

    Raises:
        ProblemError: unknown workload or parameter, or a parameter value out of range.
    """
    spec = _spec(name)
    p = _params(name, spec, params)
    env = {**(spec.get("dims") or {}), **p}
    return [_build(name, entry, env, p) for entry in spec["problems"]]


def describe(name: str) -> str:
    """A few lines about a workload: what it is, its source, its parameters and its size at the defaults."""
    spec = _spec(name)
    probs = load(name)
    lines = [f"{name}: {spec['description'].strip()}", f"source: {spec['source']}", "parameters:"]
    for key, p in (spec.get("params") or {}).items():
        hi = p.get("max")
        rng = f"{p.get('min', 1)}..{hi}" if hi is not None else f">= {p.get('min', 1)}"
        lines.append(f"  {key} (default {p['default']}, {rng}): {p.get('help', '')}")
    for key, p in DTYPE_PARAMS.items():
        lines.append(f"  {key} (default {p['default'] or 'dtype'}): {p['help']}")
    macs = total_macs(probs)
    lines.append(f"{len(probs)} problems, {macs / 1e9:.3f} GMAC at the defaults")
    return "\n".join(lines)


def total_macs(problems: list[Problem]) -> int:
    """Sum of the MACs of a list of problems."""
    return sum(q.macs for q in problems)
