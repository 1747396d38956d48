"""Result cache: hits in memory, across processes through a journal file, and in SQLite/PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest

from mapper.cache import ResultCache, tune_cached
from mapper.settings import SearchSettings
from mapper.workloads import tune_layers
from tests.mapper.fake_target import fake_target, matmul

FAST = SearchSettings(strategy="tpe", max_trials=10)
ROOT = Path(__file__).resolve().parents[2]


def test_memory_hit_is_fast_and_identical() -> None:
    store = optuna.storages.InMemoryStorage()
    p = matmul(256, 256, 512)
    first = tune_cached(p, "fake", FAST, storage=store, factory=fake_target, validate=False)
    t0 = time.perf_counter()
    again = tune_cached(p, "fake", FAST, storage=store, factory=fake_target, validate=False)
    elapsed = time.perf_counter() - t0
    assert not first.cached and again.cached and elapsed < 0.25
    assert again.model_copy(update={"cached": False}) == first


def test_any_change_searches_again() -> None:
    store = optuna.storages.InMemoryStorage()
    p = matmul(256, 256, 512)
    base = tune_cached(p, "fake", FAST, storage=store, factory=fake_target, validate=False)
    variants = [
        dict(problem=matmul(256, 256, 1024)),
        dict(settings=FAST.model_copy(update={"seed": 1})),
        dict(settings=FAST.model_copy(update={"max_trials": 11})),
        dict(settings=FAST.model_copy(update={"objectives": ("footprint",)})),
        dict(overrides={"sram_bytes": 128 * 1024}),
        dict(preset="fake2"),
    ]
    keys = {base.key}
    for v in variants:
        r = tune_cached(
            v.get("problem", p),  # type: ignore[arg-type]
            v.get("preset", "fake"),  # type: ignore[arg-type]
            v.get("settings", FAST),  # type: ignore[arg-type]
            overrides=v.get("overrides"),  # type: ignore[arg-type]
            storage=store,
            factory=fake_target,
            validate=False,
        )
        assert not r.cached
        keys.add(r.key)
    assert len(keys) == len(variants) + 1
    relabeled = matmul(256, 256, 512).model_copy(update={"label": "renamed"})
    assert tune_cached(relabeled, "fake", FAST, storage=store, factory=fake_target, validate=False).cached


CHILD = """
import sys
sys.path.insert(0, {root!r})
from tests.mapper.fake_target import fake_target, matmul
from mapper.cache import tune_cached
from mapper.settings import SearchSettings
r = tune_cached(matmul(256, 256, 512), "fake", SearchSettings(strategy="tpe", max_trials=10),
                storage={storage!r}, factory=fake_target, validate=False)
print(r.cached, r.key)
"""


def test_journal_file_is_found_by_another_process(tmp_path: Path) -> None:
    path = str(tmp_path / "results.log")
    first = tune_cached(matmul(256, 256, 512), "fake", FAST, storage=path, factory=fake_target, validate=False)
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=str(ROOT), storage=path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.split()
    assert out == ["True", first.key]


def _roundtrip(storage: str) -> None:
    r = tune_cached(matmul(128, 128, 256), "fake", FAST, storage=optuna.storages.InMemoryStorage(), factory=fake_target)
    r = r.model_copy(update={"key": f"test-{uuid.uuid4().hex}"})
    ResultCache(storage).put(r)
    fresh = optuna.storages.RDBStorage(storage)  # a new connection, as a later process would open
    try:
        assert ResultCache(fresh).get(r.key) == r
        assert ResultCache(fresh).get("missing-" + r.key) is None
    finally:
        optuna.delete_study(study_name="tensormapper-result:" + r.key, storage=fresh)


def test_sqlite_database(tmp_path: Path) -> None:
    _roundtrip(f"sqlite:///{tmp_path / 'results.db'}")


def test_postgresql_database(pg_url: str) -> None:
    _roundtrip(pg_url)


def test_workload_layers_are_deduplicated_spread_and_cached() -> None:
    store = optuna.storages.InMemoryStorage()
    layers = [matmul(256, 256, 512), matmul(512, 256, 256), matmul(256, 256, 512), matmul(128, 128, 128)]
    w = tune_layers(layers, "fake", FAST, storage=store, workers=2, factory=fake_target, validate=False)
    assert w.distinct == 3 and w.searched == 3 and [lay.duplicate_of for lay in w.layers] == [None, None, 0, None]
    assert w.total_value == pytest.approx(sum(lay.value for lay in w.layers if lay.value is not None))
    again = tune_layers(layers, "fake", FAST, storage=store, workers=2, factory=fake_target, validate=False)
    assert again.searched == 0 and all(lay.cached for lay in again.layers)
    assert [lay.value for lay in again.layers] == [lay.value for lay in w.layers]


def test_a_result_stored_without_validation_does_not_answer_a_validating_request() -> None:
    store = optuna.storages.InMemoryStorage()
    p = matmul(128, 128, 256)
    bare = tune_cached(p, "fake", FAST, storage=store, factory=fake_target, validate=False)
    assert bare.validation is None
    checked = tune_cached(p, "fake", FAST, storage=store, factory=fake_target, validate=True)
    assert not checked.cached and checked.validation is not None and checked.validation_passed
    again = tune_cached(p, "fake", FAST, storage=store, factory=fake_target, validate=False)
    assert again.cached and again.validation is not None  # the validated result now answers both
    w = tune_layers([matmul(64, 64, 64)], "fake", FAST, storage=store, factory=fake_target, validate=False)
    w2 = tune_layers([matmul(64, 64, 64)], "fake", FAST, storage=store, factory=fake_target, validate=True)
    assert w.searched == 1 and w2.searched == 1 and all(r.validation is not None for r in w2.results.values())
