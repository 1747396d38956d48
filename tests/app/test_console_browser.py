"""The console in a real browser: headless Chromium drives /docs as a person would.

The service runs with uvicorn on a free loopback port (no worker: a 202 needs none). The browser
opens /docs, expands POST /v1/tunings, clicks "Try it out", picks the conv2d example, clicks
"Execute" and must read a 202; every URL the page fetched must be the service's own (the console
works offline). Needs Debian's `chromium` and `chromium-driver` and the `selenium` package; skips,
saying which is missing, where they are absent.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
EXAMPLE = "conv2d-wormhole"
EXAMPLE_SUMMARY = "A ResNet-50 3x3 conv2d on wormhole-n150"
WAIT = 30.0

# the page and everything it loads must come from here; a browser's own chrome:// or data: URLs are not fetches
LOCAL_SCHEMES = ("data", "blob", "about", "chrome", "chrome-extension", "devtools")


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return "chromium is not installed (apt-get install chromium chromium-driver; .ci/run does this)"
    if not Path(CHROMEDRIVER).exists():
        return "chromedriver is not installed (apt-get install chromium-driver; .ci/run does this)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium; it is a dev dependency)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def service(tmp_path: Path) -> Iterator[str]:
    """`mapper serve` with no worker on a fresh data directory; its base URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TM_")} | {
        "TM_HOST": "127.0.0.1",
        "TM_PORT": str(port),
        "TM_DATA_DIR": str(tmp_path / "data"),
        "TM_WORKERS": "0",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--no-browser"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60 and proc.poll() is None:
            try:
                if httpx.get(f"{base}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail("the service did not answer /v1/health within 60 s")
        yield base
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=5)
        except ProcessLookupError:
            pass


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,1600",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


def fetched_urls(driver: Any) -> set[str]:
    """Every URL the page asked for: the DevTools network log (requests, even failed ones) and the
    Resource Timing entries."""
    urls = {driver.current_url}
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.add(message["params"]["request"]["url"])
    urls |= set(driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)"))
    return urls


def test_console_runs_the_conv2d_example(service: str, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, WAIT)
    browser.get(f"{service}/docs")
    block = wait.until(ec.presence_of_element_located((By.ID, "operations-tunings-create_tuning")))
    summary = block.find_element(By.CSS_SELECTOR, ".opblock-summary")
    assert "/v1/tunings" in summary.text
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", block)
    summary.find_element(By.CSS_SELECTOR, "button.opblock-summary-control").click()

    try_out = wait.until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, "#operations-tunings-create_tuning .try-out__btn"))
    )
    try_out.click()

    picker = wait.until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "#operations-tunings-create_tuning .examples-select select"))
    )
    select = Select(picker)
    values = [o.get_attribute("value") for o in select.options]
    assert EXAMPLE in values, f"examples offered: {values}"
    select.select_by_value(EXAMPLE)
    assert EXAMPLE_SUMMARY in select.first_selected_option.text
    body = wait.until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "#operations-tunings-create_tuning textarea.body-param__text"))
    )
    wait.until(lambda _: '"wormhole-n150"' in (body.get_attribute("value") or ""))
    sent = json.loads(body.get_attribute("value") or "{}")
    assert sent["target"] == "wormhole-n150" and sent["problem"]["kind"] == "conv2d"

    block.find_element(By.CSS_SELECTOR, "button.execute").click()
    status = wait.until(
        ec.visibility_of_element_located(
            (By.CSS_SELECTOR, "#operations-tunings-create_tuning .live-responses-table tbody .response-col_status")
        )
    )
    assert status.text.strip().startswith("202"), status.text
    live = block.find_element(By.CSS_SELECTOR, ".live-responses-table")
    assert "location: /v1/tunings/" in live.text.lower()
    # the picture: the request's end (example picked, Execute) above the server's answer
    browser.execute_script("arguments[0].scrollIntoView({block: 'end'})", live)
    time.sleep(0.3)  # let the response panel finish rendering

    shot = tmp_path / "console-conv2d-202.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    keep = os.environ.get("CONSOLE_SCREENSHOT")  # set it to keep the picture somewhere to look at
    if keep:
        shutil.copyfile(shot, keep)

    # the job exists on the service: the page really sent it
    jobs = httpx.get(f"{service}/v1/tunings", timeout=5).json()["items"]
    assert [j["targets"] for j in jobs] == [["wormhole-n150"]]

    own = urlsplit(service).netloc
    foreign = sorted(
        u for u in fetched_urls(browser) if urlsplit(u).scheme not in LOCAL_SCHEMES and urlsplit(u).netloc != own
    )
    assert not foreign, f"the console fetched from other hosts: {foreign}"
