"""Keep freed memory in the process: glibc's allocator tuned for searches that reuse large arrays.

A search allocates and frees arrays of a few megabytes many times (a cell table's columns, a round's
code columns, the temporaries of every numpy expression over them). glibc serves each block above its
mmap threshold (128 KiB at first, raised only as such blocks are freed) with a fresh mapping and hands
freed heap back to the system above its trim threshold, so the next array of that size is faulted in
and zeroed page by page again. On the 2-core CI machine a numpy expression over two 3 MB arrays took
1.59 ms with the defaults and 0.20 ms with these settings, and the dominance test of an Ascend cell
table (372,600 cells) 4.97 ms against 1.47 ms (measured once by hand outside `bench/`). `bench.allocator` times
searches and their peak memory with the setting on and off side by side (the README's "Allocator").

`keep_freed_memory` raises both thresholds with ``mallopt``: blocks up to `MMAP_BYTES` come from the
heap, and up to `TRIM_BYTES` of freed heap stay with the process for the next arrays. The cost is
memory: a worker keeps up to `TRIM_BYTES` it no longer uses. ``TM_KEEP_FREED_MEMORY=0`` (the
service's `app.settings.Settings.keep_freed_memory`) leaves the allocator as it is. Other C
libraries (musl, macOS) have no ``mallopt``: nothing is changed there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: blocks up to this size come from the heap (glibc's largest mmap threshold on 64-bit: 32 MiB)
MMAP_BYTES = 32 << 20
#: freed heap kept by the process, not handed back to the system
TRIM_BYTES = 256 << 20
#: the environment variable that turns it off ("0", "false", "no", "off")
ENV = "TM_KEEP_FREED_MEMORY"

_done: str | None = None


def wanted(value: str | None) -> bool:
    """Whether an environment value asks for it (unset: yes)."""
    return value is None or value.strip().lower() not in {"0", "false", "no", "off"}


def keep_freed_memory(enabled: bool | None = None) -> str:
    """Tune the allocator once per process; what was done, for logs: ``kept``, ``off`` or ``unavailable``.

    `enabled` None reads `ENV`. The first call decides: later calls return its answer unchanged (the
    service calls it at start-up with its settings, before any search does with the environment's).
    """
    global _done
    if _done is not None:
        return _done
    if not (wanted(os.environ.get(ENV)) if enabled is None else enabled):
        _done = "off"
        return _done
    _done = "unavailable"
    name = ctypes.util.find_library("c")
    if name is None:
        return _done
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc
        return _done
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, MMAP_BYTES) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_BYTES) == 1:
        _done = "kept"
    return _done
