"""ONNX import: every Conv, MatMul, Gemm, Einsum and reduction node of a model becomes a problem.

The file is parsed as an ONNX protobuf (``onnx.ModelProto``), checked with ``onnx.checker``, its
dynamic dimensions are set from ``params`` and its shapes inferred with
``onnx.shape_inference.infer_shapes`` (strict, with data propagation). Nothing in the file is
executed, no external-data file is read (an initializer stored outside the file keeps its
declared shape and is never opened), and nested graphs (If, Loop, Scan bodies) are not entered.

Operators (ONNX operator specification, https://onnx.ai/onnx/operators/):

- ``Conv`` (1-D, 2-D, 3-D; strides, dilations, pads, auto_pad, group): a 2-D conv whose pads are
  equal on both sides of each spatial dimension is a ``conv2d`` spec, like the named workloads'
  convs. Other convs (asymmetric pads, 1-D, 3-D) are a structured einsum with the same axis
  layout (``n, o*, f*, g, ci, co``) and each side's pad given explicitly, so asymmetric pads are
  imported exactly: ``X[n, oh:sh + fh:dh, ow:sw + fw:dw, g, ci]`` with ``pad`` ``[lo, hi]`` per
  dimension as the file declares it (the high side trimmed to what the last window reads). The
  bias input ``B`` is an elementwise add after the contraction and is left out (noted).
- ``MatMul`` (numpy matmul semantics, broadcast batch dimensions), ``Gemm`` (``transA`` and
  ``transB`` give the operand's stored layout; ``alpha``, ``beta`` and ``C`` are an elementwise
  scale and add, left out with a note), ``Einsum`` (one or two inputs, ``...`` expanded).
- ``ReduceSum``, ``ReduceMax``, ``ReduceMin``, ``ReduceProd`` (reduce op add, max, min, mul) and
  ``ReduceMean`` (a sum: the division by the count is an elementwise scale, noted); ``axes`` from
  the attribute or a constant input; ``keepdims`` only reshapes the output (its unit dimensions
  are dropped).

Layouts: activations of a conv use the project's NHWC layout and its weights ``[Kh, Kw, Ci, Co]``
(ttnn's, see `workload.conv2d`) rather than ONNX's NCHW and ``[Co, Ci, Kh, Kw]``: the layout of a
tensor in the accelerator's memory is part of the mapping; sizes, strides, dilations, pads,
groups, dtypes and MACs are the file's. MatMul, Gemm, Einsum and reductions keep the file's layout.

Element types map to the project's dtypes (FLOAT f32, FLOAT16 f16, BFLOAT16 bf16, INT8 i8, INT32
i32, INT4 i4, FLOAT8E4M3FN f8e4m3, FLOAT8E5M2 f8e5m2); a node with any other type (DOUBLE, INT64,
UINT8, ...) is skipped, the reason naming the type. Every other operator is skipped with its kind.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

from workload.errors import ProblemError
from workload.imported import ImportedLayer, ImportedModel, SkippedNode
from workload.onnx_ops import CONVERTERS, Graph, Skip
from workload.problem import MAX_AXIS_SIZE

#: Largest model file read (the service has its own, smaller limit: TM_MAX_MODEL_BYTES). Protobuf
#: itself refuses messages over 2 GiB.
MAX_MODEL_BYTES = 1 << 30
#: Most nodes in the main graph.
MAX_NODES = 100_000

PARAM_HINT = (
    "give it at import: --param {name}=<size> (CLI), params={{'{name}': <size>}} (Python), "
    "?param={name}=<size> (service)"
)


# ---- the model ---------------------------------------------------------------------------------


def _parse(data: bytes) -> onnx.ModelProto:
    if len(data) > MAX_MODEL_BYTES:
        raise ProblemError(
            f"the model has {len(data):,} bytes; at most {MAX_MODEL_BYTES:,} are read",
            token="model",
            hint="export the model with its weights as external data: only the graph is needed",
        )
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise ProblemError(
            f"the file is not an ONNX model (protobuf decoding failed: {str(e)[:200]})",
            token="model",
            hint="send a .onnx file saved by onnx.save or torch.onnx.export; a layer list is JSON or YAML",
        ) from None
    if not model.HasField("graph") or not model.ir_version or not model.opset_import:
        raise ProblemError(
            "the file is not an ONNX model (no graph, IR version or opset)",
            token="model",
            hint="send a .onnx file saved by onnx.save or torch.onnx.export; a layer list is JSON or YAML",
        )
    if len(model.graph.node) > MAX_NODES:
        raise ProblemError(f"the model has {len(model.graph.node):,} nodes; at most {MAX_NODES:,}", token="model")
    return model


def _detach_external(model: onnx.ModelProto) -> set[str]:
    """Initializers stored in external files become typed graph inputs (their data is never read)."""
    graph = model.graph
    moved: set[str] = set()
    keep = []
    for init in graph.initializer:
        if init.data_location == TensorProto.EXTERNAL:
            graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
            moved.add(init.name)
        else:
            keep.append(init)
    if moved:
        del graph.initializer[:]
        graph.initializer.extend(keep)
    return moved


def _set_params(model: onnx.ModelProto, params: dict[str, int]) -> None:
    """Replace every dynamic dimension of the graph's inputs by its given size (and say which are missing)."""
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    wanted: dict[str, str] = {}  # dim_param -> first input that has it
    for vi in graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param:
                wanted.setdefault(d.dim_param, vi.name)
    for name, size in params.items():
        if name not in wanted:
            dyn = ", ".join(sorted(wanted)) or "none"
            raise ProblemError(
                f"the model has no dynamic dimension {name!r}",
                token=name,
                hint=f"its dynamic dimensions: {dyn}",
            )
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_AXIS_SIZE:
            raise ProblemError(
                f"dynamic dimension {name}={size!r} is not an integer in [1, {MAX_AXIS_SIZE}]", token=name,
                hint=f"e.g. {name}=16",
            )  # fmt: skip
    for name, where in wanted.items():
        if name not in params:
            raise ProblemError(
                f"dynamic dimension {name!r} (of input {where!r}) is not given",
                token=name,
                hint=PARAM_HINT.format(name=name),
            )
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if not vi.type.HasField("tensor_type"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in params:
                d.dim_value = params[d.dim_param]  # clears dim_param (a oneof)
    for vi in graph.input:  # an input dim without value or name: unknown, say so
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        for j, d in enumerate(vi.type.tensor_type.shape.dim):
            if not d.HasField("dim_value") and not d.HasField("dim_param"):
                raise ProblemError(
                    f"dimension {j} of input {vi.name!r} has neither a size nor a name",
                    token=vi.name,
                    hint="export the model with a fixed or named dimension there",
                )


def _graph(model: onnx.ModelProto, external: set[str]) -> Graph:
    types: dict[str, tuple[int, tuple[int | str | None, ...] | None]] = {}
    graph = model.graph
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None:
            continue
        dims: tuple[int | str | None, ...] | None = None
        if tt.HasField("shape"):
            dims = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param if d.HasField("dim_param") else None)
                for d in tt.shape.dim
            )
        types[vi.name] = (tt.elem_type, dims)
    constants: dict[str, Any] = {}
    for init in graph.initializer:
        types[init.name] = (init.data_type, tuple(init.dims))
        if init.data_type in (TensorProto.INT64, TensorProto.INT32) and math.prod(init.dims) <= 64:
            constants[init.name] = numpy_helper.to_array(init)
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
            attrs = {a.name: a for a in node.attribute}
            if "value" in attrs and math.prod(attrs["value"].t.dims) <= 64:
                constants[node.output[0]] = numpy_helper.to_array(attrs["value"].t)
            elif "value_ints" in attrs:
                constants[node.output[0]] = np.array(list(attrs["value_ints"].ints))
    return Graph(types=types, constants=constants, initializers={i.name for i in graph.initializer} | external)


