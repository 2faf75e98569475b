"""The live title fetcher against real sockets: local servers on 127.0.0.1 that answer as each
test scripts (no internet). The fetcher runs with the test-only switch that admits 127.0.0.1 on
any port; a fake resolver maps test names to 127.0.0.1 or to private addresses."""

from __future__ import annotations

import datetime
import gzip
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from leasehold.domain.errors import StepInterruptedError
from leasehold_apps.reading_list.titles import TitleFetchError
from leasehold_apps.reading_list.titles.live import LiveFetcher
from tests.support.local_http import Connection, LocalServer

DNS = {
    "titles.test": ["127.0.0.1"],
    "other.test": ["127.0.0.1"],
    "internal.test": ["10.0.0.7"],
}
PAGE = b"<html><head><title>A  normal\n page</title></head><body>hello</body></html>"

Serve = Callable[..., LocalServer]


def fake_resolver(host: str, port: int) -> list[str]:
    if host not in DNS:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return DNS[host]


def live(**overrides: Any) -> LiveFetcher:
    options: dict[str, Any] = {
        "resolver": fake_resolver,
        "connect_timeout": 0.5,
        "total_timeout": 2.0,
        "_test_allow_loopback_any_port": True,
    }
    options.update(overrides)
    return LiveFetcher(**options)


def fetch(fetcher: LiveFetcher, url: str, tick: Callable[[], bool] = lambda: True) -> str:
    return fetcher.fetch(url, mode=None, attempt=1, tick=tick)


def fetch_error(fetcher: LiveFetcher, url: str) -> TitleFetchError:
    with pytest.raises(TitleFetchError) as caught:
        fetch(fetcher, url)
    return caught.value


def page(body: bytes = PAGE, **kwargs: Any) -> Callable[[Connection], None]:
    return lambda conn: conn.respond(200, body, **kwargs)


def hold_open(conn: Connection) -> None:
    """Accept the request and never answer (until the test ends)."""
    conn.server.stop.wait(5)


@pytest.fixture
def serve() -> Iterator[Serve]:
    servers: list[LocalServer] = []

    def start(
        handler: Callable[[Connection], None], tls: ssl.SSLContext | None = None
    ) -> LocalServer:
        server = LocalServer(handler, tls=tls)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


# --- a normal page ---------------------------------------------------------------------------


def test_a_normal_page_gives_its_title_and_the_request_names_the_host(serve: Serve) -> None:
    server = serve(page())
    title = fetch(live(), f"http://titles.test:{server.port}/articles/1?ref=x#top")
    assert title == "A normal page"
    [request] = server.requests
    assert (request.method, request.target) == ("GET", "/articles/1?ref=x")
    assert request.headers["host"] == f"titles.test:{server.port}"
    assert request.headers["accept-encoding"] == "identity"


def test_a_chunked_body_and_a_gzip_body_are_read(serve: Serve) -> None:
    def chunked(conn: Connection) -> None:
        head = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
        conn.send(head.encode())
        for part in (b"<title>Chun", b"ked</title>"):
            conn.send(b"%x\r\n%s\r\n" % (len(part), part))
        conn.send(b"0\r\n\r\n")

    assert fetch(live(), f"http://titles.test:{serve(chunked).port}/") == "Chunked"
    zipped = serve(
        page(gzip.compress(b"<title>Zipped</title>"), headers={"Content-Encoding": "gzip"})
    )
    assert fetch(live(), f"http://titles.test:{zipped.port}/") == "Zipped"
    brotli = serve(page(b"\x00", headers={"Content-Encoding": "br"}))
    error = fetch_error(live(), f"http://titles.test:{brotli.port}/")
    assert (error.code, error.retryable) == ("unsupported_encoding", False)


# --- redirects -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "location",
    [
        "http://10.0.0.1/",
        "http://192.168.1.1/admin",
        "http://169.254.169.254/latest/meta-data/",
        "http://internal.test/",  # a name that resolves to 10.0.0.7
        "http://[::1]/",
        "http://2130706433/",
        "file:///etc/passwd",
    ],
)
def test_a_redirect_to_a_private_address_is_refused(serve: Serve, location: str) -> None:
    server = serve(lambda conn: conn.respond(302, headers={"Location": location}))
    started = time.monotonic()
    error = fetch_error(live(), f"http://titles.test:{server.port}/start")
    assert error.code in {"blocked_address", "bad_url"}
    assert error.retryable is False
    # refused before any connection: a connect to 10/8 or 192.168/16 would end as a timeout
    assert time.monotonic() - started < 0.5


