"""The problem model: einsum and conv2d problems, their canonical form, reference evaluation, named workloads.

>>> from workload import einsum
>>> p = einsum("mk,kn->mn", {"m": 64, "k": 32, "n": 16})
>>> p.macs
32768
"""

from workload.canonical import canonical_form, content_hash
from workload.conv2d import conv2d
from workload.einsum import einsum
from workload.errors import ProblemError
from workload.named import load as load_workload
from workload.named import names as workload_names
from workload.problem import Problem
from workload.reference import evaluate, random_inputs
from workload.spec import Conv2dSpec, EinsumSpec, problem_from_dict

__all__ = [
    "Conv2dSpec",
    "EinsumSpec",
    "Problem",
    "ProblemError",
    "canonical_form",
    "content_hash",
    "conv2d",
    "einsum",
    "evaluate",
    "load_workload",
    "problem_from_dict",
    "random_inputs",
    "workload_names",
]
