"""The billable enrichment provider and its client over real sockets (arch §6): a lost answer is
never a second charge, a repeated idempotent key is never a second charge, and the client says
whether a failed call was sent. Servers bind 127.0.0.1 on port 0; ledgers live in tmp_path."""

from __future__ import annotations

import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from leasehold_apps.reading_list.provider import (
    Capability,
    EnrichmentProvider,
    LookupNotSupported,
    ProviderOutcomeUnknown,
    ProviderRejected,
    ProviderUnavailable,
)
from leasehold_dev.local.provider import ProviderServer
from tests.support.provider import PAGE, charges, client_for, closed_port, raw, wait_until

StartProvider = Callable[..., ProviderServer]


@pytest.fixture
def start_provider(tmp_path: Path) -> Iterator[StartProvider]:
    """Starts providers over `tmp_path/ledger.sqlite3` (unless told otherwise); stops them all."""
    started: list[ProviderServer] = []

    def start(capability: str, **options: Any) -> ProviderServer:
        options.setdefault("db_path", tmp_path / "ledger.sqlite3")
        server = ProviderServer(capability=capability, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


# --- repeats: idempotent mode dedupes, the others charge again ---------------------------------


def test_idempotent_repeat_returns_the_first_receipt_and_charges_once(
    start_provider: StartProvider,
) -> None:
    # Given an idempotent provider that already enriched one key
    server = start_provider("idempotent")
    client = client_for(server)
    first = client.submit("job-1:enrich:v1", url=PAGE, text="Leases expire. Workers renew them.")
    # When the same key is sent again (even with another body)
    again = client.submit("job-1:enrich:v1", url=PAGE)
    # Then the first answer comes back whole and the ledger holds one charge
    assert again == first
    assert first.receipt.startswith("rcpt_")
    assert charges(server)["count"] == 1


@pytest.mark.parametrize("mode", ["lookup", "none"])
def test_without_idempotent_keys_a_repeat_is_a_second_charge(
    start_provider: StartProvider, mode: str
) -> None:
    server = start_provider(mode)
    client = client_for(server)
    first = client.submit("job-2:enrich:v1", url=PAGE)
    second = client.submit("job-2:enrich:v1", url=PAGE)
    assert first.receipt != second.receipt
    listed = charges(server, "job-2:enrich:v1")
    assert listed["count"] == 2
    assert [c["receipt"] for c in listed["charges"]] == [first.receipt, second.receipt]


def test_concurrent_requests_with_one_idempotent_key_charge_exactly_once(
    start_provider: StartProvider,
) -> None:
    # Given eight clients released at once on each of five keys in turn (five chances to race)
    server = start_provider("idempotent")
    threads_count, keys = 8, [f"race-{round_}" for round_ in range(5)]
    start_line = threading.Barrier(threads_count, timeout=10)
    receipts: dict[str, list[str]] = {key: [] for key in keys}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def submit_each_key() -> None:
        client = client_for(server)  # its own connection pool, so the requests truly overlap
        try:
            for key in keys:
                start_line.wait()
                receipt = client.submit(key, url=PAGE).receipt
                with lock:
                    receipts[key].append(receipt)
        except BaseException as exc:  # surfaced by the assertion below
            with lock:
                errors.append(exc)
            start_line.abort()

    threads = [threading.Thread(target=submit_each_key) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # Then every caller of a key got that key's one receipt, and each key was charged once
    assert not errors
    for key in keys:
        assert len(receipts[key]) == threads_count and len(set(receipts[key])) == 1, key
        assert charges(server, key)["count"] == 1, key
    assert charges(server)["count"] == len(keys)


# --- lost answers, failures, slowness, nobody listening ---------------------------------------


@pytest.mark.parametrize("mode", ["idempotent", "lookup", "none"])
def test_a_lost_response_is_an_unknown_outcome_whose_charge_exists(
    start_provider: StartProvider, mode: str
) -> None:
    server = start_provider(mode)
    client = client_for(server)
    with pytest.raises(ProviderOutcomeUnknown):
        client.submit("lost-1", url=PAGE, fault="lose_response")
    listed = charges(server, "lost-1")
    assert listed["count"] == 1 and listed["charges"][0]["amount"] == 1


def test_lookup_after_a_lost_response_finds_the_receipt_that_was_charged(
    start_provider: StartProvider,
) -> None:
    server = start_provider("lookup")
    client = client_for(server)
    with pytest.raises(ProviderOutcomeUnknown):
        client.submit("lost-2", url=PAGE, text="One page. About leases.", fault="lose_response")
    found = client.lookup("lost-2")
    assert found.status == "succeeded" and found.receipt is not None
    assert found.receipt.receipt == charges(server, "lost-2")["charges"][0]["receipt"]
    assert found.receipt.summary == "One page. About leases."


def test_idempotent_recovery_after_a_lost_response_charges_nothing_more(
    start_provider: StartProvider,
) -> None:
    # The engine's recovery with idempotent_key: call again with the same key
    server = start_provider("idempotent")
    client = client_for(server)
    with pytest.raises(ProviderOutcomeUnknown):
        client.submit("lost-3", url=PAGE, fault="lose_response")
    recovered = client.submit("lost-3", url=PAGE)
    assert recovered.receipt == charges(server, "lost-3")["charges"][0]["receipt"]
    assert charges(server)["count"] == 1


@pytest.mark.parametrize("mode", ["lookup", "idempotent"])
def test_lookup_of_an_unknown_key_is_not_found(start_provider: StartProvider, mode: str) -> None:
    server = start_provider(mode)
    assert client_for(server).lookup("never-sent").status == "not_found"
    assert charges(server)["count"] == 0


def test_an_injected_failure_is_rejected_and_charges_nothing(
    start_provider: StartProvider,
) -> None:
    server = start_provider("idempotent")
    client = client_for(server)
    with pytest.raises(ProviderRejected) as caught:
        client.submit("fail-1", url=PAGE, fault="fail")
    assert caught.value.http_status == 500 and caught.value.provider_code == "injected_failure"
    assert charges(server)["count"] == 0
    assert client.lookup("fail-1").status == "not_found"


def test_a_read_timeout_is_an_unknown_outcome_and_the_charge_lands_later(
    start_provider: StartProvider,
) -> None:
    # Given a provider that answers after 0.6 s and a client that waits 0.2 s
    server = start_provider("lookup", slow_seconds=0.6)
    client = client_for(server, timeout_s=0.2)
    # When the client gives up
    with pytest.raises(ProviderOutcomeUnknown):
        client.submit("slow-1", url=PAGE, fault="slow")
    # Then the provider still did the work: the charge appears
    assert wait_until(lambda: charges(server, "slow-1")["count"] == 1, timeout_s=5)


def test_a_slow_answer_within_the_timeout_is_an_ordinary_success(
    start_provider: StartProvider,
) -> None:
    server = start_provider("idempotent", slow_seconds=0.2)
    receipt = client_for(server, timeout_s=3).submit("slow-2", url=PAGE, fault="slow")
    assert charges(server, "slow-2")["charges"][0]["receipt"] == receipt.receipt


def test_nothing_listening_is_unavailable_not_unknown() -> None:
    client = EnrichmentProvider(f"http://127.0.0.1:{closed_port()}", Capability.IDEMPOTENT_KEY)
    with pytest.raises(ProviderUnavailable):
        client.submit("k", url=PAGE)
    with pytest.raises(ProviderUnavailable):
        client.lookup("k")


# --- durability -------------------------------------------------------------------------------


def test_the_ledger_and_the_first_answers_survive_a_restart(
    start_provider: StartProvider, tmp_path: Path
) -> None:
    # Given charges made by one provider process, one of them with a lost answer
    db_path = tmp_path / "restart.sqlite3"
    first_server = start_provider("idempotent", db_path=db_path)
    client = client_for(first_server)
    kept = client.submit("durable-1", url=PAGE)
    with pytest.raises(ProviderOutcomeUnknown):
        client.submit("durable-2", url=PAGE, fault="lose_response")
    before = charges(first_server)
    first_server.stop()
    # When another provider starts on the same ledger
    second_server = start_provider("idempotent", db_path=db_path)
    second_client = client_for(second_server)
    # Then it lists every charge and answers the old keys with their first receipts
    assert charges(second_server) == before and before["count"] == 2
    assert second_client.submit("durable-1", url=PAGE) == kept
    assert second_client.lookup("durable-2").receipt is not None
    assert charges(second_server)["count"] == 2


# --- lookups that must not pass for "not found" -----------------------------------------------


def test_a_provider_without_lookup_answers_501_never_not_found(
    start_provider: StartProvider,
) -> None:
    server = start_provider("none")
    status, body = raw(server, "GET", "/v1/enrichments/some-key")
    assert (status, body["error"]) == (501, "lookup_not_supported")
    # A client that wrongly declares status_lookup gets an error, not `not_found`
    misconfigured = EnrichmentProvider(server.url, Capability.STATUS_LOOKUP)
    with pytest.raises(LookupNotSupported):
        misconfigured.lookup("some-key")
    # A client that declares none refuses before sending
    with pytest.raises(LookupNotSupported):
        client_for(server).lookup("some-key")


# --- input validation and the charge list -----------------------------------------------------

GOOD_BODY = b'{"url": "https://example.org/a"}'


@pytest.mark.parametrize(
    ("headers", "body", "code"),
    [
        ({}, GOOD_BODY, "missing_idempotency_key"),
        ({"Idempotency-Key": "has space"}, GOOD_BODY, "invalid_idempotency_key"),
        ({"Idempotency-Key": "k" * 201}, GOOD_BODY, "invalid_idempotency_key"),
        ({"Idempotency-Key": "k/1"}, GOOD_BODY, "invalid_idempotency_key"),
        ({"Idempotency-Key": "k", "X-Fault": "explode"}, GOOD_BODY, "unknown_fault"),
        ({"Idempotency-Key": "k"}, b"not json", "invalid_json"),
        ({"Idempotency-Key": "k"}, b"[1, 2]", "invalid_body"),
        ({"Idempotency-Key": "k"}, b'{"url": "https://e.org", "x": 1}', "invalid_body"),
        ({"Idempotency-Key": "k"}, b"{}", "invalid_url"),
        ({"Idempotency-Key": "k"}, b'{"url": 5}', "invalid_url"),
        ({"Idempotency-Key": "k"}, b'{"url": "ftp://e.org/f"}', "invalid_url"),
        ({"Idempotency-Key": "k"}, b'{"url": "https://"}', "invalid_url"),
        ({"Idempotency-Key": "k"}, b'{"url": "https://e.org", "text": 3}', "invalid_text"),
    ],
)
def test_invalid_enrichment_requests_are_400_and_charge_nothing(
    start_provider: StartProvider, headers: dict[str, str], body: bytes, code: str
) -> None:
    server = start_provider("idempotent")
    status, answer = raw(
        server,
        "POST",
        "/v1/enrichments",
        headers={"Content-Type": "application/json", **headers},
        body=body,
    )
    assert (status, answer["error"]) == (400, code)
    assert isinstance(answer["message"], str) and answer["message"]
    assert charges(server)["count"] == 0


def test_oversized_bodies_and_bad_queries_are_refused(start_provider: StartProvider) -> None:
    server = start_provider("lookup")
    big = b'{"url": "https://e.org", "text": "' + b"x" * (300 * 1024) + b'"}'
    status, answer = raw(
        server, "POST", "/v1/enrichments", headers={"Idempotency-Key": "k"}, body=big
    )
    assert (status, answer["error"]) == (413, "body_too_large")
    assert raw(server, "GET", "/v1/charges?key=bad%20key")[0] == 400
    assert raw(server, "GET", "/v1/charges?limit=5")[0] == 400
    assert raw(server, "GET", "/v1/enrichments/bad%20key")[0] == 400
    assert raw(server, "GET", "/v1/charges", headers={"X-Fault": "fail"})[0] == 400
    assert raw(server, "DELETE", "/v1/charges")[0] == 405
    assert raw(server, "GET", "/v2/anything")[0] == 404
    assert charges(server)["count"] == 0


def test_the_charge_list_filters_by_key(start_provider: StartProvider) -> None:
    server = start_provider("none", amount=3)
    client = client_for(server)
    receipts = [client.submit(key, url=PAGE).receipt for key in ("a", "b", "a")]
    only_a = charges(server, "a")
    assert only_a["count"] == 2
    assert [c["receipt"] for c in only_a["charges"]] == [receipts[0], receipts[2]]
    assert all(c["key"] == "a" and c["amount"] == 3 and c["at"] for c in only_a["charges"])
    assert charges(server)["count"] == 3
    assert charges(server, "nobody") == {"count": 0, "charges": []}


def test_health_names_the_capability(start_provider: StartProvider) -> None:
    server = start_provider("lookup")
    assert raw(server, "GET", "/health") == (200, {"status": "ok", "capability": "lookup"})


def test_stopping_cuts_a_slow_request_short_without_charging(
    start_provider: StartProvider,
) -> None:
    server = start_provider("idempotent", slow_seconds=30)
    client = client_for(server, timeout_s=10)
    outcome: list[BaseException] = []

    def slow_submit() -> None:
        try:
            client.submit("stop-1", url=PAGE, fault="slow")
        except ProviderOutcomeUnknown as exc:
            outcome.append(exc)

    caller = threading.Thread(target=slow_submit)
    caller.start()
    assert wait_until(lambda: len(server._connections) == 1, timeout_s=5)
    time.sleep(0.3)  # the request is read and waiting out its 30 s
    began = time.monotonic()
    server.stop()
    caller.join(timeout=10)
    assert time.monotonic() - began < 5
    assert len(outcome) == 1 and outcome[0].http_status == 503  # type: ignore[attr-defined]
    assert server.ledger.list_charges() == (0, [])


def test_the_cli_serves_until_sigterm_and_keeps_its_ledger(tmp_path: Path) -> None:
    # Given `leasehold provider serve` on a free port
    db_path = tmp_path / "cli.sqlite3"
    command = [sys.executable, "-m", "leasehold_dev.cli", "provider", "serve", "--port", "0"]
    command += ["--capability", "idempotent", "--db", str(db_path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 30)
        line = process.stdout.readline() if ready else ""
        match = re.search(r"ready at (http://127\.0\.0\.1:\d+)", line)
        assert match, f"no ready line: {line!r}"
        # When a client enriches through it and the process is told to stop
        receipt = EnrichmentProvider(match.group(1), Capability.IDEMPOTENT_KEY).submit(
            "cli-1", url=PAGE
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
    # Then the charge is in the ledger file it was given
    with ProviderServer(capability="idempotent", db_path=db_path) as server:
        assert charges(server)["charges"][0]["receipt"] == receipt.receipt
