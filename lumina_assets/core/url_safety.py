"""Where the HTTP layer may go and what may follow a redirect: the address policy (no loopback, private,
link-local / cloud metadata, shared, reserved or multicast address, IPv4-embedded IPv6 forms judged by the IPv4
address inside, unless `LUMINA_ALLOW_PRIVATE_URLS` opts in), the transport that connects to the address the policy
checked (no second DNS answer in between), and credentials: which headers and query parameters carry them, how a
URL is shown with them redacted, and how a redirect's target on another origin is cleaned of them."""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from lumina_assets.core import settings

# The only headers that follow a redirect to another origin: nothing that could carry a credential.
CROSS_ORIGIN_HEADERS = frozenset({"user-agent", "accept", "accept-language", "accept-encoding"})

# Query parameters and headers that carry credentials: never in cache keys, logs or error messages.
SECRET_NAMES = frozenset(
    {"api_key", "apikey", "key", "x-api-key", "authorization", "token", "access_token", "mailto", "email"}
)


class HttpError(RuntimeError):
    """A request that failed for good; the message names the (redacted) URL and the reason. `reason` is a
    short code: http_status, transport, too_large, deadline, blocked_url, redirects, bad_body, unreachable (not
    sent: the host refused a connection earlier in this client's life)."""

    def __init__(self, message: str, *, url: str, status: int | None = None, reason: str = "http_status"):
        super().__init__(message)
        self.url = url
        self.status = status
        self.reason = reason


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


# IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64 (RFC 6052, and the local-use 64:ff9b:1::/48
# of RFC 8215) and the deprecated IPv4-compatible ::a.b.c.d. A DNS64 resolver on an IPv6-only network answers
# 64:ff9b::a.b.c.d for any public host, so these are judged by the IPv4 address inside.
_EMBEDDING_LAST_32_BITS = (
    ipaddress.ip_network("64:ff9b::/96"),
    ipaddress.ip_network("64:ff9b:1::/48"),
    ipaddress.ip_network("::/96"),
)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for: IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d),
    NAT64 (64:ff9b::/96), 6to4 (2002::/16) and Teredo (2001::/32: server and client)."""
    found = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if any(address in network for network in _EMBEDDING_LAST_32_BITS):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def non_public_reason(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an address is not a public unicast one (loopback, private, link-local / cloud metadata, shared,
    reserved, multicast, or an IPv6 form embedding such an IPv4 address); None when it is public."""
    candidates = [*embedded_ipv4(address), address] if address.version == 6 else [address]
    for candidate in candidates:
        if not candidate.is_global or candidate.is_multicast:
            shown = str(candidate) if candidate is address else f"{address}, which embeds {candidate}"
            return f"a non-public address ({shown})"
    return None