def _check(model: onnx.ModelProto) -> onnx.ModelProto:
    """``onnx.checker`` then strict shape inference; their failures as `ProblemError`."""
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        raise ProblemError(
            f"the ONNX model is invalid: {first}", token="model", hint="fix the export (onnx.checker.check_model)"
        ) from None
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, ValueError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        raise ProblemError(
            f"shape inference failed on the model: {first}",
            token="model",
            hint="check the model with onnx.shape_inference.infer_shapes(model, strict_mode=True)",
        ) from None


def import_onnx(
    data: bytes, *, params: dict[str, int] | None = None, name: str = "", ops: Collection[str] | None = None
) -> ImportedModel:
    """The Conv, MatMul, Gemm, Einsum and reduction nodes of an ONNX model as problems (module docstring).

    Args:
        data: the ``.onnx`` file's bytes.
        params: a size for every dynamic dimension (``dim_param``) of the graph's inputs, e.g. ``{"batch": 16}``.
        name: the network's name (default: the graph's name).
        ops: import only nodes of these operator types (e.g. ``{"Conv", "MatMul"}``); the others are skipped.

    Raises:
        ProblemError: not an ONNX model, too large, invalid (checker), shapes that cannot be inferred, a
            dynamic dimension not given (naming it and how to give it) or one the model does not have.
    """
    params = dict(params or {})
    if ops is not None:
        unknown = sorted(set(ops) - set(CONVERTERS))
        if unknown:
            raise ProblemError(
                f"operator {unknown[0]!r} is not one the import turns into problems",
                token=unknown[0],
                hint=f"choose among {', '.join(CONVERTERS)}",
            )
    model = _parse(data)
    external = _detach_external(model)
    _set_params(model, params)
    inferred = _check(model)
    g = _graph(inferred, external)
    name = name or inferred.graph.name or "model"
    layers: list[ImportedLayer] = []
    skipped: list[SkippedNode] = []
    seen: dict[str, int] = {}
    for i, node in enumerate(inferred.graph.node):
        node_name = node.name or f"{node.op_type}_{i}"
        if node_name in seen:
            node_name = f"{node_name}#{i}"
        seen[node_name] = i
        convert = CONVERTERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if convert is not None and ops is not None and node.op_type not in ops:
            skipped.append(SkippedNode(node=node_name, op_type=node.op_type, reason=f"not among ops {sorted(ops)}"))
            continue
        if convert is None:
            where = f" (domain {node.domain})" if node.domain not in ("", "ai.onnx") else ""
            skipped.append(
                SkippedNode(node=node_name, op_type=node.op_type, reason=f"not a contraction or reduction{where}")
            )
            continue
        try:
            spec, notes = convert(node, g, f"{name}/{node_name}")
            spec.to_problem()  # the problem model's own checks (limits, padding with a max reduction...)
        except Skip as e:
            skipped.append(SkippedNode(node=node_name, op_type=node.op_type, reason=str(e)))
            continue
        except ProblemError as e:
            skipped.append(SkippedNode(node=node_name, op_type=node.op_type, reason=f"not a valid problem: {e}"))
            continue
        layers.append(ImportedLayer(index=len(layers), node=node_name, op_type=node.op_type, problem=spec, notes=notes))
    notes = []
    if external:
        notes.append(
            f"{len(external)} initializers stored as external data: their shapes are used, their data never read"
        )
    opset = next((o.version for o in inferred.opset_import if o.domain in ("", "ai.onnx")), None)
    notes.append(f"opset {opset}, IR version {inferred.ir_version}")
    return ImportedModel(name=name, source="onnx", params=params, layers=layers, skipped=skipped, notes=notes)
