"""SSRF vetting of title-fetch URLs (arch §5), with a fake resolver: no network, no sockets.

Each row is one URL and what the live fetcher's policy must say about it before any
connection: the error code, or the addresses it may connect to.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field

import pytest

from leasehold.domain.errors import ValidationError
from leasehold_apps.reading_list.titles import TitleFetchError, validate_bookmark_url
from leasehold_apps.reading_list.titles.addresses import refusal_reason, vet_url
from leasehold_apps.reading_list.titles.live import LiveFetcher
from leasehold_apps.reading_list.titles.urls import parse_fetch_url

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:4700:4700::1111"

DNS: dict[str, list[str]] = {
    "example.com": [PUBLIC_V4],
    "v6.example.com": [PUBLIC_V6],
    "dual.example.com": [PUBLIC_V4, PUBLIC_V6],
    "xn--bcher-kva.example": [PUBLIC_V4],
    "localhost": ["127.0.0.1", "::1"],
    "internal.test": ["10.1.2.3"],
    "metadata.test": ["169.254.169.254"],
    "metadata-v6.test": ["fd00:ec2::254"],
    "cgnat.test": ["100.100.100.100"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "multicast.test": ["239.255.255.250"],
    "zero.test": ["0.0.0.0"],
    "public-then-private.test": [PUBLIC_V4, "192.168.0.10"],
    "private-then-public.test": ["172.20.0.1", PUBLIC_V4],
    "public-then-private-v6.test": [PUBLIC_V6, "fc00::5"],
    "public-then-loopback.test": [PUBLIC_V4, "127.0.0.53"],
    "garbage.test": ["not-an-address"],
}


@dataclass
class FakeResolver:
    """Answers from `DNS`; an unknown name is NXDOMAIN. Records every lookup."""

    calls: list[tuple[str, int]] = field(default_factory=list)

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in DNS:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return DNS[host]


REFUSED = [
    # loopback, in every spelling
    ("http://127.0.0.1/", "blocked_address"),
    ("http://127.0.0.1./", "blocked_address"),
    ("http://127.1/", "bad_url"),
    ("http://2130706433/", "bad_url"),
    ("http://0x7f.1/", "bad_url"),
    ("http://0x7f000001/", "bad_url"),
    ("http://0177.0.0.1/", "bad_url"),
    ("http://127.000.000.001/", "bad_url"),
    ("http://127.0.0.1.1/", "bad_url"),
    ("http://256.0.0.1/", "bad_url"),
    ("http://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11/", "blocked_address"),
    ("http://[::1]/", "blocked_address"),
    ("http://[0:0:0:0:0:0:0:1]/", "blocked_address"),
    ("http://[::ffff:127.0.0.1]/", "blocked_address"),
    ("http://[::ffff:7f00:1]/", "blocked_address"),
    ("http://[::127.0.0.1]/", "blocked_address"),
    ("http://localhost/", "blocked_address"),
    # private ranges
    ("http://10.0.0.1/", "blocked_address"),
    ("http://10.255.255.255/", "blocked_address"),
    ("http://172.16.0.1/", "blocked_address"),
    ("http://172.31.255.254/", "blocked_address"),
    ("http://192.168.1.1/", "blocked_address"),
    ("http://[fc00::1]/", "blocked_address"),
    ("http://[fdff:ffff::1]/", "blocked_address"),
    ("http://[::ffff:10.0.0.1]/", "blocked_address"),
    # cloud metadata and link-local
    ("http://169.254.169.254/latest/meta-data/", "blocked_address"),
    ("http://[fd00:ec2::254]/latest/meta-data/", "blocked_address"),
    ("http://[fe80::1]/", "blocked_address"),
    ("http://[64:ff9b::a9fe:a9fe]/", "blocked_address"),  # NAT64 form of 169.254.169.254
    # carrier-grade NAT, unspecified, multicast, broadcast, reserved, documentation
    ("http://100.64.0.1/", "blocked_address"),
    ("http://100.127.255.254/", "blocked_address"),
    ("http://0.0.0.0/", "blocked_address"),
    ("http://[::]/", "blocked_address"),
    ("http://224.0.0.1/", "blocked_address"),
    ("http://[ff02::1]/", "blocked_address"),
    ("http://255.255.255.255/", "blocked_address"),
    ("http://240.0.0.1/", "blocked_address"),
    ("http://192.0.2.10/", "blocked_address"),
    ("http://198.18.0.1/", "blocked_address"),
    ("http://[2001:db8::1]/", "blocked_address"),
    ("http://[fec0::1]/", "blocked_address"),
    # tunnels that embed an IPv4 address
    ("http://[2002:7f00:1::]/", "blocked_address"),  # 6to4 of 127.0.0.1
    ("http://[2002:a00:1::]/", "blocked_address"),  # 6to4 of 10.0.0.1
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "blocked_address"),  # Teredo
    ("http://[::ffff:8.8.8.8]/", "blocked_address"),  # IPv4-mapped: refused even if public
    # names that resolve to refused addresses
    ("http://internal.test/", "blocked_address"),
    ("http://metadata.test/", "blocked_address"),
    ("http://metadata-v6.test/", "blocked_address"),
    ("http://cgnat.test/", "blocked_address"),
    ("http://mapped.test/", "blocked_address"),
    ("http://multicast.test/", "blocked_address"),
    ("http://zero.test/", "blocked_address"),
    ("http://garbage.test/", "blocked_address"),
    # one public and one private address: the name is refused whole, in either order
    ("http://public-then-private.test/", "blocked_address"),
    ("http://private-then-public.test/", "blocked_address"),
    ("http://public-then-private-v6.test/", "blocked_address"),
    ("http://public-then-loopback.test/", "blocked_address"),
    # schemes
    ("ftp://example.com/", "bad_url"),
    ("file:///etc/passwd", "bad_url"),
    ("javascript:alert(1)", "bad_url"),
    ("gopher://example.com:70/_GET", "bad_url"),
    ("data:text/html,<title>x</title>", "bad_url"),
    ("//example.com/", "bad_url"),
    # ports
    ("http://example.com:22/", "blocked_port"),
    ("http://example.com:8080/", "blocked_port"),
    ("https://example.com:8443/", "blocked_port"),
    ("http://example.com:0/", "bad_url"),
    ("http://example.com:99999/", "bad_url"),
    ("http://example.com:80x/", "bad_url"),
    # userinfo and look-alikes
    ("http://a@b.com/", "bad_url"),
    ("http://a:b@b.com/", "bad_url"),
    ("http://@example.com/", "bad_url"),
    ("http://example.com@127.0.0.1/", "bad_url"),
    ("http://example.com\\@127.0.0.1/", "bad_url"),
    # malformed hosts
    ("http://%31%32%37.0.0.1/", "bad_url"),
    ("http://[::1%25eth0]/", "bad_url"),
    ("http://[127.0.0.1]/", "bad_url"),
    ("http://exa mple.com/", "bad_url"),
    ("http://example..com/", "bad_url"),
    ("http:///path-only", "bad_url"),
    ("http://example.com/" + "a" * 2030, "bad_url"),
    # a name that does not exist
    ("http://no-such-name.test/", "dns_failure"),
]

ALLOWED = [
    ("http://example.com/", [PUBLIC_V4]),
    ("HTTPS://Example.COM/Path?q=1#frag", [PUBLIC_V4]),
    ("https://example.com:443/a/b?c=d", [PUBLIC_V4]),
    ("http://example.com:80/", [PUBLIC_V4]),
    ("https://example.com:80/", [PUBLIC_V4]),
    ("http://example.com./", [PUBLIC_V4]),
    ("http://v6.example.com/", [PUBLIC_V6]),
    ("http://dual.example.com/", [PUBLIC_V4, PUBLIC_V6]),
    ("http://b\u00fccher.example/", [PUBLIC_V4]),
    ("http://8.8.8.8/", ["8.8.8.8"]),
    ("http://1.1.1.1/dns-query", ["1.1.1.1"]),
    ("http://[2606:4700:4700::1111]/", [PUBLIC_V6]),
    ("http://[64:ff9b::808:808]/", ["64:ff9b::808:808"]),  # NAT64 form of 8.8.8.8
    ("http://[2002:808:808::1]/", ["2002:808:808::1"]),  # 6to4 form of 8.8.8.8
    ("http://100.63.255.255/", ["100.63.255.255"]),  # just below carrier-grade NAT
    ("http://100.128.0.0/", ["100.128.0.0"]),  # just above it
    ("http://172.32.0.1/", ["172.32.0.1"]),  # just outside 172.16/12
    ("http://example.com/" + "a" * 2029, [PUBLIC_V4]),  # exactly 2048 characters
]

# Numeric hosts are judged from their spelling: these must be refused without any lookup.
NO_LOOKUP = [
    url
    for url, _ in REFUSED
    if "://" in url and not any(name in url for name in DNS) and ".test" not in url
]


def test_the_table_is_as_large_as_the_design_asks() -> None:
    assert len(REFUSED) + len(ALLOWED) >= 30
    assert len({url for url, _ in REFUSED + ALLOWED}) == len(REFUSED) + len(ALLOWED)


@pytest.mark.parametrize(("url", "code"), REFUSED)
def test_refused_urls_fail_with_their_code_and_are_not_retryable(url: str, code: str) -> None:
    # Given a resolver that answers from the table
    resolver = FakeResolver()

    # When the policy judges the URL, Then it refuses it with the expected code
    with pytest.raises(TitleFetchError) as caught:
        vet_url(url, resolver)
    assert caught.value.code == code, caught.value
    assert caught.value.retryable is False
    # and the message names no path or query (it ends up in logs and job errors)
    assert "latest" not in str(caught.value) and "_GET" not in str(caught.value)


@pytest.mark.parametrize(("url", "addresses"), ALLOWED)
def test_public_urls_pass_with_every_resolved_address(url: str, addresses: list[str]) -> None:
    target, vetted = vet_url(url, FakeResolver())
    assert [str(address) for address in vetted] == [str(ipaddress.ip_address(a)) for a in addresses]
    assert target.port in {80, 443}


@pytest.mark.parametrize("url", NO_LOOKUP)
def test_literal_and_numeric_hosts_are_judged_without_a_lookup(url: str) -> None:
    resolver = FakeResolver()
    with pytest.raises(TitleFetchError):
        vet_url(url, resolver)
    assert resolver.calls == []


def test_names_are_resolved_once_in_their_canonical_ascii_form() -> None:
    resolver = FakeResolver()
    target, _ = vet_url("https://B\u00dcCHER.example./x", resolver)
    assert resolver.calls == [("xn--bcher-kva.example", 443)]
    assert target.host == "xn--bcher-kva.example"
    assert target.host_header == "xn--bcher-kva.example"


def test_the_request_target_keeps_path_and_query_and_drops_the_fragment() -> None:
    target = parse_fetch_url("http://example.com/a b?q=\u00e9#frag".replace(" ", "%20"))
    assert target.target == "/a%20b?q=%C3%A9"
    assert parse_fetch_url("http://example.com").target == "/"
    assert parse_fetch_url("http://[2606:4700::1]:443/").host_header == "[2606:4700::1]:443"


def test_a_lookup_that_fails_for_a_while_is_retryable_and_a_missing_name_is_not() -> None:
    def temporary(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    with pytest.raises(TitleFetchError) as caught:
        vet_url("http://example.com/", temporary)
    assert (caught.value.code, caught.value.retryable) == ("dns_failure", True)
    with pytest.raises(TitleFetchError) as missing:
        vet_url("http://no-such-name.test/", FakeResolver())
    assert (missing.value.code, missing.value.retryable) == ("dns_failure", False)


def test_the_test_switch_admits_only_127_0_0_1_on_any_port() -> None:
    # Given the test-only switch
    allow = {"allow_test_loopback": True}
    # Then 127.0.0.1 passes on any port...
    _, vetted = vet_url("http://127.0.0.1:8080/", FakeResolver(), **allow)
    assert [str(a) for a in vetted] == ["127.0.0.1"]
    # ...and nothing else special does: other loopback, private, metadata, ::1
    for url in (
        "http://127.0.0.2:8080/",
        "http://10.0.0.1:8080/",
        "http://169.254.169.254/",
        "http://[::1]:8080/",
        "http://localhost:8080/",  # resolves to 127.0.0.1 *and* ::1
    ):
        with pytest.raises(TitleFetchError) as caught:
            vet_url(url, FakeResolver(), **allow)
        assert caught.value.code == "blocked_address", url


def test_refusal_reasons_cover_each_special_block() -> None:
    for address in ("10.0.0.1", "100.64.0.1", "169.254.169.254", "fd00:ec2::254", "ff05::2"):
        assert refusal_reason(ipaddress.ip_address(address)) is not None, address
    for address in (PUBLIC_V4, PUBLIC_V6, "8.8.4.4"):
        assert refusal_reason(ipaddress.ip_address(address)) is None, address


class ExplodingResolver:
    """Any lookup is a failure of the test: the policy must refuse first."""

    def __call__(self, host: str, port: int) -> list[str]:
        raise AssertionError(f"unexpected lookup of {host}")


@pytest.mark.parametrize(
    "url",
    [
        "http://internal.test/",
        "http://public-then-private.test/",
        "http://169.254.169.254/latest/meta-data/iam/",
        "http://2130706433/",
    ],
)
def test_the_live_fetcher_refuses_before_connecting(url: str) -> None:
    # Given a live fetcher whose resolver answers from the table (nothing here is reachable)
    fetcher = LiveFetcher(resolver=FakeResolver(), connect_timeout=0.2, total_timeout=0.5)

    # When it is asked for a refused URL, Then it fails at once, without a connection attempt
    # (a connection to 10/8 or 169.254/16 from this machine would end as a timeout instead)
    with pytest.raises(TitleFetchError) as caught:
        fetcher.fetch(url, mode=None, attempt=1, tick=lambda: True)
    assert caught.value.code in {"blocked_address", "bad_url"}
    assert caught.value.retryable is False


# --- validate_bookmark_url: the API's input rule -------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com",
        "https://example.com/a/b?c=d#e",
        "HTTP://EXAMPLE.COM/",
        "https://b\u00fccher.example/caf\u00e9",
        "http://localhost:8080/",  # ports and addresses are fetch-time rules
        "http://10.0.0.1/",
        "http://[::1]:3000/",
        "http://example.com/" + "a" * 2029,
    ],
)
def test_validate_bookmark_url_returns_the_url_unchanged(url: str) -> None:
    assert validate_bookmark_url(url) == url


@pytest.mark.parametrize(
    ("url", "words"),
    [
        (None, "string"),
        (42, "string"),
        (b"http://example.com/", "string"),
        ("", "empty"),
        ("http://example.com/" + "a" * 2030, "2048"),
        ("ftp://example.com/", "http"),
        ("javascript:alert(1)", "http"),
        ("example.com/page", "http"),
        ("http://", "host"),
        ("http:///x", "host"),
        ("http://user@example.com/", "user name"),
        ("http://user:pw@example.com/", "user name"),
        ("http://example.com/a b", "whitespace"),
        ("http://example.com/\tx", "whitespace"),
        (" http://example.com/", "whitespace"),
        ("http://example.com/\n", "whitespace"),
        ("http://example.com/\u00a0", "whitespace"),
        ("http://example.com/\u2028", "whitespace"),
        ("http://example.com/\x00", "control"),
        ("http://example.com/\x7f", "control"),
        ("http://exam\u200bple.com/", "control"),
        ("http://example.com\\@evil.test/", "backslash"),
        ("http://example.com:99999/", "port"),
        ("http://example.com:http/", "port"),
        ("http://2130706433/", "numeric"),
        ("http://0x7f.1/", "numeric"),
        ("http://[::1/", "well-formed"),
        ("http://exa%6dple.com/", "host"),
    ],
)
def test_validate_bookmark_url_refuses_with_a_message_naming_the_rule(
    url: object, words: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_bookmark_url(url)
    assert caught.value.code == "invalid_url"
    assert words in str(caught.value), str(caught.value)
