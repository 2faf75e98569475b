"""The console's kinds panel in a real browser against the local stack (short: it runs in CI on
2 cores): an operator pauses a kind with a note, sees the paused badge saying who and why, a
job of the kind waits saying so, and the resume lets it run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import console_jobs as jobs
from tests.support.browser import sign_in, text_of, wait_until
from tests.support.localstack import LocalStackProcess

ROW = "tr[data-kind=synthetic]"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStackProcess]:
    running = LocalStackProcess(tmp_path_factory.mktemp("kinds"), workers=1)
    try:
        yield running
    finally:
        running.stop()


def _click(driver: Any, selector: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, selector).click()


def _confirm(driver: Any, note: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, "#dialog-note").send_keys(note)
    driver.find_element(By.CSS_SELECTOR, "#dialog-confirm").click()


def test_an_operator_pauses_and_resumes_a_kind_from_the_overview(
    stack: LocalStackProcess, browser: Any
) -> None:
    sign_in(browser, stack.url, "ops")
    wait_until(lambda: text_of(browser, f"{ROW} [data-kind-state]") == "running", what="kinds")
    _click(browser, f"{ROW} button.kind-pause")
    _confirm(browser, "provider <b>down</b>")
    flash = wait_until(lambda: text_of(browser, "#flash"), what="the pause's answer")
    assert "Kind synthetic paused (by ops)" in flash
    wait_until(lambda: text_of(browser, f"{ROW} [data-kind-state]") == "paused", what="badge")
    wait_until(  # read from one drawing of the row (a refresh may redraw it between reads)
        lambda: "by ops" in (row := text_of(browser, ROW)) and "provider <b>down</b>" in row,
        what="who paused it and why",
    )
    # a job of the paused kind waits, queued, saying so (the worker sees it within 5 s)
    status, accepted = stack.request(
        "POST", "/jobs", {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}
    )
    assert status == 202
    job_id = accepted["job_id"]
    wait_until(
        lambda: "paused" in (jobs.ops_view(stack, job_id).get("waiting_for") or {}),
        timeout=30,
        what="the job parked",
    )
    assert jobs.ops_view(stack, job_id)["state"] == "queued"
    _click(browser, f"{ROW} button.kind-resume")
    _confirm(browser, "provider back")
    wait_until(
        lambda: "Kind synthetic resumed" in text_of(browser, "#flash"), what="the resume's answer"
    )
    # read once the overview has drawn its row again: a resume re-renders the page, and a read
    # in between finds no row at all ('' — the failure CI rehearsed); a row left `paused` fails
    wait_until(
        lambda: text_of(browser, f"{ROW} [data-kind-state]") in {"resuming", "running"},
        what="the kind resuming or running",
    )
    jobs.wait_state(stack, job_id, "succeeded")