class UrlPolicy:
    """Where a client may go: http and https only, and no host that resolves to a non-public address
    (`non_public_reason`) unless `allow_private` (default: `LUMINA_ALLOW_PRIVATE_URLS`, read at each
    check); checked at every redirect hop. `check` returns the address it checked and HttpClient connects
    to it (`PinnedTransport`), so a DNS answer that changes in between is never used; through an HTTP proxy
    the proxy resolves the name."""

    def __init__(self, *, allow_private: bool | None = None, resolver: Callable[..., list] | None = None):
        self._allow_private = allow_private
        self.resolver = resolver or socket.getaddrinfo

    @property
    def allow_private(self) -> bool:
        if self._allow_private is None:
            return settings.get().network.allow_private_urls
        return self._allow_private

    def check(self, url: str) -> str | None:
        """Raise HttpError (blocked_url) for a URL this policy refuses; otherwise the checked IP address to
        connect to (None when private addresses are allowed, so nothing was resolved here)."""
        shown = redact_url(url)
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https"):
            raise HttpError(
                f"refused {shown}: only http and https URLs are fetched", url=shown, reason="blocked_url"
            )
        host = parts.hostname
        if not host:
            raise HttpError(f"refused {shown}: no host", url=shown, reason="blocked_url")
        if self.allow_private:
            return None
        addresses = self._addresses(host, parts.port, shown)
        for address in addresses:
            reason = self.refusal(address)
            if reason is not None:
                raise HttpError(
                    f"refused {shown}: {host} is {reason}; LUMINA_ALLOW_PRIVATE_URLS=1 allows private addresses",
                    url=shown,
                    reason="blocked_url",
                )
        if not addresses:
            raise HttpError(f"cannot resolve the host of {shown} (no address)", url=shown, reason="transport")
        return str(addresses[0])

    def refusal(self, address) -> str | None:
        """Why this policy refuses an address (None: it may be reached)."""
        return non_public_reason(address)

    def _addresses(self, host: str, port: int | None, shown: str) -> list:
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass
        try:
            answers = self.resolver(host, port or 443, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise HttpError(
                f"cannot resolve the host of {shown} ({exc})", url=shown, reason="transport"
            ) from None
        return [ipaddress.ip_address(answer[4][0].split("%")[0]) for answer in answers]


PIN_EXTENSION = "lumina_pinned_address"


class PinnedTransport(httpx.BaseTransport):
    """Connects to the address the URL policy checked (the request's `lumina_pinned_address` extension) instead
    of resolving the host again: the request goes to that IP with the original Host header, and TLS sends the
    original name as SNI and verifies the certificate against it. One connection pool per host name, so a TLS
    connection made for one name is never reused for another name on the same address. A request without a
    pin (private addresses allowed, an IP literal) goes out unchanged."""

    MAX_POOLS = 16

    def __init__(self, **transport_options: Any):
        self._options = transport_options
        self._pools: dict[str, httpx.HTTPTransport] = {}
        self._lock = threading.Lock()

    def _pool(self, host: str) -> httpx.HTTPTransport:
        with self._lock:
            pool = self._pools.pop(host, None) or httpx.HTTPTransport(**self._options)
            self._pools[host] = pool  # most recently used last
            while len(self._pools) > self.MAX_POOLS:
                oldest = next(iter(self._pools))
                self._pools.pop(oldest).close()
            return pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        pinned = request.extensions.get(PIN_EXTENSION)
        host = request.url.host
        if not pinned or pinned == host:
            return self._pool(host).handle_request(request)
        extensions = {k: v for k, v in request.extensions.items() if k != PIN_EXTENSION}
        if request.url.scheme == "https":
            extensions["sni_hostname"] = request.url.raw_host.decode("ascii")  # IDNA form, as TLS wants
        direct = httpx.Request(
            request.method,
            request.url.copy_with(host=pinned),
            headers=request.headers,  # the Host header keeps the name
            stream=request.stream,
            extensions=extensions,
        )
        return self._pool(host).handle_request(direct)

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()


def _query_items(url: str, params: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The query parameters of `url` and then of `params` (None values left out), as (name, value)."""
    query = list(httpx.QueryParams(urlsplit(url).query).multi_items())
    return query + [(k, str(v)) for k, v in (params or {}).items() if v is not None]


def secret_values(url: str, params: Mapping[str, Any] | None, headers: Mapping[str, str]) -> set[str]:
    """The credential values a request carries: secret query parameters (URL and `params`) and every header
    that may not cross origins. A redirect's Location that repeats one of them (under any name) is cleaned."""
    values = {v for k, v in _query_items(url, params) if k.lower() in SECRET_NAMES}
    values |= {str(v) for k, v in headers.items() if k.lower() not in CROSS_ORIGIN_HEADERS}
    values |= {v.split(None, 1)[1] for v in values if " " in v}  # `Bearer <token>`: the token alone too
    return {v for v in values if len(v) >= 4}  # never strip a parameter for matching "1" or "en"


def without_secrets(url: str, secrets: set[str] = frozenset()) -> str:
    """`url` without the query parameters that carry a credential: a secret name (api_key, mailto, token...) or
    a value the first request sent as a credential. Applied to a redirect's target on another origin."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = httpx.QueryParams(parts.query).multi_items()
    kept = [(k, v) for k, v in query if k.lower() not in SECRET_NAMES and v not in secrets]
    if len(kept) == len(query):
        return url
    return parts._replace(query=urlencode(kept)).geturl()


def redact_url(url: str, params: Mapping[str, Any] | None = None) -> str:
    """URL with every secret query value replaced, safe for logs and exceptions."""
    parts = urlsplit(url)
    shown = [(k, "***" if k.lower() in SECRET_NAMES else v) for k, v in _query_items(url, params)]
    base = f"{parts.scheme}://{parts.netloc}{parts.path}"
    return f"{base}?{urlencode(shown)}" if shown else base


class _RedactLoggedUrls(logging.Filter):
    """httpx logs every request's full URL at INFO ("HTTP Request: GET https://...?api_key=..."): OpenAlex and
    SerpAPI take their key as a query parameter, so any process logging at INFO would print it. This filter on
    the `httpx` loggers redacts secret query values in those records, leaving the rest of the line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(redact_url(str(arg)) if _is_query_url(arg) else arg for arg in record.args)
        return True


def _is_query_url(value: Any) -> bool:
    """An httpx / httpx2 URL or a URL string with a query (whatever its class, so both packages are covered)."""
    if not (isinstance(value, str) or type(value).__name__ == "URL"):
        return False
    text = str(value)
    return text.startswith(("http://", "https://")) and "?" in text


_LOGGED_URL_FILTER = _RedactLoggedUrls()
for _name in ("httpx", "httpx2"):
    if _LOGGED_URL_FILTER not in logging.getLogger(_name).filters:
        logging.getLogger(_name).addFilter(_LOGGED_URL_FILTER)
