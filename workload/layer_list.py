"""Layer-list files: a network without ONNX, as problem specs in the README's request format.

A JSON or YAML document that is either a list of problem specs, or a mapping with ``layers`` (that
list) and an optional ``name``::

    name: my-net
    layers:
      - {kind: conv2d, label: stem, batch: 1, in_channels: 3, out_channels: 32, input_height: 224,
         input_width: 224, kernel: 3, stride: 2, padding: 1}
      - {kind: einsum, label: head, expr: "bk,kn->bn", sizes: {b: 1, k: 1280, n: 1000}, weight: 1}

Each spec is exactly what ``POST /v1/tunings`` takes as ``problem`` (and what an ONNX import
returns per layer), checked the same way: an error names the layer and the field. The text is
parsed with ``yaml.safe_load`` (JSON is YAML), after bounds on its size and nesting.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError

from workload.errors import ProblemError
from workload.imported import ImportedLayer, ImportedModel
from workload.spec import spec_from_dict

#: Largest layer-list document (bytes) and layer count, and how deep its lists and mappings may nest.
MAX_LAYER_LIST_BYTES = 16 << 20
MAX_LAYERS = 4096
MAX_NESTING = 32

HINT = 'a list of problem specs, or {"name": ..., "layers": [...]}; see the README, "Bring your own model"'


def _parse(text: str) -> Any:
    depth = deepest = 0
    for ch in text:  # bound the nesting before the parser recurses into it
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    if deepest > MAX_NESTING:
        raise ProblemError(f"the layer list nests more than {MAX_NESTING} levels deep", token="layers", hint=HINT)
    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise ProblemError("the layer list nests too deep", token="layers", hint=HINT) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        reason = getattr(e, "problem", None) or "syntax error"
        raise ProblemError(
            f"the layer list is not valid JSON or YAML{where}: {reason}", token="layers", hint=HINT
        ) from None


def load_layers(data: bytes | str, *, name: str = "layers") -> ImportedModel:
    """The layers of a layer-list document (see the module docstring).

    Args:
        data: the file's bytes (UTF-8) or text.
        name: the network's name when the document gives none (e.g. the file name).

    Raises:
        ProblemError: not JSON/YAML, too large, not a list of specs, or a spec that is malformed (the
            message names the layer by index and label, and the field).
    """
    if len(data) > MAX_LAYER_LIST_BYTES:
        raise ProblemError(
            f"the layer list has {len(data):,} bytes; at most {MAX_LAYER_LIST_BYTES:,} are read",
            token="layers",
            hint="split the network into several layer lists",
        )
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ProblemError(
                f"the layer list is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})",
                token="layers",
                hint="save it as UTF-8 JSON or YAML (an ONNX model goes to the ONNX import)",
            ) from None
    else:
        text = data
    doc = _parse(text)
    if isinstance(doc, dict) and "layers" in doc:
        extra = sorted(str(k) for k in doc if k not in ("name", "layers"))
        if extra:
            raise ProblemError(f"unknown key {extra[0]!r} in the layer list", token=extra[0], hint=HINT)
        if doc.get("name") is not None:
            if not isinstance(doc["name"], str) or not doc["name"].strip():
                raise ProblemError("the layer list's name must be a non-empty string", token="name", hint=HINT)
            name = doc["name"].strip()
        items = doc["layers"]
    elif isinstance(doc, dict):
        items = [doc]  # one problem
    else:
        items = doc
    if not isinstance(items, list) or not items:
        raise ProblemError("the layer list holds no layers", token="layers", hint=HINT)
    if len(items) > MAX_LAYERS:
        raise ProblemError(
            f"the layer list has {len(items)} layers; at most {MAX_LAYERS}", token="layers", hint="split the network"
        )
    layers = []
    for i, item in enumerate(items):
        label = item.get("label") if isinstance(item, dict) else None
        which = f"layer {i}" + (f" ({label})" if isinstance(label, str) and label else "")
        try:
            spec = spec_from_dict(item)
            spec.to_problem()  # the values too, not only the shape of the input
        except ProblemError as e:
            raise ProblemError(f"{which}: {e.message}", token=e.token or f"layers[{i}]", hint=e.hint) from None
        except ValidationError as e:  # a value the front-end passed on unchecked
            raise ProblemError(f"{which}: {e.errors()[0].get('msg', 'invalid')}", token=f"layers[{i}]") from None
        node = spec.label or f"layer{i}"
        spec = spec.model_copy(update={"label": f"{name}/{node}"})
        layers.append(ImportedLayer(index=i, node=node, op_type=spec.kind, problem=spec))
    return ImportedModel(name=name, source="layers", layers=layers)
