"""Which IP addresses the live fetcher may connect to, and the one DNS lookup per hop.

The rule is an allow-list in spirit: an address passes only if it is global unicast. IPv4 must
be outside every special-purpose block (RFC 6890 and successors: this-network, private,
CGNAT, loopback, link-local with the cloud metadata address, IETF protocol assignments,
documentation, 6to4 relay, benchmarking, multicast, reserved, broadcast). IPv6 must sit in
2000::/3 (global unicast) and outside its special blocks; the forms that carry an IPv4 address
inside an IPv6 one are judged by that IPv4 address (6to4 2002::/16, NAT64 64:ff9b::/96) or
refused outright (IPv4-mapped, IPv4-compatible, Teredo, local-use NAT64). Python's
`is_global` is consulted too, so either source refusing is enough.

A host that resolves to several addresses passes only if *every* address passes: DNS answers
can be rotated or rebound between lookups, so one bad address condemns the name. The fetcher
then connects to one of the vetted addresses itself — never to the name — so there is no
second lookup for an attacker to answer differently.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable

from leasehold_apps.reading_list.titles.errors import TitleFetchError
from leasehold_apps.reading_list.titles.urls import HttpUrl, parse_fetch_url

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: (host, port) → the addresses the name resolves to, as strings. Tests pass a fake.
Resolver = Callable[[str, int], Iterable[str]]

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

_REFUSED_V4: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("0.0.0.0/8"), "this-network"),
    (_V4("10.0.0.0/8"), "private"),
    (_V4("100.64.0.0/10"), "carrier-grade NAT"),
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("169.254.0.0/16"), "link-local (cloud metadata)"),
    (_V4("172.16.0.0/12"), "private"),
    (_V4("192.0.0.0/24"), "IETF protocol assignments"),
    (_V4("192.0.2.0/24"), "documentation"),
    (_V4("192.88.99.0/24"), "6to4 relay anycast"),
    (_V4("192.168.0.0/16"), "private"),
    (_V4("198.18.0.0/15"), "benchmarking"),
    (_V4("198.51.100.0/24"), "documentation"),
    (_V4("203.0.113.0/24"), "documentation"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("240.0.0.0/4"), "reserved or broadcast"),
)

_GLOBAL_UNICAST_V6 = _V6("2000::/3")
_NAT64_V6 = _V6("64:ff9b::/96")
_SIX_TO_FOUR_V6 = _V6("2002::/16")
_TEREDO_V6 = _V6("2001::/32")
_REFUSED_V6: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("::ffff:0:0/96"), "IPv4-mapped"),
    (_V6("::/96"), "IPv4-compatible, loopback or unspecified"),
    (_V6("64:ff9b:1::/48"), "local-use NAT64"),
    (_TEREDO_V6, "Teredo"),
    (_V6("2001::/23"), "IETF protocol assignments"),
    (_V6("2001:db8::/32"), "documentation"),
    (_V6("3fff::/20"), "documentation"),
    (_V6("fc00::/7"), "unique local (includes the EC2 metadata address fd00:ec2::254)"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("fec0::/10"), "site-local"),
    (_V6("ff00::/8"), "multicast"),
)

_TEST_LOOPBACK = ipaddress.IPv4Address("127.0.0.1")


def refusal_reason(address: IPAddress, *, allow_test_loopback: bool = False) -> str | None:
    """Why the fetcher must not connect to `address`, or None when it is global unicast.

    `allow_test_loopback` lets exactly 127.0.0.1 through, for tests with local servers; every
    other address (private ranges included) is judged as usual.
    """
    if allow_test_loopback and address == _TEST_LOOPBACK:
        return None
    if isinstance(address, ipaddress.IPv4Address):
        return _refusal_v4(address)
    return _refusal_v6(address)


def vet_address(address: IPAddress, host: str, *, allow_test_loopback: bool = False) -> None:
    """Raise `blocked_address` (not retryable) unless `address` may be fetched for `host`."""
    reason = refusal_reason(address, allow_test_loopback=allow_test_loopback)
    if reason is not None:
        raise TitleFetchError(
            "blocked_address",
            f"{host}: address {address} is not fetched ({reason})",
            retryable=False,
        )


def resolve_and_vet(
    host: str,
    port: int,
    resolver: Resolver,
    *,
    allow_test_loopback: bool = False,
) -> list[IPAddress]:
    """Resolve `host` once and return its addresses, all vetted, in the resolver's order.

    Any refused address refuses the whole name (a rebinding name cannot hide a private address
    behind a public one). An answer that is not an IP address is refused too.
    """
    try:
        answers = list(dict.fromkeys(resolver(host, port)))
    except TitleFetchError:
        raise
    except socket.gaierror as exc:
        gone = exc.errno in {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}
        raise TitleFetchError(
            "dns_failure", f"{host}: the name did not resolve ({exc.strerror})", retryable=not gone
        ) from exc
    except (OSError, UnicodeError) as exc:
        raise TitleFetchError(
            "dns_failure", f"{host}: the name did not resolve", retryable=True
        ) from exc
    if not answers:
        raise TitleFetchError("dns_failure", f"{host}: the name has no address", retryable=False)
    addresses: list[IPAddress] = []
    for answer in answers:
        try:
            address = ipaddress.ip_address(answer)
        except ValueError as exc:
            raise TitleFetchError(
                "blocked_address", f"{host}: the resolver answered a non-address", retryable=False
            ) from exc
        vet_address(address, host, allow_test_loopback=allow_test_loopback)
        addresses.append(address)
    return addresses


def vet_url(
    url: str, resolver: Resolver, *, allow_test_loopback: bool = False
) -> tuple[HttpUrl, list[IPAddress]]:
    """The whole policy for one hop (the first URL or a redirect), before any connection:
    the URL rules of `parse_fetch_url`, then the address rule for an IP literal (no lookup) or
    for every address the name resolves to (one lookup). Returns the parsed URL and the
    addresses the fetcher may connect to; raises a non-retryable `TitleFetchError` otherwise
    (`dns_failure` may be retryable)."""
    target = parse_fetch_url(url, allow_any_port=allow_test_loopback)
    if target.ip is not None:
        vet_address(target.ip, target.host, allow_test_loopback=allow_test_loopback)
        return target, [target.ip]
    addresses = resolve_and_vet(
        target.host, target.port, resolver, allow_test_loopback=allow_test_loopback
    )
    return target, addresses


def system_resolver(host: str, port: int) -> list[str]:
    """The default resolver: one `getaddrinfo` for TCP, the addresses in the system's order.

    IPv6 scope ids (`fe80::1%eth0`) are kept so that they parse and are refused as link-local.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def _refusal_v4(address: ipaddress.IPv4Address) -> str | None:
    for network, reason in _REFUSED_V4:
        if address in network:
            return reason
    if not address.is_global or address.is_multicast or address.is_reserved:
        return "not global"
    return None


def _refusal_v6(address: ipaddress.IPv6Address) -> str | None:
    if address.scope_id:
        return "scoped"
    if address in _NAT64_V6:
        return _embedded_refusal(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "NAT64")
    if address in _SIX_TO_FOUR_V6 and address.sixtofour is not None:
        return _embedded_refusal(address.sixtofour, "6to4")
    for network, reason in _REFUSED_V6:
        if address in network:
            return reason
    if address not in _GLOBAL_UNICAST_V6:
        return "not global unicast"
    if not address.is_global or address.is_multicast or address.is_reserved:
        return "not global"
    return None


def _embedded_refusal(embedded: ipaddress.IPv4Address, form: str) -> str | None:
    reason = _refusal_v4(embedded)
    return None if reason is None else f"{form} form of {embedded}: {reason}"
