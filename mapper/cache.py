"""Results cached by content in an Optuna storage, so a later request (or process) finds them.

The storage is whatever the mapper is given:

- nothing / ``"memory"``: one in-memory Optuna storage per process (the default);
- a file path (``results.log``) or ``journal:<path>``: a journal file (``JournalStorage`` over
  ``JournalFileBackend``), shared by every process that opens the same file;
- a database URL (``sqlite:///results.db``, ``postgresql://user@host:5432/db``): ``RDBStorage``.

Each result is one study named after its cache key, holding the `TuneResult` JSON in the study's
user attribute ``result``: the library's own storage format, no file format of ours. The key
(`mapper.keys.cache_key`) covers the canonical problem, target preset and overrides, cost-model
version, objectives and every search setting, so any change searches again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cache
from typing import Any

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend

from costmodels.protocol import Target
from mapper.keys import cache_key, cost_model_version
from mapper.result import TuneResult
from mapper.search import tune
from mapper.settings import SearchSettings
from mapper.watch import Progress, Watch
from workload.problem import Problem

STUDY_PREFIX = "tensormapper-result:"
RESULT_ATTR = "result"

_memory = InMemoryStorage()
_lock = threading.Lock()


@cache
def _rdb(url: str) -> RDBStorage:
    if url.startswith("sqlite"):  # several processes share the file: wait for the writer, don't fail
        return RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}})
    return RDBStorage(url, engine_kwargs={"pool_pre_ping": True})


@cache
def _journal(path: str) -> JournalStorage:
    return JournalStorage(JournalFileBackend(path))


def open_storage(spec: str | BaseStorage | None = None) -> BaseStorage:
    """The Optuna storage a spec names (see the module docstring); storages are reused per process."""
    if isinstance(spec, BaseStorage):
        return spec
    if spec is None or spec in ("", "memory", ":memory:"):
        return _memory
    if spec.startswith("journal:"):
        return _journal(spec.removeprefix("journal:").removeprefix("//"))
    if "://" in spec:
        return _rdb(spec)
    return _journal(spec)


class ResultCache:
    """Get and put `TuneResult`s by cache key in an Optuna storage."""

    def __init__(self, storage: str | BaseStorage | None = None) -> None:
        self.storage = open_storage(storage)

    def get(self, key: str) -> TuneResult | None:
        """The stored result of a key, or None."""
        try:
            sid = self.storage.get_study_id_from_name(STUDY_PREFIX + key)
        except KeyError:
            return None
        raw = self.storage.get_study_user_attrs(sid).get(RESULT_ATTR)
        if raw is None:  # a writer created the study but has not stored the result yet
            return None
        result = TuneResult.model_validate_json(raw)
        return result if result.key == key else None

    def put(self, result: TuneResult) -> None:
        """Store a result under its key (the last writer of an identical key wins; both are equal)."""
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        with _lock:
            study = optuna.create_study(storage=self.storage, study_name=STUDY_PREFIX + result.key, load_if_exists=True)
            study.set_user_attr(RESULT_ATTR, result.model_dump_json())


def answers(hit: TuneResult | None, validate: bool) -> bool:
    """Whether a cached result answers a request: the key leaves out `validate`, so a result stored by a
    request that skipped validation does not answer one that asks for it (that one searches and stores
    again, validated)."""
    return hit is not None and not (validate and hit.mapping is not None and hit.validation is None)


def default_factory(preset: str, overrides: dict[str, Any] | None = None) -> Target:
    """`costmodels.registry.get_target` (imported late so the mapper loads without every family)."""
    from costmodels.registry import get_target

    return get_target(preset, overrides)


TargetFactory = Callable[[str, dict[str, Any] | None], Target]


def resolve_factory(factory: TargetFactory | None) -> TargetFactory:
    """The given factory, else this module's `default_factory` (looked up now, so tests can swap it)."""
    return factory or default_factory


def tune_cached(
    problem: Problem,
    preset: str,
    settings: SearchSettings | None = None,
    *,
    overrides: dict[str, Any] | None = None,
    storage: str | BaseStorage | None = None,
    validate: bool = True,
    progress: Progress | Watch | None = None,
    factory: TargetFactory | None = None,
) -> TuneResult:
    """`mapper.search.tune` behind the result cache: an identical request returns the stored result.

    Raises:
        ProblemError: unknown target, bad override, or a problem the target cannot run.
    """
    settings = settings or SearchSettings()
    overrides = dict(overrides or {})
    target = resolve_factory(factory)(preset, overrides)
    cache_ = ResultCache(storage)
    key = cache_key(problem, target.name, overrides, cost_model_version(target), settings)
    hit = cache_.get(key)
    if answers(hit, validate):
        assert hit is not None
        return hit.model_copy(update={"cached": True})
    result = tune(problem, target, settings, overrides=overrides, validate=validate, progress=progress)
    if result.stop_reason != "cancelled":  # a cancelled search is not the answer to the request
        cache_.put(result)
    return result