def test_relative_redirects_are_resolved_against_the_current_url(serve: Serve) -> None:
    def handler(conn: Connection) -> None:
        target = conn.request.target
        if target == "/a/b":
            conn.respond(301, headers={"Location": "../next?x=1"})
        elif target == "/next?x=1":
            conn.respond(307, headers={"Location": f"//other.test:{conn.server.port}/end"})
        else:
            conn.respond(200, b"<title>Arrived</title>")

    server = serve(handler)
    assert fetch(live(), f"http://titles.test:{server.port}/a/b") == "Arrived"
    assert [r.target for r in server.requests] == ["/a/b", "/next?x=1", "/end"]
    assert server.requests[-1].headers["host"] == f"other.test:{server.port}"


def hops(conn: Connection) -> None:
    """/hop/N redirects to /hop/N+1 until N reaches the `to` query value, then answers."""
    path, _, limit = conn.request.target.partition("?to=")
    number = int(path.rsplit("/", 1)[1])
    if number < int(limit):
        conn.respond(302, headers={"Location": f"/hop/{number + 1}?to={limit}"})
    else:
        conn.respond(200, b"<title>End of the chain</title>")


def test_three_redirects_are_followed(serve: Serve) -> None:
    server = serve(hops)
    assert fetch(live(), f"http://titles.test:{server.port}/hop/0?to=3") == "End of the chain"
    assert len(server.requests) == 4


def test_a_fourth_redirect_is_refused_and_not_requested(serve: Serve) -> None:
    server = serve(hops)
    error = fetch_error(live(), f"http://titles.test:{server.port}/hop/0?to=4")
    assert (error.code, error.retryable) == ("too_many_redirects", False)
    assert len(server.requests) == 4  # the first request and three redirects, no fifth


def test_a_redirect_without_a_location_is_an_http_status_error(serve: Serve) -> None:
    server = serve(lambda conn: conn.respond(302))
    error = fetch_error(live(), f"http://titles.test:{server.port}/")
    assert (error.code, error.retryable) == ("http_status", False)


# --- limits ----------------------------------------------------------------------------------


