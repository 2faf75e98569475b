"""`make console-shots`: screenshots of the operator console on a local stack of its own, taken
with headless Chromium from Debian's packages (docs/console/*.png, shown in the README):

- `overview.png` — counts by state, queue and DLQ depths, the oldest queued job, the last hour;
- `job-timeline.png` — one job's timeline: attempts (epoch, worker, start, end, error), an
  operator's replay with its note, the attempts after it;
- `replay-dialog.png` — the replay dialog of an `unknown` job, "I checked the provider" and all.

The jobs are made the way they happen for real (tests/support/console_jobs.py): a deadline passed
with no worker, a worker killed inside an effect, retries, a failure, a pause for approval, a
poison message in the DLQ. About a minute."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import console_jobs as jobs  # noqa: E402
from tests.support.browser import (  # noqa: E402
    headless_chromium,
    missing_browser,
    sign_in,
    text_of,
    wait_until,
)
from tests.support.localstack import LocalStackProcess  # noqa: E402


def _make_jobs(stack: LocalStackProcess) -> dict[str, str]:
    made = {"dead": jobs.dead_by_deadline(stack)}
    made["unknown"] = jobs.effect_in_flight(stack, "w1")
    jobs.ensure_worker(stack, "w2")
    made["timeline"] = jobs.submit(
        stack,
        jobs.synthetic(
            [{"name": "fetch-rates", "duration_ms": 300}, {"name": "post-ledger", "fail_times": 5}],
            max_attempts=2,
        ),
    )
    for _ in range(2):
        jobs.submit(stack, jobs.synthetic([{"name": "resize", "fail_times": 1}]), user="bob")
    jobs.submit(stack, jobs.synthetic([{"name": "parse", "fatal": True}]), user="carol")
    jobs.waiting_for_approval(stack)
    jobs.wait_state(stack, made["timeline"], "dead", timeout=60)
    status, _ = stack.request(
        "POST",
        f"/ops/jobs/{made['timeline']}/replay",
        {"note": "the ledger API's outage is over (INC-2041)"},
        user="ops",
    )
    assert status == 202
    jobs.wait_state(stack, made["timeline"], "dead", timeout=60)
    jobs.wait_state(stack, made["unknown"], "unknown", timeout=60)
    subprocess.run(
        [sys.executable, "-m", "leasehold_dev.cli", "ops", "dlq-send", "--state",
         str(stack.state), "--body", "not a wake-up"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    # Two queued jobs nobody takes yet (a minute's delay): the oldest queued job and its age
    stack.kill_worker("w2")
    jobs.submit(stack, jobs.synthetic([{"name": "nightly-export"}]))
    jobs.submit(stack, jobs.synthetic([{"name": "send-digest"}]), user="bob")
    time.sleep(3)
    return made


def _whole_page(driver: Any, path: Path) -> None:
    """A screenshot of the whole page: the window grown to the document's height first."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, int(height) + 140)
    time.sleep(0.4)
    driver.save_screenshot(str(path))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "console")
    args = parser.parse_args()
    missing = missing_browser()
    if missing:
        print(f"console-shots: {missing}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="leasehold-shots-") as workdir:
        stack = LocalStackProcess(Path(workdir), workers=0)
        try:
            made = _make_jobs(stack)
            with headless_chromium(1280, 1180) as driver:
                sign_in(driver, stack.url, "ops")
                wait_until(lambda: text_of(driver, "#chart"), what="the overview")
                _whole_page(driver, args.out / "overview.png")
                driver.get(f"{stack.url}/console#/job/{made['timeline']}")
                wait_until(lambda: text_of(driver, "#timeline"), what="the timeline")
                _whole_page(driver, args.out / "job-timeline.png")
                driver.set_window_size(1280, 900)
                driver.get(f"{stack.url}/console#/job/{made['unknown']}")
                wait_until(lambda: text_of(driver, "#job-state") == "unknown", what="unknown")
                driver.find_element("id", "act-replay").click()
                driver.find_element("id", "dialog-checked").click()
                driver.find_element("id", "dialog-note").send_keys(
                    "provider dashboard: no charge under this key; replaying"
                )
                time.sleep(0.3)
                driver.save_screenshot(str(args.out / "replay-dialog.png"))
        finally:
            stack.stop()
    for name in ("overview.png", "job-timeline.png", "replay-dialog.png"):
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
