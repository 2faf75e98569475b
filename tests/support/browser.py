"""Headless Chromium from Debian's packages (`chromium`, `chromium-driver`), driven by Selenium 4,
for the operator console's browser tests and `make console-shots`.

Never a downloaded browser or driver: the binary and the driver are named outright, and
Selenium Manager is told it is offline, so nothing is fetched (this machine reaches only package
registries). `make setup` and `.ci/run` install the two packages where they are missing."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
T = TypeVar("T")


def missing_browser() -> str | None:
    """Why the browser tests cannot run here (None when they can)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists() and shutil.which(path.name) is None:
            return f"{path} is missing: apt-get install -y chromium chromium-driver (make setup)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is missing: pip install -e '.[dev]' (make setup)"
    return None


@contextmanager
def headless_chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A headless Chromium (a fresh profile, no extensions, no background network), closed after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager: never download anything
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root in CI and here: Chromium's sandbox refuses to start as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        f"--window-size={width},{height}",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(check: Callable[[], T | None], timeout: float = 30, what: str = "") -> T:
    """`check()`'s first truthy answer, polled every 0.1 s for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            answer = check()
        except Exception as error:  # an element replaced mid-read (the page refreshes itself)
            last_error = error
            answer = None
        if answer:
            return answer
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what or check}: {last_error!r}")


def text_of(driver: Any, selector: str) -> str:
    """The visible text of the first element `selector` finds ("" when there is none)."""
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, selector)
    return str(found[0].text) if found else ""


def sign_in(driver: Any, base_url: str, user: str) -> None:
    """Open the console and sign in as a local demo user (the gateway's X-Demo-User)."""
    from selenium.webdriver.common.by import By

    driver.get(f"{base_url}/console")
    driver.execute_script("sessionStorage.clear()")
    driver.get(f"{base_url}/console#/overview")
    field = wait_until(lambda: driver.find_element(By.ID, "signin-user"), what="the sign-in box")
    field.clear()
    field.send_keys(user)
    driver.find_element(By.ID, "signin-go").click()


__all__ = ["CHROMEDRIVER", "CHROMIUM", "headless_chromium", "missing_browser", "sign_in",
           "text_of", "wait_until"]  # fmt: skip
