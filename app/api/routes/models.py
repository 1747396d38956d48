"""/v1/models: a network of one's own, uploaded as the raw request body: an ONNX model or a layer list.

``POST /v1/models/layers`` parses the upload and returns its layers (problem specs) and the skipped
operators; ``POST /v1/models/tunings`` does the same and, in the same request, creates the tuning
job for the whole network (a workload job: one sub-job per distinct layer). The body's size is
limited by ``TM_MAX_MODEL_BYTES`` (`app.api.body_limit`); the model is parsed and checked, never
executed (`workload.onnx_import`).
"""

from __future__ import annotations

from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError

from app.api.deps import ClientDep, SettingsDep, StoreDep, Writer
from app.api.errors import Unprocessable, UnsupportedMediaType
from app.api.json_body import check_json_text, check_unicode
from app.api.routes.tunings import JOB_LINKS, create_tuning
from app.api.schemas_engine import problem_responses
from app.documented_names import ObjectiveName, TargetName
from app.jobs.models import Job, TuningRequest
from mapper.settings import SearchSettings, Strategy
from workload import dtypes
from workload.imported import ImportedModel
from workload.layer_list import load_layers
from workload.onnx_import import import_onnx
from workload.onnx_ops import CONVERTERS
from workload.spec import CONV2D_EXAMPLES, EINSUM_EXAMPLES, documented_names

router = APIRouter(prefix="/v1/models", tags=["models"])

ONNX_TYPES = ("application/onnx", "application/octet-stream", "application/x-protobuf")
LAYER_TYPES = ("application/json", "application/yaml", "application/x-yaml", "text/yaml")

LAYER_LIST_EXAMPLE: dict[str, Any] = {
    "name": "my-net",
    "layers": [
        {**CONV2D_EXAMPLES[0], "label": "conv2_x"},
        {**EINSUM_EXAMPLES[0], "label": "bmm"},
    ],
}
LAYER_LIST_YAML = yaml.safe_dump(LAYER_LIST_EXAMPLE, sort_keys=False)

REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "the model file as it is: an ONNX model (application/onnx or application/octet-stream), or "
        "a layer list of problem specs (application/json or application/yaml): a list, or "
        '{"name": ..., "layers": [...]}',
        "content": {
            "application/onnx": {"schema": {"type": "string", "format": "binary"}},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {
                "schema": {"type": "object", "additionalProperties": True},
                "examples": {"layer list": {"summary": "two layers", "value": LAYER_LIST_EXAMPLE}},
            },
            "application/yaml": {
                "schema": {"type": "string"},
                "examples": {"layer list": {"summary": "two layers, YAML", "value": LAYER_LIST_YAML}},
            },
        },
    }
}

PARAM_EXAMPLES: dict[str, Any] = {"batch 16": {"summary": "a dynamic batch dimension", "value": ["batch=16"]}}
ERRORS = problem_responses(
    {
        413: "the upload is over TM_MAX_MODEL_BYTES",
        415: "a content type that is neither ONNX nor a layer list (the detail lists the accepted ones)",
        422: "not an ONNX model or a layer list, an invalid model, a dynamic dimension not given, a malformed "
        "layer: the detail names it and how to fix it",
    }
)

ParamQuery = Annotated[
    list[str],
    Query(
        max_length=32,
        description="an ONNX model's dynamic dimension, name=size (repeatable), e.g. batch=16",
        openapi_examples=PARAM_EXAMPLES,
    ),
]
OpQuery = Annotated[
    list[Annotated[str, documented_names(list(CONVERTERS))]],
    Query(max_length=16, description=f"import only these operators (repeatable): {', '.join(CONVERTERS)}"),
]
DtypeQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=32,
        description="replace every layer's declared input dtype (bf16 for an f32 export; bfloat8_b on Tenstorrent)",
        json_schema_extra={"enum": list(dtypes.ALIASES)},
    ),
]
NameQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=200, description="the network's name (default: the graph's or the list's)"),
]


