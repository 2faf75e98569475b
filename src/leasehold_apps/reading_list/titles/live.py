"""The `live` title fetcher (docs/architecture.md "The reading list"): one real, SSRF-safe HTTP GET
per hop.

What it guarantees:

- **Only public web servers.** Each URL (the first and every redirect) passes `urls` (http or
  https, ports 80/443, no userinfo, no odd numeric host) and `addresses` (every address the
  name resolves to is global unicast). The name is resolved once per hop and the connection
  goes to a vetted address — urllib3 is handed the IP, not the name — while `Host`, TLS SNI
  and certificate checking use the name. At most `max_redirects` redirects.
- **Bounded.** Connect `connect_timeout` per address; one deadline, `total_timeout`, across
  DNS, connects, redirects and reading; at most `max_bytes` read from the socket (and at most
  `max_bytes` after decompression); then what was read is parsed.
- **Interruptible.** The fetch runs on a helper thread while the caller's thread waits in
  250 ms slices calling `tick()`. `tick()` returning False, or the deadline passing (even
  inside `getaddrinfo`, which has no timeout of its own), returns control to the caller at
  once; the helper thread's socket is shut down and the thread ends by the deadline.
- **Private logs.** One log line per fetch with the host(s), status, bytes and outcome; never
  the path or query. urllib3's own records from the helper thread (its DEBUG request line
  carries the path) are dropped by a filter on urllib3's loggers.

The HTTP client is urllib3 (already on the Lambda path through botocore): connection pools
pinned to one IP, `retries=False`, `redirect=False`, `preload_content=False`. It never reads
proxy settings from the environment, so no `HTTP_PROXY` can reroute a fetch.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable
from urllib.parse import urljoin, urlsplit

import urllib3
from aws_lambda_powertools import Logger
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    SSLError,
)
from urllib3.exceptions import TimeoutError as Urllib3TimeoutError
from urllib3.util.ssl_match_hostname import CertificateError

from leasehold import StepInterruptedError
from leasehold_apps.reading_list.titles.addresses import (
    IPAddress,
    Resolver,
    system_resolver,
    vet_url,
)
from leasehold_apps.reading_list.titles.answer import (
    REDIRECT_STATUSES,
    BodyDecoder,
    check_answer,
    request_headers,
)
from leasehold_apps.reading_list.titles.errors import TitleFetchError, timeout_error
from leasehold_apps.reading_list.titles.fetch_run import FetchRun
from leasehold_apps.reading_list.titles.page import decode_html, extract_title
from leasehold_apps.reading_list.titles.urls import HttpUrl

logger = Logger(service="leasehold", child=True)

FETCH_THREAD_NAME = "leasehold-title-fetch"
TICK_INTERVAL_SECONDS = 0.25
# The caller gives the helper thread this long past the deadline to report its own timeout
# before it declares one itself.
_HARD_STOP_GRACE_SECONDS = 0.25
_READ_CHUNK_BYTES = 16 * 1024
_URLLIB3_LOGGERS = ("urllib3.connectionpool", "urllib3.connection", "urllib3.response")


class _DropFetchThreadRecords(logging.Filter):
    """urllib3 logs `GET /path?query` at DEBUG and the URL in some warnings; records it emits
    on a title-fetch thread are dropped so no log level can leak a bookmark's path."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.threadName or "").startswith(FETCH_THREAD_NAME)


def _install_urllib3_log_filter() -> None:
    for name in _URLLIB3_LOGGERS:
        urllib3_logger = logging.getLogger(name)
        if not any(isinstance(f, _DropFetchThreadRecords) for f in urllib3_logger.filters):
            urllib3_logger.addFilter(_DropFetchThreadRecords())


_install_urllib3_log_filter()


