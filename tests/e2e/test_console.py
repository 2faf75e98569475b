"""The operator console in a real browser (headless Chromium from Debian's packages, driven by
Selenium) against the local stack: an operator finds a dead job from the overview, replays it
and watches it go queued and then succeed, resolves an unknown one, sees a 409 as its reason;
a non-operator gets the 403 page; and every string that came from a job — a step name in an
error, an operator's note, a bookmark's URL — shows as text, never as markup."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import console_jobs as jobs
from tests.support.browser import (
    sign_in,
    text_of,
    wait_until,
)
from tests.support.localstack import LocalStackProcess


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStackProcess]:
    # No worker at first: the dead job needs its deadline to pass unclaimed
    running = LocalStackProcess(tmp_path_factory.mktemp("console"), workers=0)
    try:
        yield running
    finally:
        running.stop()


def _by_css(driver: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def _state_shown(driver: Any) -> str:
    return text_of(driver, "#job-state")


def _confirm(driver: Any, note: str) -> None:
    _by_css(driver, "#dialog-note").send_keys(note)
    _by_css(driver, "#dialog-confirm").click()


def test_an_operator_replays_a_dead_job_and_resolves_an_unknown_one(
    stack: LocalStackProcess, browser: Any
) -> None:
    # Given a dead job (its deadline passed with no worker), an unknown one (its worker killed
    # inside the effect), and one held for approval
    dead = jobs.dead_by_deadline(stack)
    unknown = jobs.effect_in_flight(stack, "w1")
    jobs.ensure_worker(stack, "w2")
    held = jobs.waiting_for_approval(stack)
    # When the operator opens the overview
    sign_in(browser, stack.url, "ops")
    wait_until(lambda: text_of(browser, "[data-state=dead] .value") == "1", what="1 dead job")
    # And the last hour is drawn: sixty one-minute buckets, the dead job's end among them
    from selenium.webdriver.common.by import By

    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart svg g[data-bucket]")) == 60
    assert browser.find_elements(By.CSS_SELECTOR, "#chart svg rect.s-dead")
    # Then the dead card leads to the dead jobs, and the row to the job
    _by_css(browser, "[data-state=dead] a.value").click()
    row = wait_until(lambda: _by_css(browser, f"tr[data-job-id='{dead}'] a.job-link"), what="row")
    assert "deadline" in text_of(browser, f"tr[data-job-id='{dead}'] .last-error")
    row.click()
    wait_until(lambda: _state_shown(browser) == "dead", what="the dead job's page")
    assert "deadline_exceeded" in text_of(browser, "#job-facts")
    # When they replay it, confirming in the dialog
    _by_css(browser, "#act-replay").click()
    assert _by_css(browser, "#dialog").get_attribute("open") is not None
    _confirm(browser, "the report server is back")
    # Then the job is queued again under the same id, and then succeeds
    flash = wait_until(lambda: text_of(browser, "#flash"), what="the replay's answer")
    assert "Replayed by ops" in flash and "now queued" in flash
    wait_until(lambda: _state_shown(browser) == "succeeded", timeout=40, what="succeeded")
    replayed = _by_css(browser, "#timeline li[data-event=replayed]").text
    assert "by ops" in replayed and "the report server is back" in replayed
    assert "attempt 1" in _by_css(browser, "#timeline li[data-event=succeeded]").text
    view = jobs.ops_view(stack, dead)
    assert (view["job_id"], view["state"], view["replays"]) == (dead, "succeeded", 1)
    # Given the unknown job, found by its id
    jobs.wait_state(stack, unknown, "unknown")
    search = _by_css(browser, "#search-id")
    search.send_keys(unknown)
    _by_css(browser, "#search-go").click()
    wait_until(lambda: _state_shown(browser) == "unknown", what="the unknown job's page")
    # And its effect is shown as in flight, under the key a replay would use again, and the
    # attempt that ended it names its worker and when it started
    effect = text_of(browser, "[data-fact='effect in flight']")
    assert f"{unknown}:0" in effect, effect
    ended = text_of(browser, "#timeline li[data-event=lease_expired]")
    assert "worker w1@" in ended and "started 20" in ended and "effect_uncertain" in ended
    # When they start a replay, it cannot be confirmed until they say they checked the provider
    _by_css(browser, "#act-replay").click()
    _by_css(browser, "#dialog-note").send_keys("checked")
    assert not _by_css(browser, "#dialog-confirm").is_enabled()
    _by_css(browser, "#dialog-checked").click()
    assert _by_css(browser, "#dialog-confirm").is_enabled()
    _by_css(browser, "#dialog-cancel").click()
    # When they resolve it as succeeded with the provider's receipt
    _by_css(browser, "#act-resolve").click()
    _by_css(browser, "#dialog-outcome-succeeded").click()
    _by_css(browser, "#dialog-receipt").send_keys("rcpt-42")
    _confirm(browser, "the provider shows the charge")
    # Then it is settled, and says by whom, with the receipt
    wait_until(lambda: _state_shown(browser) == "succeeded", what="resolved")
    resolution = text_of(browser, "[data-fact=resolution]")
    assert "succeeded by ops" in resolution and "rcpt-42" in resolution
    assert jobs.ops_view(stack, unknown)["resolution"]["receipt"] == "rcpt-42"
    # Given a job another operator cancels while this one's dialog is open
    browser.get(f"{stack.url}/console#/job/{held}")
    wait_until(lambda: _state_shown(browser) == "waiting_approval", what="the held job")
    _by_css(browser, "#act-cancel").click()
    status, _ = stack.request("POST", f"/ops/jobs/{held}/cancel", {"note": "first"}, user="ops")
    assert status == 202
    _confirm(browser, "second")
    # Then the 409 is its reason, in the dialog, not an error page
    message = wait_until(lambda: text_of(browser, "#dialog-message"), what="the 409")
    assert "Not done" in message and "not_cancellable" in message
    assert "conflict" in (_by_css(browser, "#dialog-message").get_attribute("class") or "")
    _by_css(browser, "#dialog-cancel").click()


def test_a_non_operator_gets_the_403_page(stack: LocalStackProcess, browser: Any) -> None:
    # When alice (a member of a tenant, not an operator) signs in
    sign_in(browser, stack.url, "alice")
    # Then she sees the operators-only page and no data
    page = wait_until(lambda: text_of(browser, "#forbidden"), what="the 403 page")
    assert "403" in page and "Operators only" in page and "alice" in page
    assert text_of(browser, "#overview") == "" and text_of(browser, "#counts") == ""


def test_job_strings_show_as_text_never_as_markup(stack: LocalStackProcess, browser: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    # Given a job whose error names a <script> step and whose history holds an <img onerror>
    # note, and a title job whose bookmark URL carries both
    jobs.ensure_worker(stack, "w2")
    failed = jobs.failed_with_markup(stack)
    title = jobs.title_job_with_markup(stack)
    sign_in(browser, stack.url, "ops")
    wait_until(lambda: text_of(browser, "#counts"), what="the overview")
    for job_id, shown in (
        (failed, [("[data-fact=error]", jobs.XSS_STEP), (".note-text", jobs.XSS_NOTE)]),
        (title, [("#job-url", jobs.XSS_URL), ("#payload", json.dumps(jobs.XSS_URL))]),
    ):
        # When the operator opens the job
        browser.get(f"{stack.url}/console#/job/{job_id}")
        wait_until(lambda job_id=job_id: text_of(browser, "#job-id") == job_id, what=job_id)
        # Then each string is there, literally, as text
        for selector, literal in shown:
            assert literal in text_of(browser, selector), (selector, literal)
        # And no element was injected, no script ran, no alert fired
        assert browser.find_elements(By.CSS_SELECTOR, "main img, main script") == []
        scripts = [s.get_attribute("src") for s in browser.find_elements(By.TAG_NAME, "script")]
        assert scripts == [f"{stack.url}/console/console.js"]
        assert browser.execute_script("return window.__xss === undefined") is True
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018
    # And the page's link to the bookmark's page is that URL, nothing else
    link = browser.find_element(By.ID, "job-url")
    assert link.tag_name == "a" and link.get_attribute("rel") == "noopener noreferrer"


def test_a_refused_token_goes_back_to_sign_in_and_never_into_the_url(
    stack: LocalStackProcess, browser: Any
) -> None:
    # Given an ID token pasted into the sign-in box (the local gateway knows no JWT: a 401)
    token = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJtYWxsb3J5In0.sig"
    browser.get(f"{stack.url}/console")
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"{stack.url}/console#/overview")
    wait_until(lambda: _by_css(browser, "#signin-token"), what="the sign-in box")
    _by_css(browser, "#signin-token").send_keys(token)
    _by_css(browser, "#signin-go").click()
    # Then the console says the API refused it, forgets it, and no URL ever held it
    message = wait_until(lambda: text_of(browser, "#signin-message"), what="the 401")
    assert "401" in message
    assert browser.execute_script("return sessionStorage.length") == 0
    assert token not in browser.current_url
    history = browser.execute_script("return performance.getEntries().map(e => e.name)")
    assert history and not [name for name in history if token in name]


def test_the_overview_counts_every_outcome_shows_delayed_jobs_and_what_a_job_waits_for(
    stack: LocalStackProcess, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    # Given two jobs that succeed, one that succeeds after a retry, and one delayed an hour
    jobs.ensure_worker(stack, "w2")
    ran = [jobs.submit(stack, jobs.synthetic([{"name": "ok"}])) for _ in range(2)]
    ran.append(jobs.submit(stack, jobs.synthetic([{"name": "flaky", "fail_times": 1}])))
    delayed = jobs.submit(stack, jobs.synthetic([{"name": "later"}], delay_seconds=3600))
    for job_id in ran:
        stack.wait_for(job_id, {"succeeded"}, timeout=60)

    def counted() -> dict[str, Any] | None:
        # an outcome's counter is written just after the outcome: a moment after its state
        status, summary = stack.request("GET", "/ops/summary", user="ops")
        assert status == 200, summary
        outcomes = summary["outcomes_last_hour"]
        return summary if outcomes["succeeded"] >= 3 and outcomes["retried"] >= 1 else None

    summary = wait_until(counted, timeout=15, what="3 successes and a retry counted")
    assert summary["delayed"] == 1
    # When the operator opens the overview
    sign_in(browser, stack.url, "ops")
    wait_until(lambda: text_of(browser, "#counts"), what="the overview")
    # Then succeeded is an exact count (the API's), not n/a, and so is cancelled
    succeeded = text_of(browser, "[data-state=succeeded] .value")
    assert succeeded == str(summary["counts"]["succeeded"]), succeeded
    assert text_of(browser, "[data-state=cancelled] .value") != "n/a"
    assert "last hour" in text_of(browser, "[data-state=succeeded] .label")
    # And the delayed job is shown as delayed, not as queued, and never beside "Nothing is queued"
    assert text_of(browser, "[data-state=delayed] .value") == "1"
    assert text_of(browser, "[data-state=queued] .value") == "0"
    none = text_of(browser, "#oldest-none")
    assert "Nothing is queued" not in none and "1 delayed job waits" in none, none
    # And the chart is the last hour per minute, with the successes in it
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart svg g[data-bucket]")) == 60
    assert browser.find_elements(By.CSS_SELECTOR, "#chart svg rect.s-succeeded")
    legend = text_of(browser, "#chart [data-series=succeeded]")
    assert legend == f"succeeded {summary['outcomes_last_hour']['succeeded']}", legend
    assert "every 5 min" in text_of(browser, "#refreshed")
    # And the delayed job's page says what it waits for
    browser.get(f"{stack.url}/console#/job/{delayed}")
    wait_until(lambda: _state_shown(browser) == "queued", what="the delayed job's page")
    waits = text_of(browser, "[data-fact='waiting for']")
    due = jobs.ops_view(stack, delayed)["waiting_for"]["time"]
    assert waits.startswith("time ") and due[:16].replace("T", " ") in waits, (waits, due)
    # ...and names its trace, saying that this stack records none to link to (no --traces)
    assert text_of(browser, "#trace-id") == jobs.ops_view(stack, delayed)["trace_id"]
    assert "search the logs for this trace_id" in text_of(browser, "#trace-none")
    assert not browser.find_elements(By.CSS_SELECTOR, "#trace-link")
    # And the list of queued jobs says it too, row by row
    browser.get(f"{stack.url}/console#/jobs?state=queued")
    cell = f"tr[data-job-id='{delayed}'] .waiting-for"
    wait_until(lambda: text_of(browser, cell), what="the delayed job's row")
    assert text_of(browser, cell) == waits, (text_of(browser, cell), waits)


def test_the_overview_shows_a_short_wait_under_its_name(
    stack: LocalStackProcess, browser: Any
) -> None:
    # Given a job delayed 5 minutes (within SQS's reach: queued, not in the due index)
    soon = jobs.submit(stack, jobs.synthetic([{"name": "soon"}], delay_seconds=300))
    assert jobs.ops_view(stack, soon)["waiting_for"]["time"]
    # When the operator opens the overview
    sign_in(browser, stack.url, "ops")
    wait_until(lambda: text_of(browser, "#counts"), what="the overview")
    # Then a card counts the queued jobs waiting for a time, under that name
    card = "#waiting [data-waiting=time]"
    assert text_of(browser, f"{card} .label") == "waiting for time"
    assert int(text_of(browser, f"{card} .value")) >= 1
    assert "a delay due more than 15 minutes ahead is in the delayed card" in text_of(
        browser, "#waiting-scope"
    )