def test_a_body_over_the_cap_is_cut_and_the_title_in_its_first_part_returned(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a server that would send 20 MiB after a title in its first bytes
    total = 20 * 1024 * 1024
    filler = b"<p>" + b"x" * (64 * 1024 - 3)
    body_head = b"<html><head><title>Big page</title></head><body>"

    def huge(conn: Connection) -> None:
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        head = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {total}\r\n\r\n"
        conn.send(head.encode() + body_head)
        for _ in range(total // len(filler)):  # ends early when the client hangs up
            conn.send(filler)

    server = serve(huge)
    caplog.set_level(logging.INFO)

    # When a fetcher capped at 64 KiB reads it
    started = time.monotonic()
    title = fetch(live(max_bytes=64 * 1024), f"http://titles.test:{server.port}/")

    # Then the title comes back quickly, at most the cap was read, and the server was cut off
    assert title == "Big page"
    assert time.monotonic() - started < 1.0
    [record] = [r for r in caplog.records if r.getMessage() == "title fetched"]
    assert 0 < getattr(record, "bytes_read", -1) <= 64 * 1024
    server.close()
    [connection] = server.connections
    # what the server managed to send: the cap plus what socket buffers absorbed, not 20 MiB
    assert connection.sent < 1024 * 1024, connection.sent


def test_a_title_beyond_the_cap_is_not_found(serve: Serve) -> None:
    server = serve(page(b"<html><head>" + b" " * 4096 + b"<title>Too late</title>"))
    error = fetch_error(live(max_bytes=1024), f"http://titles.test:{server.port}/")
    assert (error.code, error.retryable) == ("no_title", False)


@pytest.mark.parametrize(
    "content_type", ["application/json", "text/plain; charset=utf-8", "image/png", None]
)
def test_a_body_that_is_not_html_is_refused(serve: Serve, content_type: str | None) -> None:
    server = serve(page(b"<title>not read</title>", content_type=content_type))
    error = fetch_error(live(), f"http://titles.test:{server.port}/")
    assert (error.code, error.retryable) == ("not_html", False)


def test_xhtml_is_accepted(serve: Serve) -> None:
    server = serve(page(b"<title>XHTML</title>", content_type="application/xhtml+xml"))
    assert fetch(live(), f"http://titles.test:{server.port}/") == "XHTML"


@pytest.mark.parametrize(
    ("status", "retryable"), [(404, False), (410, False), (429, True), (500, True), (503, True)]
)
def test_error_statuses_say_whether_to_retry(serve: Serve, status: int, retryable: bool) -> None:
    server = serve(lambda conn: conn.respond(status, b"<title>error page</title>"))
    error = fetch_error(live(), f"http://titles.test:{server.port}/")
    assert (error.code, error.retryable) == ("http_status", retryable)


def test_a_server_that_never_answers_times_out_within_the_total_bound(serve: Serve) -> None:
    server = serve(hold_open)
    started = time.monotonic()
    error = fetch_error(live(total_timeout=0.8), f"http://titles.test:{server.port}/")
    elapsed = time.monotonic() - started
    assert (error.code, error.retryable) == ("timeout", True)
    assert 0.7 <= elapsed < 0.8 + 0.5, elapsed


def test_a_server_that_drips_its_body_times_out_within_the_total_bound(serve: Serve) -> None:
    def drip(conn: Connection) -> None:
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n")
        for _ in range(100):  # 5 s at most; the client hangs up long before
            if conn.server.stop.wait(0.05):
                return
            conn.send(b" ")

    server = serve(drip)
    started = time.monotonic()
    error = fetch_error(live(total_timeout=0.8), f"http://titles.test:{server.port}/")
    assert (error.code, error.retryable) == ("timeout", True)
    assert time.monotonic() - started < 0.8 + 0.5


def test_a_resolver_that_hangs_times_out_within_the_total_bound() -> None:
    release = threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        release.wait(5)
        return ["127.0.0.1"]

    started = time.monotonic()
    try:
        error = fetch_error(live(resolver=hanging, total_timeout=0.5), "http://titles.test/")
    finally:
        release.set()
    assert (error.code, error.retryable) == ("timeout", True)
    assert time.monotonic() - started < 0.5 + 0.5


def test_a_refused_connection_is_retryable() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    error = fetch_error(live(), f"http://titles.test:{port}/")
    assert (error.code, error.retryable) == ("connection_failed", True)


def test_tick_is_called_every_250_ms_and_false_stops_the_fetch(serve: Serve) -> None:
    # Given a server that never answers and a tick that says stop on its third call
    server = serve(hold_open)
    ticks: list[float] = []

    def tick() -> bool:
        ticks.append(time.monotonic())
        return len(ticks) < 3

    # When the fetch runs, Then it stops at the third tick, long before its 5 s deadline
    started = time.monotonic()
    with pytest.raises(StepInterruptedError):
        fetch(live(total_timeout=5.0), f"http://titles.test:{server.port}/", tick=tick)
    assert len(ticks) == 3
    gaps = [b - a for a, b in zip([started, *ticks], ticks, strict=False)]
    assert max(gaps) < 0.35
    assert time.monotonic() - started < 1.0


# --- charset and title fallbacks -------------------------------------------------------------


def test_a_latin_1_page_is_decoded_from_the_header(serve: Serve) -> None:
    body = "<title>Cr\u00e8me br\u00fbl\u00e9e \u00e0 la carte</title>".encode("latin-1")
    server = serve(page(body, content_type="text/html; charset=ISO-8859-1"))
    assert fetch(live(), f"http://titles.test:{server.port}/") == "Crème brûlée à la carte"


def test_a_latin_1_page_is_decoded_from_its_meta_tag(serve: Serve) -> None:
    body = '<head><meta charset="latin1"><title>Gr\u00fc\u00dfe</title>'.encode("latin-1")
    server = serve(page(body, content_type="text/html"))
    assert fetch(live(), f"http://titles.test:{server.port}/") == "Grüße"


def test_og_title_is_used_when_there_is_no_title(serve: Serve) -> None:
    body = b'<head><meta property="og:title" content="From Open Graph"></head><body>x</body>'
    server = serve(page(body))
    assert fetch(live(), f"http://titles.test:{server.port}/") == "From Open Graph"


def test_a_page_without_any_title_is_a_final_failure(serve: Serve) -> None:
    server = serve(page(b"<html><body>nothing</body></html>"))
    error = fetch_error(live(), f"http://titles.test:{server.port}/")
    assert (error.code, error.retryable) == ("no_title", False)


# --- logs ------------------------------------------------------------------------------------


def test_logs_name_the_host_and_never_the_path_or_query(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    # Given every logger at DEBUG (so urllib3's own request lines would be captured too)
    caplog.set_level(logging.DEBUG)

    def handler(conn: Connection) -> None:
        if conn.request.target.startswith("/start"):
            conn.respond(302, headers={"Location": "/secret-path-4711?token=hunter2"})
        elif conn.request.target.startswith("/missing"):
            conn.respond(404)
        else:
            conn.respond(200, PAGE)

    server = serve(handler)

    # When a fetch follows a redirect, and another one fails
    fetch(live(), f"http://titles.test:{server.port}/start/private-dir?session=s3cr3t")
    fetch_error(live(), f"http://titles.test:{server.port}/missing/private-dir?session=s3cr3t")

    # Then the log lines name the host, and nothing logged holds a path or a query
    rendered = [f"{r.getMessage()} {r.__dict__}" for r in caplog.records]
    fetch_lines = [r for r in caplog.records if r.getMessage().startswith("title fetch")]
    assert len(fetch_lines) == 2
    assert all(getattr(r, "host", None) == "titles.test" for r in fetch_lines)
    for secret in ("secret-path", "hunter2", "private-dir", "s3cr3t", "/start", "/missing"):
        assert not any(secret in line for line in rendered), secret


# --- TLS: connect to the vetted address, verify the certificate for the name ---------------


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A throw-away CA and a server certificate for titles.test, signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = tmp_path_factory.mktemp("tls")
    now = datetime.datetime.now(datetime.UTC)

    def build(subject: str, issuer: x509.Name | None, signer: Any, key: Any, ca: bool) -> Any:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(issuer or name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = build("leasehold test CA", None, ca_key, ca_key, ca=True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = build("titles.test", ca_cert.subject, ca_key, leaf_key, ca=False)
    paths = {"ca": folder / "ca.pem", "cert": folder / "leaf.pem", "key": folder / "leaf.key"}
    paths["ca"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def tls_server(serve: Serve, certificates: dict[str, Path], names: list[str]) -> LocalServer:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates["cert"], certificates["key"])

    def record_server_name(sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        names.append(str(name))

    context.sni_callback = record_server_name
    return serve(page(b"<title>Over TLS</title>"), tls=context)


def test_https_uses_the_name_for_sni_and_the_certificate(
    serve: Serve, certificates: dict[str, Path]
) -> None:
    sni: list[str] = []
    server = tls_server(serve, certificates, sni)
    fetcher = live(ca_certs=str(certificates["ca"]))
    assert fetch(fetcher, f"https://titles.test:{server.port}/secure") == "Over TLS"
    assert sni == ["titles.test"]
    assert server.requests[0].headers["host"] == f"titles.test:{server.port}"


def test_https_refuses_a_certificate_for_another_name(
    serve: Serve, certificates: dict[str, Path]
) -> None:
    server = tls_server(serve, certificates, [])
    fetcher = live(ca_certs=str(certificates["ca"]))
    error = fetch_error(fetcher, f"https://other.test:{server.port}/")
    assert (error.code, error.retryable) == ("tls_error", False)
    untrusted = fetch_error(live(), f"https://titles.test:{server.port}/")  # system CAs only
    assert (untrusted.code, untrusted.retryable) == ("tls_error", False)
