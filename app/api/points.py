"""Points of a request: a point of the target's space resolved against its choices (`resolve_point`), or the
target's own knobs (`knob_mapping`: a configuration a vendor publishes), each a 422 naming what is wrong."""

from __future__ import annotations

import json
import numbers
from typing import Any

import numpy as np

from app.api.engine_support import guarded
from app.api.errors import Unprocessable
from costmodels.ir import Mapping
from costmodels.protocol import Choice, Target
from workload.problem import Problem


def _same(value: Any, choice: Choice | float) -> bool:
    """JSON `value` is `choice` (true is not 1, 2.0 is not 2)."""
    if isinstance(choice, bool) or isinstance(value, bool):
        return isinstance(choice, bool) and isinstance(value, bool) and value == choice
    return type(value) is type(choice) and value == choice


def _show(choices: tuple[Choice, ...], limit: int = 40) -> str:
    shown = ", ".join(json.dumps(c) for c in choices[:limit])
    return shown + (f", ... ({len(choices)} in all)" if len(choices) > limit else "")


def _json_type(value: object) -> str:
    """The JSON kind of `value` (numpy scalars as their Python kind)."""
    if value is None:
        return "null"
    if isinstance(value, bool | np.bool_):
        return "boolean"
    if isinstance(value, numbers.Integral):
        return "integer"
    if isinstance(value, numbers.Real):
        return "number"
    kinds = {str: "string", list: "array", dict: "object"}
    return next((name for kind, name in kinds.items() if isinstance(value, kind)), type(value).__name__)


#: the largest whole number a knob point may give (a count or size far beyond any part's: refused before the target
#: sizes anything by it)
KNOB_INT_LIMIT = 1 << 31


def knob_mapping(target: Target, problem: Problem, point: dict[str, Any]) -> Mapping | None:
    """The mapping `target` builds from `point` read as its own knobs (a vendor's published configuration: Tensix's
    ``act_block_h`` and ``out_subblock`` where the space offers ranks of them), or None when it is not such a point.

    None for a point that names only parameters of the space (`resolve_point` checks them against their choices).
    Otherwise a 422 for a key that is no knob of the mappings the target builds, a value of another JSON kind than
    that knob's (true is not 1), a whole number beyond `KNOB_INT_LIMIT`, a parameter of the space whose value is not
    among its choices (only knobs the space does not offer as parameters range freely: a target sizes arrays by its
    parameters), a knob point the target cannot build, or one whose mapping would change a value given (a derived
    knob given another value). Whether the mapping is legal is `Target.check`'s to say."""
    space = target.space(problem)
    params = {p.name: p for p in space.params}
    if set(point) <= set(params):
        return None
    first = {p.name: p.choices[0] for p in space.params}
    knobs = guarded(target, "map", lambda: target.mapping(problem, first), what="point").knobs
    unknown = [k for k in point if k not in params and k not in knobs]
    if unknown:
        raise Unprocessable(
            f"point names {', '.join(repr(k) for k in unknown[:5])}, which {'is' if len(unknown) == 1 else 'are'} "
            f"neither a parameter of {target.name}'s space for this problem nor a knob of its mappings",
            field=f"point.{unknown[0]}",
            hint=f"parameters: {', '.join(params)}; or the knobs of its mappings: {', '.join(knobs)}",
            parameters=list(params),
        )
    for k, v in point.items():
        kind, wanted = _json_type(v), _json_type(knobs[k]) if k in knobs else None
        if wanted is not None and kind != wanted and (kind, wanted) != ("integer", "number"):
            raise Unprocessable(
                f"point.{k}={json.dumps(v)[:60]} is a JSON {kind}; {target.name}'s knob {k} takes a JSON {wanted} "
                f"(e.g. {json.dumps(knobs[k])})",
                field=f"point.{k}",
                hint=f"give {k} as a JSON {wanted}",
            )
        if kind == "integer" and abs(v) > KNOB_INT_LIMIT:
            raise Unprocessable(
                f"point.{k}={str(v)[:40]} is beyond any part's sizes (at most {KNOB_INT_LIMIT:,})",
                field=f"point.{k}",
                hint=f"give {k} as a result's mapping.knobs does",
            )
        param = params.get(k)
        if param is not None and not any(_same(v, c) for c in param.choices):
            raise Unprocessable(
                f"point.{k}={json.dumps(v)[:60]} is not among its choices: {_show(param.choices)} ({k} is a parameter "
                f"of {target.name}'s space; the knobs it does not offer as parameters may take other values)",
                field=f"point.{k}",
                hint=f"use one of {_show(param.choices)}",
                choices=list(param.choices),
            )
    try:
        mapping = target.mapping(problem, point)
    except KeyError as e:
        raise Unprocessable(
            f"the point gives {target.name}'s own knobs but not {e.args[0]!r}",
            field=f"point.{e.args[0]}",
            hint=f"give {e.args[0]} too: every knob of its mappings ({', '.join(knobs)}; a knob the others fix, such "
            "as a rank of one of them, may be left out)",
        ) from None
    except Exception as e:  # (a value the target cannot read: its own words)
        raise Unprocessable(
            f"target {target.name} cannot map this point of its knobs ({type(e).__name__}: {str(e)[:300]})",
            field="point",
            hint="give the knobs as a result's `mapping.knobs` does",
        ) from None
    changed = [k for k, v in point.items() if k not in mapping.knobs or not _same(v, mapping.knobs[k])]
    if changed:
        k = changed[0]
        derived = mapping.knobs.get(k)
        raise Unprocessable(
            f"point.{k}={json.dumps(point[k])[:60]} is not what {target.name} derives from the point's other knobs "
            f"({json.dumps(derived)[:60] if derived is not None else 'none'})",
            field=f"point.{k}",
            hint=f"leave {k} out: the target derives it",
        )
    return mapping


def resolve_point(target: Target, problem: Problem, point: dict[str, Any]) -> dict[str, Choice]:
    """The point with each value replaced by the space's own choice; 422 naming any parameter that is wrong."""
    space = target.space(problem)
    params = {p.name: p for p in space.params}
    for key in point:
        if key not in params:
            raise Unprocessable(
                f"point names {key!r}, which is neither a parameter of {target.name}'s space for this problem nor, "
                "with the point's other keys, a set of the target's own knobs",
                field=f"point.{key}",
                hint=f"parameters: {', '.join(params)}; or every knob of a mapping the target builds (the knobs of "
                "a result's `mapping`, e.g. from POST /v1/mappings/evaluate with a point of the space)",
                parameters=list(params),
            )
    missing = [k for k in params if k not in point]
    if missing:
        first = params[missing[0]]
        raise Unprocessable(
            f"point lacks parameter{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
            field=f"point.{first.name}",
            hint=f"give every parameter a value; {first.name} is one of {_show(first.choices)}",
            missing=missing,
        )
    out: dict[str, Choice] = {}
    for key, param in params.items():
        value = point[key]
        match = next((c for c in param.choices if _same(value, c)), None)
        if match is None:
            raise Unprocessable(
                f"point.{key}={json.dumps(value)} is not among its choices: {_show(param.choices)}",
                field=f"point.{key}",
                hint=f"use one of {_show(param.choices)}",
                choices=list(param.choices),
            )
        out[key] = match
    return out
