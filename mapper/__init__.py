"""The search library: find the best mapping of a problem on a target, with the evidence for it.

    >>> from mapper import SearchSettings, tune
    >>> from costmodels.registry import get_target
    >>> from workload import einsum
    >>> r = tune(einsum("mk,kn->mn", {"m": 256, "k": 256, "n": 256}), get_target("trn2"), SearchSettings())
    >>> r.proven_optimal, r.validation_passed
    (True, True)

`tune` searches once; `tune_cached` keeps results in an Optuna storage by content; `tune_workload`
and `tune_layers` tune every layer of a network, `tune_model` every layer of one's own (an ONNX
import or a layer list, see `workload.import_onnx`). A `Watch` reports progress and can cancel.

    >>> from mapper import tune_model
    >>> from workload import load_layers
    >>> net = load_layers('[{"label": "fc", "expr": "mk,kn->mn", "sizes": {"m": 64, "k": 64, "n": 64}}]', name="mlp")
    >>> w = tune_model(net, "trn2", workers=1)
    >>> fc = w.layers[0]
    >>> w.workload, fc.label, fc.feasible, w.results[fc.problem_hash].validation_passed
    ('mlp', 'mlp/fc', True, True)
"""

from mapper.cache import ResultCache, open_storage, tune_cached
from mapper.result import TuneResult
from mapper.search import tune
from mapper.settings import OBJECTIVES, STRATEGIES, SearchSettings
from mapper.watch import Watch
from mapper.workloads import WorkloadResult, tune_layers, tune_model, tune_workload

__all__ = [
    "OBJECTIVES",
    "STRATEGIES",
    "ResultCache",
    "SearchSettings",
    "TuneResult",
    "Watch",
    "WorkloadResult",
    "open_storage",
    "tune",
    "tune_cached",
    "tune_layers",
    "tune_model",
    "tune_workload",
]
