"""The problem model: einsum and conv2d problems, their canonical form, reference evaluation, named workloads.

>>> from workload import einsum
>>> p = einsum("mk,kn->mn", {"m": 64, "k": 32, "n": 16})
>>> p.macs
32768

A network of your own: an ONNX model (`import_onnx`) or a layer list of problem specs (`load_layers`):

>>> from onnx import TensorProto, helper
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])
>>> w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [64, 32])
>>> fc = helper.make_node("MatMul", ["x", "w"], ["h"], name="fc")
>>> act = helper.make_node("Relu", ["h"], ["y"])
>>> onnx_model = helper.make_model(helper.make_graph([fc, act], "mlp", [x, w], [y]))
>>> net = import_onnx(onnx_model.SerializeToString(), params={"batch": 16})
>>> [(layer.node, layer.problem.expr) for layer in net.layers], net.skipped_counts
([('fc', 'A[m, k], B[k, n] -> Y[m, n]')], {'Relu': 1})
>>> net.problems()[0].axes
{'m': 16, 'k': 64, 'n': 32}
>>> load_layers('[{"label": "fc", "expr": "mk,kn->mn", "sizes": {"m": 16, "k": 64, "n": 32}}]').problems()[0].label
'layers/fc'
"""

from workload.canonical import canonical_form, content_hash
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.imported import ImportedLayer, ImportedModel, SkippedNode
from workload.layer_list import load_layers
from workload.named import load as load_workload
from workload.named import names as workload_names
from workload.onnx_import import import_onnx
from workload.problem import Problem
from workload.reference import evaluate, random_inputs
from workload.spec import Conv2dSpec, EinsumSpec, problem_from_dict

__all__ = [
    "Conv2dSpec",
    "EinsumSpec",
    "ImportedLayer",
    "ImportedModel",
    "Problem",
    "ProblemError",
    "SkippedNode",
    "canonical_form",
    "content_hash",
    "conv2d",
    "einsum",
    "evaluate",
    "import_onnx",
    "load_layers",
    "load_workload",
    "problem_from_dict",
    "random_inputs",
    "workload_names",
]
