"""The console's workflow views in a real browser (headless Chromium, Selenium) against the
local stack with the test workflow kinds (tests/support/workflow_kinds.py): an operator opens a
parent, sees its children as a tree and the count of ended ones, opens a child's timeline,
signals it and sees it resume, cancels one branch, then the parent, and sees its last child
cancelled with it (decision WF6); and replays a failed branch from the tree, which runs again
while the parent's count of ended children takes its end back (WF4)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import console_jobs as jobs
from tests.support.browser import sign_in, text_of, wait_until
from tests.support.localstack import LocalStackProcess

ROOT = Path(__file__).resolve().parents[2]
KINDS = "leasehold_apps.synthetic,tests.support.workflow_kinds"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStackProcess]:
    running = LocalStackProcess(
        tmp_path_factory.mktemp("console-wf"), workers=1, kinds=KINDS, python_path=ROOT
    )
    try:
        yield running
    finally:
        running.stop()


def _click(driver: Any, selector: str) -> None:
    """Click `selector` (the page re-renders every second: a replaced element is looked up
    again)."""
    from selenium.webdriver.common.by import By

    def clicked() -> bool:
        driver.find_element(By.CSS_SELECTOR, selector).click()
        return True

    wait_until(clicked, what=selector)


def _child_state(driver: Any, child: str) -> str:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, f"#workflow li[data-child-id='{child}']")
    return str(found[0].get_attribute("data-state")) if found else ""


def _confirm(driver: Any, note: str) -> None:
    from selenium.webdriver.common.by import By

    wait_until(lambda: driver.find_element(By.ID, "dialog-note").is_displayed(), what="dialog")
    driver.find_element(By.ID, "dialog-note").send_keys(note)
    driver.find_element(By.ID, "dialog-confirm").click()


def test_an_operator_sees_the_tree_signals_a_branch_and_cancels_the_parent(
    stack: LocalStackProcess, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    # Given bob's parent whose three children each wait for the signal `reviewed`
    parent = jobs.submit(stack, {"kind": "ops_fan", "payload": {"n": 3, "wait": True}}, "bob")

    def children() -> list[dict[str, Any]]:
        status, page = stack.request("GET", f"/ops/jobs/{parent}/children", user="ops")
        assert status == 200, page
        return list(page["items"])

    wait_until(
        lambda: len(children()) == 3 and all(c["waiting_for"] for c in children()),
        what="three children waiting for their signal",
    )
    first, second, third = (c["job_id"] for c in children())
    # When the operator opens the parent
    sign_in(browser, stack.url, "ops")
    browser.get(f"{stack.url}/console#/job/{parent}")
    # Then its children are a tree, each a link to its page, and the count says 0 of 3
    wait_until(lambda: _child_state(browser, third) == "queued", what="the tree")
    links = browser.find_elements(By.CSS_SELECTOR, "#workflow ul.tree li a.job-link")
    assert [a.text for a in links] == [first, second, third]
    assert links[0].get_attribute("href").endswith(f"#/job/{first}")
    assert "children: 0 of 3 done" in text_of(browser, "#wf-waiting")
    # When the operator opens the first child's timeline and signals it from there
    _click(browser, f"li[data-child-id='{first}'] button.select-branch")
    wait_until(lambda: text_of(browser, "#branch-timeline"), what="the branch's timeline")
    _click(browser, "#branch-signal")
    wait_until(lambda: browser.find_element(By.ID, "dialog-signal-name").is_displayed())
    assert browser.find_element(By.ID, "dialog-signal-name").get_attribute("value") == "reviewed"
    browser.find_element(By.ID, "dialog-signal-body").send_keys('{"ok": true}')
    _confirm(browser, "approved by phone")
    # Then it resumes and succeeds, its timeline names the operator's act, the count moves
    wait_until(lambda: _child_state(browser, first) == "succeeded", what="the child resumed")
    wait_until(lambda: "1 of 3" in text_of(browser, "#wf-waiting"), what="1 of 3")
    wait_until(
        lambda: "approved by phone" in text_of(browser, "#branch-timeline [data-event=signaled]"),
        what="the signal in the branch's timeline",
    )
    # When the operator cancels the second branch, then the parent
    _click(browser, f"li[data-child-id='{second}'] button.select-branch")
    wait_until(lambda: f"Branch {second}" in text_of(browser, "#workflow"), what="branch 2")
    _click(browser, "#branch-cancel")
    _confirm(browser, "not needed")
    wait_until(lambda: _child_state(browser, second) == "cancelled", what="branch cancelled")
    wait_until(lambda: "2 of 3" in text_of(browser, "#wf-waiting"), what="2 of 3")
    _click(browser, "#act-cancel")
    _confirm(browser, "the tenant asked")
    # Then the parent is cancelled and so is its unfinished child
    wait_until(lambda: text_of(browser, "#job-state") == "cancelled", what="parent cancelled")
    wait_until(lambda: _child_state(browser, third) == "cancelled", what="third child cancelled")
    assert _child_state(browser, first) == "succeeded"


def test_an_operator_replays_a_failed_branch_and_the_count_takes_it_back(
    stack: LocalStackProcess, browser: Any, tmp_path: Path
) -> None:
    # Given bob's parent of two children waiting for `reviewed`, one failure tolerated, whose
    # first child failed (its gate shut): ended, so counted — 1 of 2
    gate = tmp_path / "gate"
    body = {"n": 2, "wait": True, "tolerate": 1, "gate": str(gate)}
    parent = jobs.submit(stack, {"kind": "ops_fan", "payload": body}, "bob")
    sign_in(browser, stack.url, "ops")
    browser.get(f"{stack.url}/console#/job/{parent}")
    wait_until(lambda: "1 of 2" in text_of(browser, "#wf-waiting"), what="1 of 2 (a failure)")
    status, page = stack.request("GET", f"/ops/jobs/{parent}/children", user="ops")
    assert status == 200, page
    failed = page["items"][0]["job_id"]
    assert page["items"][0]["state"] == "failed"
    # When the gate opens and the operator replays that branch from the tree
    gate.touch()
    _click(browser, f"li[data-child-id='{failed}'] button.select-branch")
    wait_until(lambda: f"Branch {failed}" in text_of(browser, "#workflow"), what="the branch")
    _click(browser, "#branch-replay")
    _confirm(browser, "gate fixed")
    # Then it runs again (past its gate, to its wait) and the count takes its end back
    wait_until(lambda: "0 of 2" in text_of(browser, "#wf-waiting"), what="0 of 2")

    def branch() -> dict[str, Any]:
        status, view = stack.request("GET", f"/ops/jobs/{failed}", user="ops")
        assert status == 200, view
        return dict(view)

    # (`queued` at once when replayed; waiting for its signal only once it has run again)
    wait_until(
        lambda: (branch().get("waiting_for") or {}).get("signal") == "reviewed",
        what="the branch run again, to its wait",
    )
    wait_until(lambda: _child_state(browser, failed) == "queued", what="the tree shows it")
    assert "0 of 2" in text_of(browser, "#wf-waiting")
    assert [e["event"] for e in branch()["history"]].count("replayed") == 1
