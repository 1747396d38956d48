"""User-facing problem specs: JSON/YAML mappings -> Problem, with ProblemErrors naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter

from workload.canonical import content_hash
from workload.conv2d import as_conv2d, conv2d
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.problem import MAX_AXIS_SIZE
from workload.spec import (
    CONV2D_EXAMPLES,
    EINSUM_EXAMPLES,
    Conv2dSpec,
    EinsumSpec,
    ProblemSpec,
    problem_from_dict,
    spec_from_dict,
)

MM: dict[str, Any] = {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 4, "k": 4, "n": 4}}
CONV: dict[str, Any] = {
    "kind": "conv2d",
    "in_channels": 4,
    "out_channels": 8,
    "input_height": 8,
    "input_width": 8,
    "kernel": 3,
}


def _error(data: Any) -> ProblemError:
    with pytest.raises(ProblemError) as info:
        problem_from_dict(data)
    assert info.value.hint
    return info.value


@pytest.mark.parametrize("example", EINSUM_EXAMPLES + CONV2D_EXAMPLES, ids=lambda e: e["label"])
def test_every_schema_example_builds_a_problem(example: dict[str, Any]) -> None:
    p = problem_from_dict(example)
    assert p.label == example["label"]


def test_examples_cover_the_documented_cases() -> None:
    labels = " ".join(e["label"] for e in EINSUM_EXAMPLES + CONV2D_EXAMPLES)
    for word in ("batched matmul", "attention", "ResNet", "depthwise", "row product"):
        assert word in labels
    row = next(e for e in EINSUM_EXAMPLES if e["label"] == "row product")
    assert row["expr"] == "ij->i" and row["reduce_op"] == "mul"
    dw = problem_from_dict(next(e for e in CONV2D_EXAMPLES if "depthwise" in e["label"]))
    assert dw.axes["ci"] == dw.axes["co"] == 1


def test_examples_reach_the_json_schema() -> None:
    schema = TypeAdapter(ProblemSpec).json_schema()
    text = json.dumps(schema)
    assert "vmk,vnk->vmn" in text and "ij->i" in text
    assert EinsumSpec.model_json_schema()["examples"] == EINSUM_EXAMPLES
    assert Conv2dSpec.model_json_schema()["examples"] == CONV2D_EXAMPLES


def test_einsum_spec_equals_front_end() -> None:
    data = {**MM, "dtype": {"A": "i8", "B": "i4"}, "weight": "B", "pad": {"A": [[1, 0], [0, 0]]}, "label": "x"}
    direct = einsum(
        "mk,kn->mn", MM["sizes"], dtype={"A": "i8", "B": "i4"}, weight="B", pad={"A": [(1, 0), (0, 0)]}, label="x"
    )
    assert problem_from_dict(data) == direct


def test_conv_spec_equals_front_end_and_round_trips() -> None:
    data = {**CONV, "stride": [2, 1], "padding": 1, "dilation": [1, 2], "groups": 2, "dtype": "i8", "batch": 3}
    p = problem_from_dict(data)
    assert p == conv2d(
        batch=3,
        in_channels=4,
        out_channels=8,
        input_height=8,
        input_width=8,
        kernel=3,
        stride=(2, 1),
        padding=1,
        dilation=(1, 2),
        groups=2,
        dtype="i8",
    )
    params = as_conv2d(p)
    assert params is not None and params.stride == (2, 1) and params.dilation == (1, 2)


def test_kind_is_inferred_when_absent() -> None:
    no_kind = {k: v for k, v in MM.items() if k != "kind"}
    assert isinstance(spec_from_dict(no_kind), EinsumSpec)
    assert isinstance(spec_from_dict({k: v for k, v in CONV.items() if k != "kind"}), Conv2dSpec)
    assert _error({"sizes": {}}).token == "kind"


def test_yaml_and_json_files_give_the_same_problem() -> None:
    text = (
        "kind: conv2d\nin_channels: 64\nout_channels: 64\ninput_height: 56\ninput_width: 56\n"
        "kernel: [3, 3]  # kernel_size\npadding: 1\n"
    )
    from_yaml = problem_from_dict(yaml.safe_load(text))
    from_json = problem_from_dict(json.loads(json.dumps(yaml.safe_load(text))))
    assert content_hash(from_yaml) == content_hash(from_json)


@pytest.mark.parametrize(
    ("data", "token"),
    [
        ([], "problem"),
        (None, "problem"),
        ("mk,kn->mn", "problem"),
        ({"kind": "matmul"}, "kind"),
        ({"kind": 5}, "kind"),
        ({**MM, "wieght": 1}, "wieght"),  # unknown field (typo)
        ({k: v for k, v in MM.items() if k != "sizes"}, "sizes"),  # missing field
        ({**MM, "sizes": {"m": 4.0, "k": 4, "n": 4}}, "sizes.m"),  # non-integer size
        ({**MM, "sizes": {"m": "4", "k": 4, "n": 4}}, "sizes.m"),
        ({**MM, "sizes": [4, 4]}, "sizes"),
        ({**MM, "dtype": 5}, "dtype"),
        ({**MM, "reduce_op": "sum"}, "reduce_op"),
        ({**MM, "pad": {"A": [[1]]}}, "pad.A.0.1"),
        ({**MM, "label": 3}, "label"),
        ({**CONV, "kernel": "3"}, "kernel"),
        ({**CONV, "kernel": [3, 3, 3]}, "kernel"),
        ({**CONV, "stride": 1.5}, "stride"),
        ({**CONV, "expr": "mk->m"}, "expr"),
        ({k: v for k, v in CONV.items() if k != "in_channels"}, "in_channels"),
    ],
)
def test_shape_errors_name_the_field(data: Any, token: str) -> None:
    assert _error(data).token == token


@pytest.mark.parametrize(
    ("data", "token"),
    [
        ({**MM, "expr": "mk,kn->mz", "sizes": {"m": 4, "k": 4, "n": 4, "z": 2}}, "z"),
        ({**MM, "sizes": {"m": 0, "k": 4, "n": 4}}, "m"),
        ({**MM, "dtype": "fp64"}, "fp64"),
        ({**MM, "weight": "C"}, "C"),
        ({**CONV, "groups": 3}, "groups"),
        ({**CONV, "stride": 0}, "stride"),
        ({**CONV, "kernel": 11}, "kernel"),
        ({**CONV, "out_dtype": "f64"}, "out_dtype"),
    ],
)
def test_value_errors_come_from_the_front_ends(data: Any, token: str) -> None:
    assert _error(data).token == token


def test_the_schema_documents_the_least_values_the_front_ends_enforce() -> None:
    """A client (or a fuzzer) reading the schema sees the bounds; the values are still checked by the front-ends,
    which say what is wrong (`test_value_errors_come_from_the_front_ends`)."""
    conv = Conv2dSpec.model_json_schema()["properties"]
    for name in ("batch", "in_channels", "out_channels", "input_height", "input_width", "groups"):
        assert conv[name]["minimum"] == 1, name
    for name, least in (("kernel", 1), ("stride", 1), ("dilation", 1), ("padding", 0)):
        one, pair = conv[name]["anyOf"]
        assert one["minimum"] == least and pair["items"]["minimum"] == least and pair["maxItems"] == 2, name
    sizes = EinsumSpec.model_json_schema()["properties"]["sizes"]["additionalProperties"]
    assert (sizes["minimum"], sizes["maximum"]) == (1, MAX_AXIS_SIZE)
