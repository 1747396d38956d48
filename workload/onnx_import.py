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
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

from workload.errors import ProblemError
from workload.imported import ImportedLayer, ImportedModel, SkippedNode
from workload.problem import MAX_AXIS_SIZE, ReduceOp
from workload.spec import Conv2dSpec, EinsumSpec

#: Largest model file read (the service has its own, smaller limit: TM_MAX_MODEL_BYTES). Protobuf
#: itself refuses messages over 2 GiB.
MAX_MODEL_BYTES = 1 << 30
#: Most nodes in the main graph.
MAX_NODES = 100_000

DTYPES: dict[int, str] = {
    TensorProto.FLOAT: "f32",
    TensorProto.FLOAT16: "f16",
    TensorProto.BFLOAT16: "bf16",
    TensorProto.INT8: "i8",
    TensorProto.INT32: "i32",
    TensorProto.INT4: "i4",
    TensorProto.FLOAT8E4M3FN: "f8e4m3",
    TensorProto.FLOAT8E5M2: "f8e5m2",
}

REDUCE_OPS: dict[str, ReduceOp] = {
    "ReduceSum": "add",
    "ReduceMean": "add",
    "ReduceMax": "max",
    "ReduceMin": "min",
    "ReduceProd": "mul",
}

PARAM_HINT = (
    "give it at import: --param {name}=<size> (CLI), params={{'{name}': <size>}} (Python), "
    "?param={name}=<size> (service)"
)


class Skip(Exception):
    """This node is not imported; the message says why."""


@dataclass
class Graph:
    """What the converters read of the shape-inferred graph."""

    types: dict[str, tuple[int, tuple[int | str | None, ...] | None]]  # name -> (elem type, dims)
    constants: dict[str, Any] = field(default_factory=dict)  # name -> numpy value (small int tensors only)
    initializers: set[str] = field(default_factory=set)

    def shape(self, name: str) -> tuple[int, ...]:
        if name not in self.types or self.types[name][1] is None:
            raise Skip(f"the shape of {name!r} is not known after shape inference")
        dims = self.types[name][1]
        assert dims is not None
        for d in dims:
            if not isinstance(d, int):
                what = f"dimension {d!r}" if isinstance(d, str) else "a dimension"
                raise Skip(f"{what} of {name!r} is not known after shape inference")
        return tuple(int(d) for d in dims)  # type: ignore[arg-type]  # every d is an int, checked above

    def dtype(self, name: str) -> str:
        if name not in self.types:
            raise Skip(f"the element type of {name!r} is not known after shape inference")
        elem = self.types[name][0]
        if elem not in DTYPES:
            kind = TensorProto.DataType.Name(elem) if elem in TensorProto.DataType.values() else str(elem)
            raise Skip(
                f"{name!r} has element type {kind}, which no target models "
                f"(imported types: {', '.join(TensorProto.DataType.Name(t) for t in DTYPES)})"
            )
        return DTYPES[elem]


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _decode(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


# ---- converters: node -> (spec, notes) ---------------------------------------------------------


def _conv_pads(
    attrs: dict[str, Any], ins: tuple[int, ...], ks: tuple[int, ...], ss: tuple[int, ...], ds: tuple[int, ...]
) -> list[tuple[int, int]]:
    """Per spatial dimension (begin, end) pads, from ``pads`` or ``auto_pad`` (ONNX Conv)."""
    rank = len(ins)
    auto = _decode(attrs.get("auto_pad", "NOTSET"))
    if auto in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0] * (2 * rank)))
        if len(pads) != 2 * rank:
            raise Skip(f"pads has {len(pads)} values for {rank} spatial dimensions")
        return [(int(pads[i]), int(pads[i + rank])) for i in range(rank)]
    if auto == "VALID":
        return [(0, 0)] * rank
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for i, k, s, d in zip(ins, ks, ss, ds, strict=True):
            total = max(0, (math.ceil(i / s) - 1) * s + (k - 1) * d + 1 - i)
            small, big = total // 2, total - total // 2
            out.append((small, big) if auto == "SAME_UPPER" else (big, small))
        return out
    raise Skip(f"unknown auto_pad {auto!r}")