class LiveFetcher:
    """Fetches a page over the network under the guarantees in the module docstring."""

    def __init__(
        self,
        *,
        connect_timeout: float = 2.0,
        total_timeout: float = 5.0,
        max_bytes: int = 256 * 1024,
        max_redirects: int = 3,
        resolver: Resolver = system_resolver,
        ca_certs: str | None = None,
        _test_allow_loopback_any_port: bool = False,
    ) -> None:
        """`ca_certs`: a CA bundle file (None: the system's trust store). The last argument is
        for tests with local servers only: it admits 127.0.0.1 (and no other special address)
        on any port. `fetcher_from_name` refuses it, and nothing reads it from configuration."""
        if not 0 < connect_timeout <= total_timeout <= 60:
            raise ValueError("need 0 < connect_timeout <= total_timeout <= 60 seconds")
        if not 1024 <= max_bytes <= 4 * 1024 * 1024:
            raise ValueError("max_bytes must be between 1 KiB and 4 MiB")
        if not 0 <= max_redirects <= 10:
            raise ValueError("max_redirects must be between 0 and 10")
        self._connect_timeout = connect_timeout
        self._total_timeout = total_timeout
        self._max_bytes = max_bytes
        self._max_redirects = max_redirects
        self._resolver = resolver
        self._ca_certs = ca_certs
        self._test_loopback = _test_allow_loopback_any_port

    def fetch(self, url: str, *, mode: str | None, attempt: int, tick: Callable[[], bool]) -> str:
        """The title of the page at `url`. `mode` is ignored: a live fetch has one behaviour."""
        del mode
        started = time.monotonic()
        run = FetchRun(deadline=started + self._total_timeout)
        helper = threading.Thread(
            target=self._run, args=(url, run), name=FETCH_THREAD_NAME, daemon=True
        )
        helper.start()
        try:
            title = self._await(run, tick)
        except Exception as exc:
            self._log(run, attempt, started, exc)
            raise
        self._log(run, attempt, started, None)
        return title

    def _await(self, run: FetchRun, tick: Callable[[], bool]) -> str:
        hard_stop = run.deadline + _HARD_STOP_GRACE_SECONDS
        try:
            while not run.done.wait(min(TICK_INTERVAL_SECONDS, hard_stop - time.monotonic())):
                if time.monotonic() >= hard_stop:
                    run.finish(error=timeout_error(run.current_host(), self._total_timeout))
                    break
                if not tick():
                    run.finish(error=StepInterruptedError("the title fetch was told to stop"))
                    break
        finally:
            run.abort()
        return run.outcome()

    def _run(self, url: str, run: FetchRun) -> None:
        try:
            title = self._fetch_title(url, run)
        except Exception as exc:  # handed to the caller's thread, which raises it
            run.finish(error=exc)
        else:
            run.finish(title=title)

    def _fetch_title(self, url: str, run: FetchRun) -> str:
        current = url
        while True:
            run.hosts.append(_host_for_log(current))
            target, addresses = vet_url(
                current, self._resolver, allow_test_loopback=self._test_loopback
            )
            run.hosts[-1] = target.host
            pool, response = self._open(target, addresses, run)
            try:
                run.status = response.status
                if response.status in REDIRECT_STATUSES:
                    current = self._follow(current, target, response, run)
                    continue
                content_type = check_answer(target, response)
                body, complete, broken = self._read_body(target, response, run)
            finally:
                run.detach()
                response.close()
                pool.close()
            return _title_from(target, body, content_type, complete=complete, broken=broken)

    def _open(
        self, target: HttpUrl, addresses: list[IPAddress], run: FetchRun
    ) -> tuple[urllib3.HTTPConnectionPool, urllib3.BaseHTTPResponse]:
        """GET the target from the first vetted address that accepts a connection."""
        failure: TitleFetchError | None = None
        for address in addresses:
            pool = self._pool(target, address, run.remaining())
            try:
                response = pool.urlopen(
                    "GET",
                    target.target,
                    headers=request_headers(target),
                    retries=False,
                    redirect=False,
                    assert_same_host=False,
                    preload_content=False,
                    decode_content=False,
                    release_conn=False,
                )
            except NewConnectionError as exc:  # refused or unreachable: try the next address
                pool.close()
                failure = TitleFetchError(
                    "connection_failed", f"{target.host}: could not connect", retryable=True
                )
                failure.__cause__ = exc
                continue
            except ConnectTimeoutError as exc:
                pool.close()
                failure = timeout_error(target.host, self._connect_timeout, "connect")
                failure.__cause__ = exc
                continue
            except (HTTPError, OSError) as exc:
                pool.close()
                raise _translate(exc, target.host) from exc
            try:
                run.attach(response)
            except StepInterruptedError:  # the caller gave up while the answer was on its way
                response.close()
                pool.close()
                raise
            return pool, response
        if failure is None:  # resolve_and_vet never returns an empty list
            raise TitleFetchError("dns_failure", f"{target.host}: no address", retryable=False)
        raise failure

    def _pool(
        self, target: HttpUrl, address: IPAddress, remaining: float
    ) -> urllib3.HTTPConnectionPool:
        timeout = urllib3.Timeout(connect=min(self._connect_timeout, remaining), read=remaining)
        if target.scheme == "https":
            return urllib3.HTTPSConnectionPool(
                host=str(address),
                port=target.port,
                timeout=timeout,
                maxsize=1,
                retries=False,
                cert_reqs="CERT_REQUIRED",
                ca_certs=self._ca_certs,
                server_hostname=target.host,
                assert_hostname=target.host,
            )
        return urllib3.HTTPConnectionPool(
            host=str(address), port=target.port, timeout=timeout, maxsize=1, retries=False
        )

    def _follow(
        self,
        current: str,
        target: HttpUrl,
        response: urllib3.BaseHTTPResponse,
        run: FetchRun,
    ) -> str:
        """The next URL of a redirect (relative Locations resolved against `current`)."""
        if run.redirects >= self._max_redirects:
            raise TitleFetchError(
                "too_many_redirects",
                f"{target.host}: more than {self._max_redirects} redirects",
                retryable=False,
            )
        location = (response.headers.get("Location") or "").strip()
        if not location:
            raise TitleFetchError(
                "http_status",
                f"{target.host} answered HTTP {response.status} without a Location",
                retryable=False,
            )
        try:
            next_url = urljoin(current, location)
        except ValueError as exc:
            raise TitleFetchError(
                "bad_url", f"{target.host} redirected to a malformed URL", retryable=False
            ) from exc
        run.redirects += 1
        return next_url

    def _read_body(
        self, target: HttpUrl, response: urllib3.BaseHTTPResponse, run: FetchRun
    ) -> tuple[bytes, bool, TitleFetchError | None]:
        """Read at most `max_bytes` from the socket (and keep at most `max_bytes` decoded).

        Returns the body, whether the server's body ended within the limit, and the error that
        broke the connection mid-body (the part read may still hold the title).
        """
        decoder = BodyDecoder(target.host, response.headers.get("Content-Encoding"))
        body = bytearray()
        raw_read = 0
        while raw_read < self._max_bytes and len(body) < self._max_bytes:
            run.remaining()
            try:
                chunk = response.read1(
                    min(_READ_CHUNK_BYTES, self._max_bytes - raw_read), decode_content=False
                )
            except Urllib3TimeoutError as exc:
                raise timeout_error(target.host, self._total_timeout) from exc
            except (HTTPError, OSError) as exc:
                return bytes(body), False, _translate(exc, target.host)
            if not chunk:
                run.remaining()  # an empty read after abort() is not the end of the body
                return bytes(body), True, None
            raw_read += len(chunk)
            run.bytes_read += len(chunk)
            body += decoder.feed(chunk, self._max_bytes - len(body))
        return bytes(body), False, None

    def _log(self, run: FetchRun, attempt: int, started: float, error: Exception | None) -> None:
        hosts = list(run.hosts)
        fields: dict[str, object] = {
            "host": hosts[0] if hosts else None,
            "final_host": hosts[-1] if hosts else None,
            "redirects": run.redirects,
            "attempt": attempt,
            "http_status": run.status,
            "bytes_read": run.bytes_read,
            "duration_ms": round((time.monotonic() - started) * 1000),
        }
        if error is None:
            logger.info("title fetched", extra=fields)
        elif isinstance(error, TitleFetchError):
            # Our messages name hosts only; another exception's text might quote the URL.
            detail = {"code": error.code, "retryable": error.retryable, "detail": str(error)}
            logger.info("title fetch failed", extra=fields | detail)
        else:
            logger.info("title fetch stopped", extra=fields | {"code": type(error).__name__})


