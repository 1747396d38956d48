"""Named OpenAPI examples of the engine routes, each one a request that answers 200 from /docs.

The evaluate and validate examples carry a real point or mapping: the first feasible warm start
of the example's target, computed from the engine, so they follow the cost models as they change.
They are computed when the OpenAPI document is first built (`document_examples`), not when the
routes are imported: finding the rngd warm start takes seconds, which every server and worker
process would otherwise pay at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from fastapi import FastAPI

from app.api.openapi_document import amend
from costmodels.protocol import Choice
from costmodels.registry import get_target
from workload.spec import problem_from_dict

#: (example key, summary, target, problem) - the four the API promises.
PROBLEMS: list[tuple[str, str, str, dict[str, Any]]] = [
    (
        "batched_matmul_rngd",
        "Batched matmul (bf16) on rngd",
        "rngd",
        {
            "kind": "einsum",
            "label": "batched matmul",
            "expr": "vmk,vnk->vmn",
            "sizes": {"v": 4, "m": 128, "n": 128, "k": 256},
            "dtype": "bf16",
            "weight": 1,
        },
    ),
    (
        "attention_trn2",
        "Attention scores einsum on trn2",
        "trn2",
        {
            "kind": "einsum",
            "label": "attention scores, 4 heads",
            "expr": "Q[b, h, s, d], K[b, h, t, d] -> S[b, h, s, t]",
            "sizes": {"b": 1, "h": 4, "s": 128, "t": 128, "d": 128},
            "dtype": {"Q": "bf16", "K": "bf16"},
            "out_dtype": "f32",
            "weight": "K",
        },
    ),
    (
        "conv2d_wormhole",
        "3x3 conv2d on wormhole-n150",
        "wormhole-n150",
        {
            "kind": "conv2d",
            "label": "3x3 conv, 64 channels at 14x14",
            "batch": 1,
            "in_channels": 64,
            "out_channels": 64,
            "input_height": 14,
            "input_width": 14,
            "kernel": [3, 3],
            "stride": [1, 1],
            "padding": [1, 1],
            "dtype": "bf16",
        },
    ),
    (
        "row_product_ascend_a5",
        "Row product (reduce_op mul) on ascend-a5",
        "ascend-a5",
        {
            "kind": "einsum",
            "label": "row product",
            "expr": "ij->i",
            "sizes": {"i": 64, "j": 256},
            "dtype": "f32",
            "reduce_op": "mul",
        },
    ),
]


def analyze_examples() -> dict[str, dict[str, Any]]:
    """Problem bodies for POST /v1/problems/analyze."""
    return {key: {"summary": summary, "value": problem} for key, summary, _t, problem in PROBLEMS}


@cache
def _first_feasible(target_name: str, key: str) -> tuple[dict[str, Choice], dict[str, Any]]:
    """(point, mapping as JSON) of the first feasible warm start of example `key` on its target."""
    problem_json = next(p for k, _s, _t, p in PROBLEMS if k == key)
    problem = problem_from_dict(problem_json)
    target = get_target(target_name)
    for point in target.warm_starts(problem):
        mapping = target.mapping(problem, point)
        if not target.check(problem, mapping):
            return dict(point), mapping.model_dump(mode="json")
    raise RuntimeError(f"no feasible warm start for example {key} on {target_name}")


def evaluate_examples() -> dict[str, dict[str, Any]]:
    """Bodies for POST /v1/mappings/evaluate: a point for each example, a mapping for two, a vendor's configuration in
    its target's own knobs, one infeasible point."""
    out: dict[str, dict[str, Any]] = {}
    for key, summary, target, problem in PROBLEMS:
        point, mapping = _first_feasible(target, key)
        out[f"{key}_point"] = {
            "summary": f"{summary}: a point of its space",
            "value": {"problem": problem, "target": target, "point": point},
        }
        if key in ("batched_matmul_rngd", "conv2d_wormhole"):
            out[f"{key}_mapping"] = {
                "summary": f"{summary}: a loop-nest mapping",
                "value": {"problem": problem, "target": target, "mapping": mapping},
            }
    out["published_tensix_knobs"] = {
        "summary": "A configuration tt-metal publishes (its GEMM benchmark, 1024^3 on an 8x8 grid), in the target's "
        "own knobs: act_block_h and out_subblock",
        "value": {
            "problem": {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 1024, "k": 1024, "n": 1024},
                        "dtype": "bf16", "weight": "B"},
            "target": "wormhole-n150",
            "point": {"layout": "block/8x8", "memory": "l1-sharded", "act_block_h": 128, "act_block_w_div": 1,
                      "in0_block_w": 4, "out_subblock": "1x4", "act_double_buffer": True,
                      "weights_double_buffer": True, "split_reader": False, "math_fidelity": "HiFi4",
                      "fp32_acc": True},
        },
    }  # fmt: skip
    key, summary, target, problem = PROBLEMS[0]
    point, _ = _first_feasible(target, key)
    out["rngd_override_infeasible"] = {
        "summary": "The rngd point on a part with 4 KiB of DM per slice (an override): infeasible, with reasons",
        "value": {"problem": problem, "target": target, "overrides": {"dm_bytes_per_slice": 4096}, "point": point},
    }
    return out


def validate_examples() -> dict[str, dict[str, Any]]:
    """Bodies for POST /v1/mappings/validate: each example problem with its target's warm-start mapping."""
    out: dict[str, dict[str, Any]] = {}
    for key, summary, target, problem in PROBLEMS:
        _point, mapping = _first_feasible(target, key)
        value = {"problem": problem, "mapping": mapping}
        out[key] = {"summary": f"{summary}: run its mapping tile by tile", "value": value}
    return out


#: (route path, method) -> the examples of its JSON body
ENGINE_EXAMPLES: dict[tuple[str, str], Callable[[], dict[str, dict[str, Any]]]] = {
    ("/v1/mappings/evaluate", "post"): evaluate_examples,
    ("/v1/mappings/validate", "post"): validate_examples,
}


def add_examples(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with `ENGINE_EXAMPLES` as the named examples of those bodies (in place, idempotent)."""
    for (path, method), examples in ENGINE_EXAMPLES.items():
        op = document.get("paths", {}).get(path, {}).get(method)
        if op is None:
            continue
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None:
            body["examples"] = examples()
    return document


def document_examples(app: FastAPI) -> None:
    """Give `app`'s OpenAPI document the engine examples when it is first built (FastAPI then keeps it)."""
    amend(app, add_examples)