def _sizes(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        value = value.strip()
        if not sep or not key.strip() or not value.lstrip("+").isdigit() or len(value) > 12:
            raise Unprocessable(
                f"param {item!r} is not name=size",
                field="param",
                hint="give a dynamic dimension as name=size, e.g. batch=16",
            )
        out[key.strip()] = int(value)
    return out


def ctype_is_json(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json"


def _kind(request: Request) -> str:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype in ONNX_TYPES:
        return "onnx"
    if ctype in LAYER_TYPES:
        return "layers"
    accepted = ", ".join(ONNX_TYPES + LAYER_TYPES)
    raise UnsupportedMediaType(
        f"content type {ctype or '(none)'!r} is neither an ONNX model nor a layer list",
        hint=f"send the file as the body with Content-Type one of: {accepted}",
    )


async def _import(
    request: Request, param: list[str], op: list[str], name: str | None, dtype: str | None = None
) -> ImportedModel:
    model = await _parse(request, param, op, name)
    if dtype is None:
        return model
    model = model.with_dtype(dtype)
    model.problems()  # an unknown dtype, or one a layer cannot take, is a 422 naming it
    return model


async def _parse(request: Request, param: list[str], op: list[str], name: str | None) -> ImportedModel:
    kind = _kind(request)
    sizes = _sizes(param)
    data = await request.body()
    if kind == "layers":
        if ctype_is_json(request):
            check_json_text(data)  # NaN/Infinity or a lone surrogate: a 422 saying where
        if sizes or op:
            raise Unprocessable(
                "param and op go with an ONNX model",
                field="param" if sizes else "op",
                hint="a layer list has fixed sizes",
            )
        model = await run_in_threadpool(load_layers, data, name=name or "layers")
        check_unicode(model.model_dump(mode="python"))  # a YAML "\ud800" escape decodes to a lone surrogate
        return model
    return await run_in_threadpool(import_onnx, data, params=sizes, name=name or "", ops=set(op) or None)


@router.post(
    "/layers",
    response_model=ImportedModel,
    operation_id="import_model",
    summary="Parse an ONNX model or a layer list: its layers and the skipped operators",
    responses=ERRORS,
    openapi_extra=REQUEST_BODY,
)
async def import_model(
    request: Request,
    param: ParamQuery = [],  # noqa: B006
    op: OpQuery = [],  # noqa: B006
    name: NameQuery = None,
    dtype: DtypeQuery = None,
) -> ImportedModel:
    """The upload's layers, each a problem spec that can be posted back as a tuning's `problem`, with the
    node it comes from and notes on what the import left out; the skipped nodes with their kind and
    reason, counted per operator. Nothing is stored."""
    return await _import(request, param, op, name, dtype)


@router.post(
    "/tunings",
    status_code=202,
    response_model=Job,
    operation_id="create_model_tuning",
    dependencies=[Writer],
    summary="Upload a model and start tuning every layer (one request from file to job)",
    responses={
        200: {"model": Job, "description": "an identical request already has a job: that job", "links": JOB_LINKS},
        202: {"description": "queued: a workload job over the model's layers", "links": JOB_LINKS},
        **ERRORS,
    },
    openapi_extra=REQUEST_BODY,
)
async def create_model_tuning(
    request: Request,
    store: StoreDep,
    settings: SettingsDep,
    response: Response,
    client: ClientDep,
    target: Annotated[
        list[TargetName],
        Query(
            min_length=1,
            max_length=16,
            description="target preset (GET /v1/targets); several: a comparison",
            openapi_examples={"trn2": {"summary": "AWS Trainium 2", "value": ["trn2"]}},
        ),
    ],
    param: ParamQuery = [],  # noqa: B006
    op: OpQuery = [],  # noqa: B006
    name: NameQuery = None,
    dtype: DtypeQuery = None,
    objective: Annotated[list[ObjectiveName], Query(max_length=4, description="objectives (default latency)")] = [],  # noqa: B006
    strategy: Strategy = "auto",
    trials: Annotated[int, Query(ge=1, le=100_000)] = SearchSettings().max_trials,
    seconds: Annotated[float, Query(gt=0, le=3600, allow_inf_nan=False)] = SearchSettings().max_seconds,
    patience: Annotated[int, Query(ge=0, le=100_000)] = SearchSettings().patience,
    seed: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    validate: Annotated[bool, Query(description="run the executor on each layer's best mapping")] = True,
) -> Job:
    """Import the upload as `POST /v1/models/layers` does, then queue the tuning of all its layers as
    `POST /v1/tunings` with `{"layers": [...], "name": ...}` would: `202` and the job (`Location`
    header), or the job that already answers an identical request (`200`). Follow it at
    `/v1/tunings/{id}`; its result is a `WorkloadResult`. The skipped operators are in the answer of
    `POST /v1/models/layers`."""
    model = await _import(request, param, op, name, dtype)
    model.problems()  # a model without any layer is a 422 saying what was skipped
    body: dict[str, Any] = {
        "layers": [layer.problem for layer in model.layers],
        "name": model.name,
        "objectives": objective or ["latency"],
        "strategy": strategy,
        "trials": trials,
        "seconds": seconds,
        "patience": patience,
        "seed": seed,
        "validate": validate,
    }
    body.update({"target": target[0]} if len(target) == 1 else {"targets": target})
    try:
        tuning = TuningRequest.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "request"
        raise Unprocessable(
            f"invalid {where}: {str(first['msg']).removeprefix('Value error, ')}",
            field=where,
            hint="see GET /v1/targets for target names" if "target" in where else "see the query parameters at /docs",
        ) from None
    return await run_in_threadpool(create_tuning, tuning, store, settings, response, client)
