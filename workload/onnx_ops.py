"""The ONNX operators the import converts, one converter per operator kind (`workload.onnx_import`).

Each converter reads one node of the shape-inferred graph (`Graph`) and returns its problem spec
and notes, or raises `Skip` with the reason the node is not imported. The operator semantics,
layouts and dtype mapping are described in `workload.onnx_import`'s docstring; `CONVERTERS` maps an
``op_type`` to its converter.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import TensorProto, helper

from workload.problem import ReduceOp
from workload.spec import Conv2dSpec, EinsumSpec

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
