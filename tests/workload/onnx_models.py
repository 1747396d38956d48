"""Tiny ONNX models the tests build with `onnx.helper` (no file from outside), and the layout conversions
between ONNX's tensors and the imported problems' operands."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # what onnxruntime reads; the opset's operators are the same


def model(
    nodes: list[onnx.NodeProto],
    inputs: list[tuple[str, int, list[Any]]],
    outputs: list[tuple[str, int, list[Any] | None]],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = OPSET,
    name: str = "tiny",
) -> bytes:
    """A model's bytes: graph inputs and outputs as (name, element type, shape), weights as initializers."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=[numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = IR_VERSION
    return m.SerializeToString()


def run_onnxruntime(data: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """The model's own outputs computed by onnxruntime (None where it is not installed)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in sess.run(None, feeds)]


def conv_inputs(x: np.ndarray, w: np.ndarray, groups: int) -> list[np.ndarray]:
    """ONNX conv tensors (X NC..., W [M, C/g, k...]) in the imported problem's layout.

    That is X[n, ..., g, ci] and W[k..., g, ci, co].
    """
    n, c, *spatial = x.shape
    m, cig, *ks = w.shape
    rank = len(spatial)
    xs = np.moveaxis(x, 1, -1).reshape(n, *spatial, groups, c // groups)
    ws = w.reshape(groups, m // groups, cig, *ks)  # (g, co, ci, k...)
    ws = np.transpose(ws, (*range(3, 3 + rank), 0, 2, 1))  # (k..., g, ci, co)
    return [xs, ws]


def conv_output(y: np.ndarray) -> np.ndarray:
    """The problem's Y[n, o..., g, co] in ONNX's N C O... layout."""
    n, *rest = y.shape
    spatial, g, co = rest[:-2], rest[-2], rest[-1]
    return np.moveaxis(y.reshape(n, *spatial, g * co), -1, 1)


FLOAT = TensorProto.FLOAT
