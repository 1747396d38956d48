"""/v1/targets: the hardware presets, what they support and what a request may override."""

from __future__ import annotations

from functools import cache
from typing import Any

from fastapi import APIRouter
from pydantic import JsonValue

from app.api.deps import SettingsDep
from app.api.engine_support import known_targets, limits_of, preset_target, require_target, supported
from app.api.schemas_engine import OverrideField, TargetDetail, TargetSummary, problem_responses
from costmodels.presets import preset_family, preset_sources

router = APIRouter(prefix="/v1/targets", tags=["targets"])

NOT_FOUND = problem_responses({404: "unknown target (the detail lists the known ones)"})


def _type_of(schema: dict[str, Any]) -> str:
    """A short JSON type of a field's schema: integer, array of string, object of integer, ..."""
    if "anyOf" in schema:
        return " | ".join(_type_of(s) for s in schema["anyOf"])
    kind = str(schema.get("type", "any"))
    if "enum" in schema:
        return f"{kind} (one of {', '.join(str(v) for v in schema['enum'])})"
    if kind == "array":
        if "prefixItems" in schema:
            return f"array [{', '.join(_type_of(s) for s in schema['prefixItems'])}]"
        if "items" in schema:
            return f"array of {_type_of(schema['items'])}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_type_of(schema['additionalProperties'])}"
    return kind


def _figures(hardware: dict[str, Any]) -> dict[str, int | float]:
    return {k: v for k, v in hardware.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _links(name: str) -> dict[str, str]:
    return {"self": f"/v1/targets/{name}"}


@cache
def _summary(name: str) -> TargetSummary:
    t = preset_target(name)
    return TargetSummary(
        name=name,
        family=preset_family(name),
        objectives=list(t.objectives),
        key_figures=_figures(t.hardware.model_dump(mode="json")),
        supported=supported(name),
        links=_links(name),
    )


@cache
def _detail(name: str) -> dict[str, Any]:
    """Everything of a target's detail but the limits (those are the service's settings)."""
    t = preset_target(name)
    hardware: dict[str, JsonValue] = t.hardware.model_dump(mode="json")
    schema = type(t.hardware).model_json_schema()
    props: dict[str, dict[str, Any]] = schema.get("properties", {})
    overrides = [
        OverrideField(
            name=field,
            type=_type_of(props.get(field, {})),
            default=hardware.get(field),
            description=str(props.get(field, {}).get("description", info.description or "")),
            json_schema=props.get(field, {}),
        )
        for field, info in type(t.hardware).model_fields.items()
    ]
    return {
        **_summary(name).model_dump(),
        "hardware": hardware,
        "overrides": overrides,
        "sources": preset_sources(name),
    }


@router.get("", response_model=list[TargetSummary], summary="List the target presets")
def list_targets() -> list[TargetSummary]:
    """Every preset with its family, objectives, key figures and the dtypes and reduce ops it supports."""
    return [_summary(n) for n in known_targets()]


@router.get("/{name}", response_model=TargetDetail, responses=NOT_FOUND, summary="One target preset in full")
def get_target_detail(name: str, settings: SettingsDep) -> TargetDetail:
    """The preset's fields, which of them a request may override (type, default, description, bounds),
    the citations of its numbers, the problem limits and what its `supports()` accepts."""
    return TargetDetail(**_detail(require_target(name, in_body=False)), limits=limits_of(settings))