def _title_from(
    target: HttpUrl,
    body: bytes,
    content_type: str,
    *,
    complete: bool,
    broken: TitleFetchError | None,
) -> str:
    title = extract_title(decode_html(body, content_type, complete=complete))
    if title:
        return title
    if broken is not None:
        raise broken
    where = "page" if complete else f"first {len(body) // 1024} KiB of the page"
    raise TitleFetchError("no_title", f"{target.host}: the {where} has no title", retryable=False)


def _translate(exc: Exception, host: str) -> TitleFetchError:
    """urllib3 / socket failures as title errors (retryable unless a certificate is wrong)."""
    if isinstance(exc, Urllib3TimeoutError):
        return timeout_error(host, None)
    if isinstance(exc, SSLError):
        cause = exc.args[0] if exc.args else None
        if isinstance(cause, ssl.SSLCertVerificationError | CertificateError):
            return TitleFetchError(
                "tls_error", f"{host}: the certificate did not verify", retryable=False
            )
    return TitleFetchError(
        "connection_failed", f"{host}: the connection failed ({type(exc).__name__})", retryable=True
    )


def _host_for_log(url: str) -> str:
    """The host part of a URL that may not parse, for the log line only: never the path."""
    try:
        return (urlsplit(url).hostname or "?")[:253]
    except ValueError:
        return "?"
