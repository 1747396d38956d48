"""Layer-list files: problem specs in the request format give the same kind of model as an ONNX import."""

from __future__ import annotations

import json

import pytest

from workload import ProblemError, conv2d, einsum, load_layers
from workload.canonical import content_hash

YAML = """
name: my-net
layers:
  - {kind: conv2d, label: stem, batch: 1, in_channels: 3, out_channels: 8, input_height: 16,
     input_width: 16, kernel: 3, stride: 2, padding: 1}
  - {expr: "bk,kn->bn", sizes: {b: 1, k: 512, n: 10}, weight: 1}
"""


def test_a_yaml_layer_list_gives_the_problems_the_specs_describe() -> None:
    m = load_layers(YAML.encode(), name="ignored")
    assert m.name == "my-net" and m.source == "layers" and not m.skipped
    assert [(layer.node, layer.op_type) for layer in m.layers] == [("stem", "conv2d"), ("layer1", "einsum")]
    stem, head = m.problems()
    want = conv2d(
        batch=1, in_channels=3, out_channels=8, input_height=16, input_width=16, kernel=3, stride=2, padding=1
    )
    assert content_hash(stem) == content_hash(want) and stem.label == "my-net/stem"
    assert content_hash(head) == content_hash(einsum("bk,kn->bn", {"b": 1, "k": 512, "n": 10}, weight=1))


def test_a_json_list_takes_its_name_from_the_caller() -> None:
    doc = json.dumps([{"kind": "einsum", "expr": "ij->i", "sizes": {"i": 4, "j": 8}, "reduce_op": "max"}])
    m = load_layers(doc, name="rows.json")
    assert m.name == "rows.json" and m.problems()[0].reduce_op == "max"


@pytest.mark.parametrize(
    ("doc", "message", "token"),
    [
        ("layers: [{expr: 'mk,kn->mn', sizes: {m: 4, k: 4}}]", "layer 0: axis n has no size", "n"),
        ("- {label: a, expr: 'mk,kn->mn', sizes: {m: 4, k: 4, n: 4}}\n- {label: b, kind: conv2d}",
         "layer 1 (b): invalid in_channels", "in_channels"),
        ("layers: []", "holds no layers", "layers"),
        ("name: x\nlayers: [{expr: 'ij->i', sizes: {i: 1, j: 2}}]\nextra: 1", "unknown key 'extra'", "extra"),
        ("[1, 2", "not valid JSON or YAML at line", "layers"),
        ("[" * 100 + "]" * 100, "nests more than", "layers"),
    ],
    ids=["missing-size", "missing-field", "empty", "unknown-key", "syntax", "nesting"],
)  # fmt: skip
def test_a_malformed_layer_list_names_the_layer_and_the_field(doc: str, message: str, token: str) -> None:
    with pytest.raises(ProblemError) as e:
        load_layers(doc)
    assert message in e.value.message and e.value.token == token and e.value.hint


def test_binary_that_is_not_text_is_refused() -> None:
    with pytest.raises(ProblemError, match="not UTF-8 text"):
        load_layers(b"\x08\x07\xff\xfe")
