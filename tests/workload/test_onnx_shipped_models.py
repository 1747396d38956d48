"""ONNX models the `onnx` package ships with its backend tests (its wheel's ``onnx/backend/test/data``):
a real ResNet-50 graph, and PyTorch-exported layers with their recorded inputs and outputs."""

from __future__ import annotations

import re
from importlib import resources

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.workload.onnx_models import conv_inputs, conv_output
from workload import evaluate, import_onnx, load_workload
from workload.canonical import content_hash

DATA = resources.files("onnx").joinpath("backend", "test", "data")
PYTORCH = DATA.joinpath("pytorch-converted")
LAYER_CASES = sorted(d.name for d in PYTORCH.iterdir() if re.fullmatch(r"test_(Conv[123]d\w*|Linear\w*)", d.name))


def test_the_real_resnet50_graph_imports_as_the_named_resnet50_plus_its_classifier() -> None:
    """light_resnet50.onnx is the ResNet-50 graph with its weights replaced by ConstantOfShape nodes."""
    data = DATA.joinpath("light", "light_resnet50.onnx").read_bytes()
    net = import_onnx(data)
    assert net.name == "resnet50" and len(net.layers) == 54
    convs, (fc,) = net.problems()[:53], net.problems()[53:]
    named = load_workload("resnet50", batch=1, dtype="f32")  # the project's layer table, from the paper
    assert [content_hash(p) for p in convs] == [content_hash(p) for p in named]
    assert net.layers[53].op_type == "Gemm" and fc.axes == {"m": 1, "k": 2048, "n": 1000}
    assert net.skipped_counts["BatchNormalization"] == 53 and net.skipped_counts["Relu"] == 49
    assert len(net.layers) + len(net.skipped) == len(onnx.load_model_from_string(data).graph.node)


@pytest.mark.parametrize("model", sorted(p.name for p in DATA.joinpath("light").iterdir() if p.name.endswith(".onnx")))
def test_every_shipped_network_imports_and_accounts_for_every_node(model: str) -> None:
    data = DATA.joinpath("light", model).read_bytes()
    net = import_onnx(data)
    nodes = onnx.load_model_from_string(data).graph.node
    assert len(net.layers) + len(net.skipped) == len(nodes)
    convs = sum(n.op_type == "Conv" for n in nodes)
    assert sum(layer.op_type == "Conv" for layer in net.layers) == convs > 0
    assert all(p.macs > 0 for p in net.problems())


@pytest.mark.parametrize("case", LAYER_CASES)
def test_a_pytorch_exported_layer_computes_its_recorded_output(case: str) -> None:
    folder = PYTORCH.joinpath(case)
    data = folder.joinpath("model.onnx").read_bytes()
    graph = onnx.load_model_from_string(data).graph
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in graph.initializer}
    x = numpy_helper.to_array(
        onnx.load_tensor_from_string(folder.joinpath("test_data_set_0", "input_0.pb").read_bytes())
    )
    want = numpy_helper.to_array(
        onnx.load_tensor_from_string(folder.joinpath("test_data_set_0", "output_0.pb").read_bytes())
    )
    for n in graph.node:  # a weight transposed in the graph (an exported Linear without bias)
        if n.op_type == "Transpose" and n.input[0] in weights:
            weights[n.output[0]] = weights[n.input[0]].transpose(list(n.attribute[0].ints))
    net = import_onnx(data)
    (layer,) = net.layers
    (node,) = [n for n in graph.node if n.op_type == layer.op_type]
    p = layer.problem.to_problem()
    bias = weights.get(node.input[2]) if len(node.input) > 2 else None
    if layer.op_type == "Conv":
        groups = p.axes["g"]
        got = conv_output(evaluate(p, conv_inputs(x.astype(np.float64), weights[node.input[1]], groups)))
        if bias is not None:
            got = got + bias.reshape(1, -1, *[1] * (got.ndim - 2))
    else:
        a, b = weights.get(node.input[0], x), weights.get(node.input[1], x)
        got = evaluate(p, [a, b]) + (bias if bias is not None else 0)
    assert got.shape == want.shape
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4)
