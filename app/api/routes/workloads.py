"""/v1/workloads: the named workloads (ResNet-50, BERT-base, Llama-7B) and their layers as problem specs."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from app.api.engine_support import einsum_spec
from app.api.errors import NotFound, Unprocessable
from app.api.schemas_engine import WorkloadDetail, WorkloadLayer, WorkloadParam, WorkloadSummary, problem_responses
from workload import dtypes, named
from workload.canonical import content_hash

router = APIRouter(prefix="/v1/workloads", tags=["workloads"])

NAME_EXAMPLES: dict[str, Any] = {n: {"summary": n, "value": n} for n in named.names()}
BATCH_EXAMPLES: dict[str, Any] = {"batch 16": {"summary": "16 per batch", "value": 16}}

#: dtype query parameters list the canonical names (aliases such as fp16 are accepted too)
DTYPE_ENUM: dict[str, Any] = {"enum": list(dtypes.DTYPES)}
#: ... and an output's, without tt-metal's block floats (input formats only)
OUT_DTYPE_ENUM: dict[str, Any] = {"enum": [d for d in dtypes.DTYPES if not dtypes.is_block(d)]}

NOT_FOUND = problem_responses(
    {
        404: "unknown workload (the detail lists the known ones)",
        422: "a parameter the workload does not have, or a value out of its range (the detail names it)",
    }
)


def _catalog_entry(name: str) -> dict[str, Any]:
    """The workload's data-file entry (description, source, params). 404 for an unknown name."""
    if name not in named.names():
        known = named.names()
        raise NotFound(f"unknown workload {name!r}: known workloads are {', '.join(known)}", known=known)
    # workload.named has no public accessor for the data entry yet; _spec is its reader of the catalog
    entry: dict[str, Any] = named._spec(name)
    return entry


def _parameters(entry: dict[str, Any]) -> list[WorkloadParam]:
    out = [
        WorkloadParam(
            name=key,
            type="integer",
            default=p["default"],
            min=p.get("min", 1),
            max=p.get("max"),
            description=str(p.get("help", "")),
        )
        for key, p in (entry.get("params") or {}).items()
    ]
    out += [
        WorkloadParam(name=key, type="dtype", default=p["default"], description=str(p["help"]))
        for key, p in named.DTYPE_PARAMS.items()
    ]
    return out


@cache
def _summary(name: str) -> WorkloadSummary:
    entry = _catalog_entry(name)
    problems = named.load(name)
    return WorkloadSummary(
        name=name,
        description=" ".join(str(entry.get("description", "")).split()),
        source=str(entry.get("source", "")),
        parameters=_parameters(entry),
        layer_count=len(problems),
        total_macs=named.total_macs(problems),
        links={"self": f"/v1/workloads/{name}"},
    )


@router.get("", response_model=list[WorkloadSummary], summary="List the named workloads")
def list_workloads() -> list[WorkloadSummary]:
    """Every named workload: description, source, parameters (defaults and ranges), layer count and total MACs."""
    return [_summary(n) for n in named.names()]


def _query_params(request: Request) -> dict[str, Any]:
    """Every query parameter (declared or not: a workload's own parameter names vary), integers parsed."""
    out: dict[str, Any] = {}
    for key in request.query_params:
        values = request.query_params.getlist(key)
        if len(values) > 1:
            raise Unprocessable(f"query parameter {key} is given {len(values)} times", field=key, hint="give it once")
        v = values[0]
        out[key] = int(v) if v.strip().lstrip("+-").isdigit() and len(v) < 40 else v
    return out


@router.get("/{name}", response_model=WorkloadDetail, responses=NOT_FOUND, summary="A named workload's layers")
def get_workload(
    request: Request,
    name: Annotated[str, Path(description="a workload name from GET /v1/workloads", openapi_examples=NAME_EXAMPLES)],
    batch: Annotated[
        int | None, Query(ge=1, le=65536, description="batch size (every workload)", openapi_examples=BATCH_EXAMPLES)
    ] = None,
    dtype: Annotated[str | None, Query(description="input dtype (default bf16)", json_schema_extra=DTYPE_ENUM)] = None,
    weights_dtype: Annotated[
        str | None, Query(description="weight dtype (default: dtype)", json_schema_extra=DTYPE_ENUM)
    ] = None,
    out_dtype: Annotated[
        str | None,
        Query(
            description="output dtype (default: dtype; bf16 for a block-float dtype)", json_schema_extra=OUT_DTYPE_ENUM
        ),
    ] = None,
) -> WorkloadDetail:
    """The layers at the given parameters, each as a problem spec in the request format (POST it to
    /v1/problems/analyze or use it as a tuning's `problem`), with its label, MACs and content hash.
    Parameters beyond the common ones above are sent the same way: `seq_len` (bert-base,
    llama7b-prefill), `context` (llama7b-decode); GET /v1/workloads lists each workload's own.
    A parameter the workload does not have, or a value out of its range, is a 422 naming it."""
    summary = _summary(name)
    given = _query_params(request)
    problems = named.load(name, **given)
    used: dict[str, int | str] = {}
    for p in summary.parameters:
        value = given.get(p.name, p.default)
        if p.type == "dtype":
            used[p.name] = dtypes.canonical_dtype(str(value)) if value is not None else used["dtype"]
        elif isinstance(value, int):  # load() accepted it: an integer within range
            used[p.name] = value
    hashes = [content_hash(q) for q in problems]
    layers = [
        WorkloadLayer(
            index=i,
            label=q.label,
            macs=q.macs,
            content_hash=h,
            problem=einsum_spec(q),
        )
        for i, (q, h) in enumerate(zip(problems, hashes, strict=True))
    ]
    return WorkloadDetail(
        **summary.model_dump(exclude={"total_macs"}),
        params=used,
        distinct_layers=len(set(hashes)),
        total_macs=named.total_macs(problems),
        layers=layers,
    )
