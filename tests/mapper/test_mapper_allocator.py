"""`mapper.allocator`: the C allocator kept from handing freed memory back, once per process, unless turned off."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from mapper import allocator


def _in_fresh_process(code: str, env_value: str | None = None) -> str:
    env = {"PATH": "/usr/bin:/bin"}
    if env_value is not None:
        env[allocator.ENV] = env_value
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, cwd=".")
    return run.stdout.strip()


@pytest.mark.parametrize(("value", "want"), [(None, True), ("1", True), ("0", False), (" Off ", False), ("no", False)])
def test_the_environment_value_turns_it_off(value: str | None, want: bool) -> None:
    assert allocator.wanted(value) is want


def test_a_search_process_keeps_freed_memory_where_the_c_library_allows_it() -> None:
    """The first call decides for the process: glibc (this machine's, CI's) takes both settings; later calls,
    whatever they ask, answer the first call's outcome."""
    code = "from mapper.allocator import keep_freed_memory as k; print(k(), k(False))"
    got = _in_fresh_process(code).split()
    glibc = platform.libc_ver()[0] == "glibc"
    assert got == (["kept", "kept"] if glibc else ["unavailable", "unavailable"])


def test_the_environment_or_the_setting_leaves_the_allocator_alone() -> None:
    code = "from mapper.allocator import keep_freed_memory as k; print(k())"
    assert _in_fresh_process(code, "0") == "off"
    assert (
        _in_fresh_process("from mapper.allocator import keep_freed_memory as k; print(k(False), k(True))") == "off off"
    )


def test_the_service_settings_carry_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.settings import Settings

    assert Settings().keep_freed_memory is True
    monkeypatch.setenv(allocator.ENV, "false")
    assert Settings().keep_freed_memory is False
