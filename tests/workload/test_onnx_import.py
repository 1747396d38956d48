"""ONNX import: each imported problem computes what its node computes (onnxruntime's output, or numpy's
rendering of the operator's definition in the ONNX operator specification), with the file's shapes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.workload.onnx_models import FLOAT, conv_inputs, conv_output, model, run_onnxruntime
from workload import ProblemError, evaluate, import_onnx
from workload.onnx_import import MAX_NODES

RNG = np.random.default_rng(15)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def expected(data: bytes, feeds: dict[str, np.ndarray], fallback: np.ndarray) -> np.ndarray:
    """onnxruntime's output where it is installed, else numpy's rendering of the operator."""
    out = run_onnxruntime(data, feeds)
    return fallback if out is None else out[0]


def test_conv_stride_groups_symmetric_pads_is_a_conv2d_that_computes_the_node() -> None:
    x, w = rand(2, 4, 9, 8), rand(6, 2, 3, 3)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_a", strides=[2, 1], pads=[1, 1, 1, 1], group=2)
    data = model([node], [("x", FLOAT, [2, 4, 9, 8])], [("y", FLOAT, [2, 6, 5, 8])], {"w": w})
    m = import_onnx(data, name="net")
    (layer,) = m.layers
    spec = layer.problem
    assert layer.node == "conv_a" and spec.kind == "conv2d" and spec.label == "net/conv_a"
    assert (spec.stride, spec.padding, spec.groups, spec.input_height) == ((2, 1), (1, 1), 2, 9)
    p = m.problems()[0]
    assert p.macs == 2 * 5 * 8 * 3 * 3 * 6 * 2  # n*oh*ow*kh*kw*co*ci_per_group
    ours = conv_output(evaluate(p, conv_inputs(x, w, 2)))
    # numpy rendering of ONNX Conv for the fallback: zero-pad, then per output pixel a grouped dot product
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, 6, 5, 8), np.float64)
    for oh in range(5):
        for ow in range(8):
            win = xp[:, :, 2 * oh : 2 * oh + 3, ow : ow + 3].reshape(2, 2, 2, 3, 3)  # n, g, ci, kh, kw
            ref[:, :, oh, ow] = np.einsum("ngcij,gocij->ngo", win, w.reshape(2, 3, 2, 3, 3)).reshape(2, 6)
    assert np.allclose(ref, ours, atol=1e-4)
    assert np.allclose(expected(data, {"x": x}, ref), ours, atol=1e-4)


def test_conv_asymmetric_pads_and_dilation_is_an_einsum_with_each_side_padded() -> None:
    x, w = rand(1, 3, 10, 7), rand(5, 3, 2, 3)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], dilations=[2, 1], pads=[0, 2, 1, 0], strides=[1, 2])
    oh, ow = (10 + 1 - 2 * 1 - 1) // 1 + 1, (7 + 2 - 2 - 1) // 2 + 1
    b = np.zeros(5, np.float32)
    data = model([node], [("x", FLOAT, [1, 3, 10, 7])], [("y", FLOAT, [1, 5, oh, ow])], {"w": w, "b": b})
    (layer,) = import_onnx(data).layers
    assert layer.node == "Conv_0" and layer.problem.kind == "einsum"
    assert any("asymmetric pads [[0, 1], [2, 0]]" in n for n in layer.notes)
    assert any("bias B left out" in n for n in layer.notes)
    p = layer.problem.to_problem()
    assert p.axes["oh"] == oh and p.axes["ow"] == ow and p.axes["fh"] == 2
    assert p.shape(p.inputs[0]) == (1, 10, 7, 1, 3)  # the real input, whatever the padding
    ours = conv_output(evaluate(p, conv_inputs(x, w, 1)))
    xp = np.pad(x, ((0, 0), (0, 0), (0, 1), (2, 0)))
    ref = np.zeros((1, 5, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i : i + 3 : 2, 2 * j : 2 * j + 3]
            ref[:, :, i, j] = np.einsum("ncij,ocij->no", win, w)
    assert np.allclose(ref, ours, atol=1e-4)
    assert np.allclose(expected(data, {"x": x}, ref), ours, atol=1e-4)


def test_conv_auto_pad_same_upper_and_a_1d_conv() -> None:
    x, w = rand(1, 2, 7, 6), rand(4, 2, 3, 3)
    x1, w1 = rand(1, 2, 9), rand(3, 2, 4)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("Conv", ["x1", "w1"], ["y1"], pads=[1, 1]),
    ]
    data = model(
        nodes,
        [("x", FLOAT, [1, 2, 7, 6]), ("x1", FLOAT, [1, 2, 9])],
        [("y", FLOAT, [1, 4, 4, 3]), ("y1", FLOAT, [1, 3, 8])],
        {"w": w, "w1": w1},
    )
    same, one_d = import_onnx(data).problems()
    ours = conv_output(evaluate(same, conv_inputs(x, w, 1)))
    out = run_onnxruntime(data, {"x": x, "x1": x1})
    if out is None:
        pytest.skip("onnxruntime is not installed")
    assert np.allclose(out[0], ours, atol=1e-4)
    assert np.allclose(out[1], conv_output(evaluate(one_d, conv_inputs(x1, w1, 1))), atol=1e-4)


def test_matmul_batched_with_broadcast_and_a_weight_initializer() -> None:
    a, b = rand(2, 3, 4, 5), rand(3, 5, 6)
    node = helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")
    data = model([node], [("a", FLOAT, [2, 3, 4, 5])], [("y", FLOAT, [2, 3, 4, 6])], {"b": b})
    (layer,) = import_onnx(data).layers
    p = layer.problem.to_problem()
    assert p.weight == 1 and p.axes == {"b0": 2, "b1": 3, "m": 4, "k": 5, "n": 6}
    ours = evaluate(p, [a, b])
    assert np.allclose(expected(data, {"a": a}, np.matmul(a, b)), ours, atol=1e-4)


def test_matmul_unit_batch_broadcasts_and_vector_operands() -> None:
    a, b, v = rand(1, 4, 5), rand(3, 5, 6), rand(5)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"]), helper.make_node("MatMul", ["v", "b"], ["z"])]
    data = model(
        nodes,
        [("a", FLOAT, [1, 4, 5]), ("b", FLOAT, [3, 5, 6]), ("v", FLOAT, [5])],
        [("y", FLOAT, [3, 4, 6]), ("z", FLOAT, [3, 6])],
    )
    m = import_onnx(data)
    bcast, vec = m.problems()
    assert any("unit batch dimensions" in n for n in m.layers[0].notes)
    assert np.allclose(evaluate(bcast, [a.reshape(4, 5), b]), np.matmul(a, b), atol=1e-4)
    assert np.allclose(evaluate(vec, [v, b]), np.matmul(v, b), atol=1e-4)


def test_gemm_trans_b_keeps_the_stored_layout_and_notes_alpha_and_c() -> None:
    a, b, c = rand(4, 6), rand(5, 6), rand(5)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="fc", transB=1, alpha=2.0, beta=1.0)
    data = model([node], [("a", FLOAT, [4, 6])], [("y", FLOAT, [4, 5])], {"b": b, "c": c})
    (layer,) = import_onnx(data).layers
    assert layer.problem.expr == "A[m, k], B[n, k] -> Y[m, n]"
    assert any("alpha=2" in n for n in layer.notes) and any("C (beta=1)" in n for n in layer.notes)
    p = layer.problem.to_problem()
    assert p.shape(p.inputs[1]) == (5, 6) and p.weight == 1
    ours = evaluate(p, [a, b])
    assert np.allclose(ours, a @ b.T, atol=1e-4)
    out = run_onnxruntime(data, {"a": a})
    if out is not None:  # the file's output is alpha * A B^T + C: the import's product is the contraction alone
        assert np.allclose(out[0], 2 * ours + c, atol=1e-4)


def test_einsum_two_inputs_ellipsis_and_implicit_output() -> None:
    a, b, c = rand(2, 3, 4), rand(2, 4, 5), rand(7, 2, 3)
    nodes = [
        helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik"),
        helper.make_node("Einsum", ["c"], ["z"], equation="...ij->...j"),
        helper.make_node("Einsum", ["a", "b"], ["w"], equation="bij,bjk"),
    ]
    data = model(
        nodes,
        [("a", FLOAT, [2, 3, 4]), ("b", FLOAT, [2, 4, 5]), ("c", FLOAT, [7, 2, 3])],
        [("y", FLOAT, [2, 3, 5]), ("z", FLOAT, [7, 3]), ("w", FLOAT, [3, 5])],
    )
    bmm, ell, implicit = import_onnx(data).problems()
    assert np.allclose(evaluate(bmm, [a, b]), np.einsum("bij,bjk->bik", a, b), atol=1e-4)
    assert np.allclose(evaluate(ell, [c]), np.einsum("...ij->...j", c), atol=1e-4)
    assert np.allclose(evaluate(implicit, [a, b]), np.einsum("bij,bjk", a, b), atol=1e-4)
    out = run_onnxruntime(data, {"a": a, "b": b, "c": c})
    if out is not None:
        assert np.allclose(out[2], evaluate(implicit, [a, b]), atol=1e-4)


def test_reductions_max_from_attribute_sum_from_input_mean_as_sum() -> None:
    x = rand(3, 4, 5)
    axes = numpy_helper.from_array(np.array([0, 2], np.int64), "axes")
    nodes = [
        helper.make_node("ReduceMax", ["x"], ["mx"], axes=[-1], keepdims=1),
        helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0),
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[1], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "red", [helper.make_tensor_value_info("x", FLOAT, [3, 4, 5])],
        [helper.make_tensor_value_info(n, FLOAT, s) for n, s in (("mx", [3, 4, 1]), ("s", [4]), ("mean", [3, 5]))],
        initializer=[axes],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    data = m.SerializeToString()
    imp = import_onnx(data)
    mx, s, mean = imp.problems()
    assert (mx.reduce_op, s.reduce_op, mean.reduce_op) == ("max", "add", "add")
    assert any("keepdims" in n for n in imp.layers[0].notes) and any("ReduceMean" in n for n in imp.layers[2].notes)
    assert np.array_equal(evaluate(mx, [x]), x.max(axis=-1))
    assert np.allclose(evaluate(s, [x]), x.sum(axis=(0, 2)), atol=1e-4)
    assert np.allclose(evaluate(mean, [x]) / 4, x.mean(axis=1), atol=1e-5)
    out = run_onnxruntime(data, {"x": x})
    if out is not None:
        assert np.array_equal(out[0].reshape(3, 4), evaluate(mx, [x]).astype(np.float32))
        assert np.allclose(out[1], evaluate(s, [x]), atol=1e-4)


def _dynamic_model() -> bytes:
    w = rand(8, 3, 3, 3)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    return model([node], [("x", FLOAT, ["batch", 3, 16, 16])], [("y", FLOAT, ["batch", 8, 16, 16])], {"w": w})


def test_a_dynamic_batch_given_at_import_sets_the_batch_of_every_layer() -> None:
    m = import_onnx(_dynamic_model(), params={"batch": 16})
    assert m.params == {"batch": 16}
    assert m.layers[0].problem.batch == 16 and m.problems()[0].axes["n"] == 16


def test_a_dynamic_dimension_not_given_is_an_error_naming_it_and_how_to_give_it() -> None:
    with pytest.raises(ProblemError) as e:
        import_onnx(_dynamic_model())
    assert e.value.token == "batch" and "'batch'" in e.value.message and "of input 'x'" in e.value.message
    assert "--param batch=" in e.value.hint and "params={'batch'" in e.value.hint


def test_a_parameter_the_model_does_not_have_or_a_bad_size_is_an_error() -> None:
    with pytest.raises(ProblemError, match="no dynamic dimension 'seq'") as e:
        import_onnx(_dynamic_model(), params={"batch": 2, "seq": 4})
    assert "batch" in e.value.hint
    with pytest.raises(ProblemError, match=r"batch=0 is not an integer"):
        import_onnx(_dynamic_model(), params={"batch": 0})


def test_other_operators_are_skipped_with_their_kind_and_counted() -> None:
    w = rand(4, 4)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"], name="act2"),
        helper.make_node("Softmax", ["y"], ["z"]),
    ]
    m = import_onnx(model(nodes, [("x", FLOAT, [2, 4])], [("z", FLOAT, [2, 4])], {"w": w}))
    assert [layer.node for layer in m.layers] == ["fc1"]
    assert m.skipped_counts == {"Relu": 2, "Add": 1, "Softmax": 1}
    assert [s.node for s in m.skipped] == ["Relu_1", "Add_2", "act2", "Softmax_4"]
    assert "skipped Relu x2" in m.summary()


def test_an_unsupported_element_type_skips_the_node_naming_the_type() -> None:
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    dbl = TensorProto.DOUBLE
    m = import_onnx(model([node], [("a", dbl, [2, 3]), ("b", dbl, [3, 4])], [("y", dbl, [2, 4])]))
    assert not m.layers and "DOUBLE" in m.skipped[0].reason and "FLOAT16" in m.skipped[0].reason
    with pytest.raises(ProblemError, match="no layer to tune"):
        m.problems()


def test_half_and_integer_types_map_to_the_projects_dtypes() -> None:
    f16, i32 = TensorProto.FLOAT16, TensorProto.INT32
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"]), helper.make_node("ReduceMax", ["i"], ["j"], axes=[0])]
    data = model(
        nodes, [("a", f16, [2, 3]), ("b", f16, [3, 4]), ("i", i32, [5, 2])], [("y", f16, [2, 4]), ("j", i32, [1, 2])]
    )
    mm, red = import_onnx(data).problems()
    assert [o.dtype for o in mm.operands] == ["f16", "f16", "f16"] and mm.acc_dtype == "f32"
    assert [o.dtype for o in red.operands] == ["i32", "i32"]


@pytest.mark.parametrize(
    "data",
    [b"", b"\x08\x07garbage\xff\xff\xff", b'[{"expr": "mk,kn->mn"}]', bytes(range(256)) * 4],
    ids=["empty", "garbage", "json", "bytes"],
)
def test_a_malformed_file_is_a_clear_error(data: bytes) -> None:
    with pytest.raises(ProblemError, match="not an ONNX model") as e:
        import_onnx(data)
    assert e.value.token == "model" and "onnx.save" in e.value.hint


def test_an_invalid_graph_is_reported_by_the_checker() -> None:
    node = helper.make_node("MatMul", ["a", "missing"], ["y"])
    with pytest.raises(ProblemError, match=r"invalid|shape inference"):
        import_onnx(model([node], [("a", FLOAT, [2, 3])], [("y", FLOAT, [2, 4])]))


def test_external_weights_are_never_read_but_their_shapes_are_used() -> None:
    w = numpy_helper.from_array(rand(3, 4), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="../../etc/passwd")  # never opened
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "ext", [helper.make_tensor_value_info("x", FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", FLOAT, [2, 4])], initializer=[w],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imp = import_onnx(m.SerializeToString())
    assert imp.problems()[0].axes == {"m": 2, "k": 3, "n": 4} and imp.problems()[0].weight == 1
    assert any("external data" in n for n in imp.notes)


def test_node_count_is_limited() -> None:
    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"t{i}"], [f"t{i + 1}"]) for i in range(MAX_NODES + 1)]
    with pytest.raises(ProblemError, match="nodes; at most"):
        import_onnx(model(nodes, [("x", FLOAT, [1])], [(f"t{MAX_NODES + 1}", FLOAT, [1])]))


def test_ops_imports_only_the_chosen_operators_and_rejects_unknown_ones() -> None:
    w = rand(4, 4)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"), helper.make_node("ReduceSum", ["h"], ["y"])]
    data = model(nodes, [("x", FLOAT, [2, 4])], [("y", FLOAT, [1, 1])], {"w": w})
    m = import_onnx(data, ops={"ReduceSum"})
    assert [layer.op_type for layer in m.layers] == ["ReduceSum"]
    assert m.skipped[0].node == "fc" and "not among ops ['ReduceSum']" in m.skipped[0].reason
    with pytest.raises(ProblemError, match="'Relu' is not one the import turns into problems"):
        import_onnx(data, ops={"Relu"})


def test_reduction_axes_from_a_constant_node_and_a_computed_axes_input_is_skipped() -> None:
    x = rand(3, 4)
    nodes = [
        helper.make_node("Constant", [], ["ax"], value_ints=[1]),
        helper.make_node("ReduceSum", ["x", "ax"], ["s"], keepdims=0, name="sum"),
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Slice", ["shp", "ax", "two"], ["ax2"]),
        helper.make_node("ReduceMin", ["x", "ax2"], ["m"], name="computed"),
    ]
    two = np.array([2], np.int64)
    data = model(nodes, [("x", FLOAT, [3, 4])], [("s", FLOAT, [3]), ("m", FLOAT, ["a", "b"])], {"two": two}, opset=18)
    m = import_onnx(data)
    (layer,) = m.layers
    assert layer.node == "sum" and np.allclose(evaluate(layer.problem.to_problem(), [x]), x.sum(axis=1), atol=1e-5)
    computed = next(s for s in m.skipped if s.node == "computed")
    assert computed.reason == "its axes input is not a constant"


def test_gemm_trans_a_reads_the_stored_transposed_operand() -> None:
    a, b = rand(6, 4), rand(6, 5)
    node = helper.make_node("Gemm", ["a", "b"], ["y"], transA=1)
    (layer,) = import_onnx(model([node], [("a", FLOAT, [6, 4]), ("b", FLOAT, [6, 5])], [("y", FLOAT, [4, 5])])).layers
    assert layer.problem.expr == "A[k, m], B[k, n] -> Y[m, n]" and not layer.notes
    assert np.allclose(evaluate(layer.problem.to_problem(), [a, b]), a.T @ b, atol=1e-4)
