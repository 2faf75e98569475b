"""The enrichment client's pure parts and the local provider's summarizer. No sockets: every
call here is refused before the client would open a connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from leasehold_apps.reading_list.provider import (
    PROVIDER_MODES,
    Capability,
    EnrichmentProvider,
    LookupNotSupported,
    ProviderRejected,
    is_valid_provider_key,
)
from leasehold_dev.local.page_summary import MAX_SUMMARY_CHARS, summarize
from leasehold_dev.local.provider import ProviderServer

NOWHERE = "http://127.0.0.1:9"  # never contacted: each call below is refused before sending


def test_provider_modes_and_capability_names_map_one_to_one() -> None:
    assert {Capability.parse(mode) for mode in PROVIDER_MODES} == set(Capability)
    assert Capability.parse("idempotent") is Capability.IDEMPOTENT_KEY
    assert Capability.parse("lookup") is Capability.STATUS_LOOKUP
    assert Capability.parse("none") is Capability.NONE
    for capability in Capability:
        assert Capability.parse(capability.value) is capability
        assert Capability.parse(capability.provider_mode) is capability
    assert [c.can_lookup for c in Capability] == [True, True, False]


def test_an_unknown_capability_names_the_accepted_values() -> None:
    with pytest.raises(ValueError, match="idempotent_key"):
        Capability.parse("maybe")


@pytest.mark.parametrize("key", ["k", "j_0190abc:enrich:v3", "a.b-c_d:e", "x" * 200])
def test_provider_keys_accepted(key: str) -> None:
    assert is_valid_provider_key(key)


@pytest.mark.parametrize("key", ["", "x" * 201, "a b", "a/b", "a?b", "é", "a\nb", None, 7])
def test_provider_keys_refused(key: object) -> None:
    assert not is_valid_provider_key(key)


def test_the_client_refuses_a_bad_key_or_fault_before_sending() -> None:
    client = EnrichmentProvider(NOWHERE, Capability.IDEMPOTENT_KEY)
    with pytest.raises(ProviderRejected, match="invalid provider key"):
        client.submit("bad key", url="https://e.org")
    with pytest.raises(ProviderRejected, match="unknown fault"):
        client.submit("k", url="https://e.org", fault="explode")
    with pytest.raises(ProviderRejected, match="invalid provider key"):
        client.lookup("a/b")


def test_a_client_without_lookup_refuses_to_look_up() -> None:
    with pytest.raises(LookupNotSupported, match="no status lookup"):
        EnrichmentProvider(NOWHERE, Capability.NONE).lookup("k")


@pytest.mark.parametrize(
    "base_url", ["127.0.0.1:80", "ftp://h", "http://", "http://h/?q=1", "http://h/#f"]
)
def test_the_client_refuses_a_malformed_base_url(base_url: str) -> None:
    with pytest.raises(ValueError, match="provider URL"):
        EnrichmentProvider(base_url, Capability.NONE)


def test_the_server_refuses_an_unknown_capability(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="capability"):
        ProviderServer(capability="idempotent_key", db_path=tmp_path / "x.db")


def test_a_summary_from_text_is_its_first_two_sentences_and_tags_its_frequent_words() -> None:
    text = (
        "Leases expire.  A worker whose lease expired is rejected! "
        "Workers renew a lease; a lease has an epoch. The epoch fences the lease."
    )
    summary, tags = summarize("https://e.org/x", text)
    assert summary == "Leases expire. A worker whose lease expired is rejected!"
    assert tags[:2] == ["lease", "epoch"]
    assert len(tags) <= 5 and "the" not in tags and "a" not in tags


def test_a_summary_without_text_comes_from_the_url() -> None:
    summary, tags = summarize("https://www.example.org/blog/durable-background_jobs.html", None)
    assert summary == "A page on example.org about blog durable background jobs."
    assert tags == ["blog", "durable", "background", "jobs", "example"]
    assert summarize("https://example.org/", "  ")[0] == "The home page of example.org."
    assert summarize("https://example.org/x/1", None)[0] == "A page on example.org."


def test_summaries_are_deterministic_and_bounded() -> None:
    long_text = "word " * 1000 + "."
    first = summarize("https://e.org/a", long_text)
    assert first == summarize("https://e.org/a", long_text)
    assert len(first[0]) <= MAX_SUMMARY_CHARS and first[0].endswith("…")
