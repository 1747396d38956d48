"""`mapper serve`: the API (uvicorn) and its worker processes, on one storage.

Workers are separate processes (searches are CPU-bound numpy; the API stays responsive), started
with the ``spawn`` method so each begins clean, and stopped with the API. `--workers 0` runs the
API alone, for set-ups whose workers run elsewhere (`mapper worker --storage URL`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
import webbrowser
from multiprocessing.process import BaseProcess

import uvicorn

from app.jobs.store import JobStore
from app.settings import Settings
from mapper.allocator import keep_freed_memory


class StorageUnusable(Exception):
    """The configured storage cannot be opened or written."""


def check_storage(settings: Settings) -> None:
    """Create the data directory and the tables, and write once: fail early with a clear reason.

    Raises:
        StorageUnusable: saying which directory or database and why.
    """
    try:
        settings.prepare()
    except OSError as e:
        raise StorageUnusable(f"cannot create the data directory {settings.data_dir}: {e.strerror}") from None
    if not settings.storage and not os.access(settings.data_dir, os.W_OK):
        raise StorageUnusable(f"the data directory {settings.data_dir} is not writable (set TM_DATA_DIR)")
    try:
        store = JobStore(settings.storage_url, stale_seconds=settings.stale_seconds)
        store.requeue_stale()  # a write: proves the database accepts them
        store.close()
    except Exception as e:
        where = settings.data_dir if not settings.storage else "the database"
        raise StorageUnusable(f"cannot use {where} for jobs: {type(e).__name__}: {str(e).splitlines()[0]}") from None


def _worker_main(settings_json: str, parent_pid: int) -> None:
    from app.jobs.worker import run_worker

    run_worker(Settings.model_validate_json(settings_json), parent_pid=parent_pid)


def start_workers(settings: Settings, n: int) -> list[BaseProcess]:
    """`n` worker processes on `settings`' storage."""
    ctx = mp.get_context("spawn")
    procs: list[BaseProcess] = []
    for i in range(n):
        args = (settings.model_dump_json(), os.getpid())
        p = ctx.Process(target=_worker_main, args=args, name=f"tm-worker-{i}", daemon=True)
        p.start()
        procs.append(p)
    return procs


def stop_workers(procs: list[BaseProcess], timeout: float = 10.0) -> None:
    """SIGTERM each worker (it gives its job back to the queue), then wait; kill what does not stop."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout)
        if p.is_alive():
            p.kill()


def _has_display() -> bool:
    return sys.platform in ("darwin", "win32") or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def serve(settings: Settings, *, open_browser: bool = True) -> None:
    """Run the API and `settings.workers` workers until Ctrl-C / SIGTERM.

    Raises:
        StorageUnusable: the storage cannot be used (nothing is started).
    """
    check_storage(settings)
    keep_freed_memory(settings.keep_freed_memory)  # (the API's own pricing and validation; workers: `run_worker`)
    shown = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    url = f"http://{shown}:{settings.port}/docs"
    where = settings.storage_url if settings.storage else f"embedded SQLite in {settings.data_dir}"
    print(f"tensormapper console: {url}  (storage: {where}; workers: {settings.workers})", flush=True)
    if open_browser and _has_display():
        threading.Timer(1.5, webbrowser.open, args=(url,)).start()
    procs = start_workers(settings, settings.workers)
    try:
        from app.main import create_app

        # the workers stop with the app's shutdown: uvicorn re-raises SIGTERM once it has shut down, so
        # code after uvicorn.run would never run on a SIGTERM
        app = create_app(settings, on_shutdown=lambda: stop_workers(procs))
        uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", access_log=settings.access_log)
    finally:
        stop_workers(procs)