def _conv(node: onnx.NodeProto, g: Graph, label: str) -> tuple[EinsumSpec | Conv2dSpec, list[str]]:
    xs, ws, ys = g.shape(node.input[0]), g.shape(node.input[1]), g.shape(node.output[0])
    xdt, wdt, ydt = g.dtype(node.input[0]), g.dtype(node.input[1]), g.dtype(node.output[0])
    rank = len(xs) - 2
    if rank not in (1, 2, 3) or len(ws) != rank + 2:
        raise Skip(f"a Conv of input rank {len(xs)} (1-D, 2-D and 3-D convs are imported)")
    attrs = _attrs(node)
    n, c, ins = xs[0], xs[1], xs[2:]
    m, cig, ks = ws[0], ws[1], ws[2:]
    groups = int(attrs.get("group", 1))
    ss = tuple(int(v) for v in attrs.get("strides", [1] * rank))
    ds = tuple(int(v) for v in attrs.get("dilations", [1] * rank))
    if "kernel_shape" in attrs and tuple(attrs["kernel_shape"]) != ks:
        raise Skip(f"kernel_shape {list(attrs['kernel_shape'])} differs from the weight's {list(ks)}")
    if len(ss) != rank or len(ds) != rank:
        raise Skip("strides or dilations do not have one value per spatial dimension")
    if groups < 1 or c % groups or m % groups or c // groups != cig:
        raise Skip(f"group={groups} does not match {c} input channels, {m} output channels and weight {list(ws)}")
    pads = _conv_pads(attrs, ins, ks, ss, ds)
    outs = tuple(
        (i + lo + hi - d * (k - 1) - 1) // s + 1 for i, (lo, hi), k, s, d in zip(ins, pads, ks, ss, ds, strict=True)
    )
    if (n, m, *outs) != ys:
        raise Skip(f"the output shape {list(ys)} differs from the conv formula's {[n, m, *outs]}")
    notes = ["NHWC activations and [Kh, Kw, Ci, Co] weights (the project's conv layout; the file's is NCHW)"]
    if len(node.input) > 2 and node.input[2]:
        notes.append("bias B left out: an elementwise add after the contraction")
    if rank == 2 and all(lo == hi for lo, hi in pads):
        spec: EinsumSpec | Conv2dSpec = Conv2dSpec(
            batch=n, in_channels=c, out_channels=m, input_height=ins[0], input_width=ins[1], kernel=(ks[0], ks[1]),
            stride=(ss[0], ss[1]), padding=(pads[0][0], pads[1][0]), dilation=(ds[0], ds[1]), groups=groups,
            dtype=xdt, weights_dtype=wdt, out_dtype=ydt, label=label,
        )  # fmt: skip
        return spec, notes
    names = {1: ("w",), 2: ("h", "w"), 3: ("d", "h", "w")}[rank]
    xdims, xpad = ["n"], [[0, 0]]
    for nm, i, (lo, _hi), k, s, d, o in zip(names, ins, pads, ks, ss, ds, outs, strict=True):
        terms = [f"o{nm}:{s}" if s != 1 else f"o{nm}", f"f{nm}:{d}" if d != 1 else f"f{nm}"]
        xdims.append(" + ".join(terms))
        extent = (o - 1) * s + (k - 1) * d + 1
        xpad.append([lo, extent - lo - i])  # the high side: what the last window reads past the data
    xdims += ["g", "ci"]
    xpad += [[0, 0], [0, 0]]
    expr = (
        f"X[{', '.join(xdims)}], W[{', '.join('f' + nm for nm in names)}, g, ci, co] "
        f"-> Y[n, {', '.join('o' + nm for nm in names)}, g, co]"
    )
    sizes = {"n": n, **{f"o{nm}": o for nm, o in zip(names, outs, strict=True)}}
    sizes.update({f"f{nm}": k for nm, k in zip(names, ks, strict=True)})
    sizes.update({"g": groups, "ci": cig, "co": m // groups})
    if any(lo != hi for lo, hi in pads):
        notes.append(f"asymmetric pads {[list(p) for p in pads]} kept per side as explicit zero padding")
    padded = any(lo or hi for lo, hi in xpad)
    spec = EinsumSpec(
        expr=expr, sizes=sizes, dtype={"X": xdt, "W": wdt}, out_dtype=ydt, weight="W",
        pad={"X": [(lo, hi) for lo, hi in xpad]} if padded else None, label=label,
    )  # fmt: skip
    return spec, notes


def _weight(node: onnx.NodeProto, g: Graph, indices: Iterable[int]) -> int:
    """The stationary input: a constant (initializer) one, else the second (as the named workloads do)."""
    consts = [i for i in indices if node.input[i] in g.initializers]
    return consts[0] if len(consts) == 1 else 1


def _matmul(node: onnx.NodeProto, g: Graph, label: str) -> tuple[EinsumSpec, list[str]]:
    a, b = g.shape(node.input[0]), g.shape(node.input[1])
    adt, bdt, ydt = g.dtype(node.input[0]), g.dtype(node.input[1]), g.dtype(node.output[0])
    if not a or not b:
        raise Skip("a MatMul of a scalar")
    notes: list[str] = []
    if len(a) == 1:
        a_dims, a_core = ["k"], {"k": a[0]}
    else:
        a_dims, a_core = ["m", "k"], {"m": a[-2], "k": a[-1]}
    if len(b) == 1:
        b_dims, b_core = ["k"], {"k": b[0]}
    else:
        b_dims, b_core = ["k", "n"], {"k": b[-2], "n": b[-1]}
    if a_core["k"] != b_core["k"]:
        raise Skip(f"inner dimensions differ: {list(a)} @ {list(b)}")
    sizes = {**a_core, **b_core}
    abatch, bbatch = a[:-2] if len(a) > 1 else (), b[:-2] if len(b) > 1 else ()
    nb = max(len(abatch), len(bbatch))
    a_names: list[str] = []
    b_names: list[str] = []
    y_names: list[str] = []
    dropped = False
    for j in range(nb):
        sa = abatch[j - (nb - len(abatch))] if j >= nb - len(abatch) else None
        sb = bbatch[j - (nb - len(bbatch))] if j >= nb - len(bbatch) else None
        name = f"b{j}"
        size = max(s for s in (sa, sb) if s is not None)
        if sa is not None and sb is not None and sa != sb and 1 not in (sa, sb):
            raise Skip(f"batch dimensions {list(abatch)} and {list(bbatch)} do not broadcast")
        sizes[name] = size
        y_names.append(name)
        if sa is not None:
            if sa == size:
                a_names.append(name)
            else:
                dropped = True
        if sb is not None:
            if sb == size:
                b_names.append(name)
            else:
                dropped = True
    if dropped:
        notes.append("unit batch dimensions that broadcast are dropped from the operand that has them")
    y_names += [d for d in ("m", "n") if d in sizes]
    expr = f"A[{', '.join(a_names + a_dims)}], B[{', '.join(b_names + b_dims)}] -> Y[{', '.join(y_names)}]"
    spec = EinsumSpec(
        expr=expr, sizes=sizes, dtype={"A": adt, "B": bdt}, out_dtype=ydt, weight=_weight(node, g, (0, 1)), label=label
    )
    return spec, notes


def _gemm(node: onnx.NodeProto, g: Graph, label: str) -> tuple[EinsumSpec, list[str]]:
    a, b = g.shape(node.input[0]), g.shape(node.input[1])
    attrs = _attrs(node)
    ta, tb = int(attrs.get("transA", 0)), int(attrs.get("transB", 0))
    if len(a) != 2 or len(b) != 2:
        raise Skip(f"Gemm inputs must be matrices, got {list(a)} and {list(b)}")
    m, k = (a[1], a[0]) if ta else (a[0], a[1])
    k2, n = (b[1], b[0]) if tb else (b[0], b[1])
    if k != k2:
        raise Skip(f"inner dimensions differ: {list(a)} (transA={ta}) and {list(b)} (transB={tb})")
    notes = []
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        notes.append(f"alpha={alpha:g} left out: an elementwise scale of the product")
    if len(node.input) > 2 and node.input[2]:
        notes.append(f"C (beta={beta:g}) left out: an elementwise add after the contraction")
    expr = f"A[{'k, m' if ta else 'm, k'}], B[{'n, k' if tb else 'k, n'}] -> Y[m, n]"
    spec = EinsumSpec(
        expr=expr, sizes={"m": m, "k": k, "n": n},
        dtype={"A": g.dtype(node.input[0]), "B": g.dtype(node.input[1])}, out_dtype=g.dtype(node.output[0]),
        weight=_weight(node, g, (0, 1)), label=label,
    )  # fmt: skip
    return spec, notes


def _einsum(node: onnx.NodeProto, g: Graph, label: str) -> tuple[EinsumSpec, list[str]]:
    if len(node.input) not in (1, 2):
        raise Skip(f"an Einsum of {len(node.input)} inputs (a problem has one or two)")
    eq = str(_decode(_attrs(node).get("equation", ""))).replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(node.input):
        raise Skip(f"equation {eq!r} has {len(terms)} operands for {len(node.input)} inputs")
    shapes = [g.shape(i) for i in node.input]
    ell_rank = max(
        (len(s) - len(t.replace("...", "")) for s, t in zip(shapes, terms, strict=True) if "..." in t), default=0
    )
    ell = [f"e{j}" for j in range(ell_rank)]
    sizes: dict[str, int] = {}
    operands: list[list[str]] = []
    for s, t in zip(shapes, terms, strict=True):
        head, _, tail = t.partition("...")
        names = list(head) + (ell[ell_rank - (len(s) - len(head) - len(tail)) :] if "..." in t else []) + list(tail)
        if len(names) != len(s) or not all(ch.isalpha() for ch in head + tail):
            raise Skip(f"equation term {t!r} does not match an input of shape {list(s)}")
        if len(set(names)) != len(names):
            raise Skip(f"equation term {t!r} repeats an index (a diagonal)")
        for nm, size in zip(names, s, strict=True):
            if sizes.setdefault(nm, size) != size:
                raise Skip(f"index {nm} has sizes {sizes[nm]} and {size} (broadcasting is not imported)")
        operands.append(names)
    if arrow:
        head, _, tail = rhs.partition("...")
        out = list(head) + (ell if "..." in rhs else []) + list(tail)
    else:  # implicit output: the ellipsis, then the indices used once, sorted
        once = sorted(ch for ch in sizes if ch not in ell and sum(op.count(ch) for op in operands) == 1)
        out = ell + once
    if any(o not in sizes for o in out) or len(set(out)) != len(out):
        raise Skip(f"equation {eq!r} has an output index that is in no input, or twice")
    names = ["A", "B"][: len(operands)]
    expr = ", ".join(f"{nm}[{', '.join(op)}]" for nm, op in zip(names, operands, strict=True))
    expr += f" -> Y[{', '.join(out)}]"
    spec = EinsumSpec(
        expr=expr, sizes=sizes, dtype={nm: g.dtype(i) for nm, i in zip(names, node.input, strict=True)},
        out_dtype=g.dtype(node.output[0]), weight=_weight(node, g, (0, 1)) if len(names) == 2 else None, label=label,
    )  # fmt: skip
    return spec, []


def _reduce(node: onnx.NodeProto, g: Graph, label: str) -> tuple[EinsumSpec, list[str]]:
    shape = g.shape(node.input[0])
    attrs = _attrs(node)
    if "axes" in attrs:
        axes = [int(v) for v in attrs["axes"]]
    elif len(node.input) > 1 and node.input[1]:
        if node.input[1] not in g.constants:
            raise Skip("its axes input is not a constant")
        axes = [int(v) for v in g.constants[node.input[1]].reshape(-1)]
    else:
        axes = []
    if not shape:
        raise Skip("a reduction of a scalar")
    if not axes:
        if int(attrs.get("noop_with_empty_axes", 0)):
            raise Skip("no axes and noop_with_empty_axes: nothing is reduced")
        axes = list(range(len(shape)))
    rank = len(shape)
    if any(not -rank <= a < rank for a in axes):
        raise Skip(f"axes {axes} out of range for rank {rank}")
    reduced = {a % rank for a in axes}
    names = [f"d{j}" for j in range(rank)]
    kept = [nm for j, nm in enumerate(names) if j not in reduced]
    notes = []
    if node.op_type == "ReduceMean":
        notes.append("ReduceMean imported as a sum: the division by the count is an elementwise scale")
    if int(attrs.get("keepdims", 1)) and kept != names:
        notes.append("keepdims: the output's unit dimensions are dropped (a reshape)")
    spec = EinsumSpec(
        expr=f"X[{', '.join(names)}] -> Y[{', '.join(kept)}]", sizes=dict(zip(names, shape, strict=True)),
        dtype={"X": g.dtype(node.input[0])}, out_dtype=g.dtype(node.output[0]), reduce_op=REDUCE_OPS[node.op_type],
        label=label,
    )  # fmt: skip
    return spec, notes


CONVERTERS = {"Conv": _conv, "MatMul": _matmul, "Gemm": _gemm, "Einsum": _einsum, **dict.fromkeys(REDUCE_OPS, _reduce)}


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
