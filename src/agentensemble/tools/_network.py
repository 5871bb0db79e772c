"""The guard and the fetch shared by the network tools (`HttpTool`, `WebScraperTool`):
requests go only to public addresses unless an allow-list says otherwise (BEHAVIOUR 7.6, 7.7).

How a request is guarded (against server-side request forgery):

* Only ``http`` and ``https`` URLs with a well-formed host and port are accepted.
* The host name is resolved off the event loop (``loop.getaddrinfo``) and EVERY address it
  resolves to is checked: one private, loopback, link-local, multicast, reserved or
  unspecified address refuses the request. IPv4 addresses carried inside IPv6 ones
  (``::ffff:127.0.0.1``, 6to4, Teredo, NAT64) are judged by the IPv4 address too.
* The connection is then made to one of the checked addresses (the URL's host is replaced
  by the address; the ``Host`` header and, for https, the TLS server name and certificate
  check keep the original host name), so a second DNS answer cannot swap in another
  address between the check and the connection (DNS rebinding).
* Redirects are followed by hand, at most `Limits.max_redirects` of them, and every hop is
  resolved and checked the same way; credentials (``Authorization``, ``Cookie``) are
  dropped when a redirect leaves the origin.
* Each hop uses a new httpx client, closed when the hop ends (so a pooled TLS connection
  is never reused for another host name), and ignores proxy and ``.netrc`` settings from
  the environment: a proxy would resolve the host itself, out of the guard's sight.
  ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` still choose the certificate authorities.
* The body is streamed and cut at `Limits.max_bytes`; the whole fetch (resolution, every
  hop, the body) runs under one overall timeout.

An allow-list (``allow=["127.0.0.1", "10.0.0.0/8", "intranet.example"]``) permits
addresses in the listed networks (a bare address is a network of one) and host names
that are trusted whatever they resolve to.

Limits: the guard sees IP addresses, not what is behind them; a public address that
forwards to an internal service (an open proxy, a port forward) is not detected. Only the
addresses the resolver returns are checked, so a custom resolver must be trustworthy.
Decompressed bytes count against the cap, but one compressed chunk may expand a lot before
it is cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentensemble._checks import as_tuple, require_int
from agentensemble._extras import require
from agentensemble.errors import ValidationError, describe_error

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_MAX_REDIRECTS",
    "AddressPolicy",
    "FetchError",
    "Fetched",
    "Limits",
    "Resolver",
    "fetch",
    "is_public_address",
    "media_type",
    "parse_url",
    "read_capped",
    "require_positive_int",
    "resolve_host",
    "shown",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolves ``(host, port)`` to IP address strings (the default: `resolve_host`)."""

DEFAULT_MAX_REDIRECTS = 5
"""How many redirects a fetch follows before giving up."""

REFUSED = "a private, loopback, link-local or reserved address"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_SAFE_ACROSS_ORIGINS = frozenset(
    {"accept", "accept-language", "user-agent", "content-type", "content-length"}
)
"""The only headers a redirect to another origin keeps: any other may carry a secret."""
_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")  # deprecated, but still not public
_BODY_HEADERS = frozenset({"content-type", "content-length", "content-encoding"})
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SHOWN_URL_CHARS = 200


class FetchError(Exception):
    """A request that was refused or failed; the message is short and meant for the model."""


def require_positive_int(value: object, field_name: str) -> int:
    """`value` if it is an int above zero, else a `ValidationError` naming `field_name`."""
    number = require_int(value, field_name)
    if number <= 0:
        raise ValidationError(f"{field_name} must be > 0, got: {value!r}")
    return number


# --- addresses ------------------------------------------------------------------------------


def is_public_address(address: IPAddress) -> bool:
    """Whether `address` is a global unicast address: not private, loopback, link-local,
    multicast, reserved or unspecified, and carrying no such IPv4 address inside it."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return is_public_address(address.ipv4_mapped)
    flags = (
        address.is_private,
        address.is_loopback,
        address.is_link_local,
        address.is_multicast,
        address.is_reserved,
        address.is_unspecified,
    )
    if not address.is_global or any(flags) or address in _SITE_LOCAL:
        return False
    return all(is_public_address(inner) for inner in _embedded_ipv4(address))


def _embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 transition address (6to4, Teredo, NAT64) leads to."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    if address in _NAT64:
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    return []


def _unmapped(address: IPAddress) -> IPAddress:
    """``::ffff:a.b.c.d`` as ``a.b.c.d``; other addresses unchanged."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _ip_or_none(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _is_host_name(host: str) -> bool:
    """Whether `host` is a syntactically valid DNS name (ASCII, IDNA already applied)."""
    labels = host.removesuffix(".").split(".")
    return len(host) <= 253 and all(_LABEL.fullmatch(label) for label in labels)


async def resolve_host(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, looked up off the event loop."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class AddressPolicy:
    """Which addresses a network tool may connect to: public addresses, plus what `allow`
    lists. Each entry of `allow` is an IP address, a network (``"10.0.0.0/8"``) or a host
    name (trusted whatever it resolves to). `resolver` replaces the system resolver (tests,
    custom DNS). Raises `ValidationError`, naming `owner`, for a malformed entry.
    """

    def __init__(
        self, allow: Sequence[str] = (), *, resolver: Resolver | None = None, owner: str = ""
    ) -> None:
        field_name = f"{owner} allow".strip()
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in as_tuple(allow, field_name):
            network, host = _parse_allow_entry(entry, field_name)
            if network is not None:
                networks.append(network)
            if host is not None:
                hosts.add(host)
        self.allow_hosts: frozenset[str] = frozenset(hosts)
        """Host names (lower case, no trailing dot) trusted whatever they resolve to."""
        self.allow_networks: tuple[IPNetwork, ...] = tuple(networks)
        """Networks whose addresses are permitted even when not public."""
        self._resolver: Resolver = resolver or resolve_host
        self._tls: ssl.SSLContext | None = None

    async def tls_context(self) -> ssl.SSLContext:
        """The TLS settings of this guard's https connections (``SSL_CERT_FILE`` and
        ``SSL_CERT_DIR`` apply), built once, off the event loop: loading the trust store
        takes tens of milliseconds."""
        if self._tls is None:
            import httpx

            self._tls = await asyncio.to_thread(httpx.create_ssl_context, trust_env=True)
        return self._tls

    def permits(self, address: IPAddress) -> bool:
        """Whether a connection to `address` is allowed."""
        plain = _unmapped(address)
        if any(plain in network for network in self.allow_networks):
            return True
        return is_public_address(address)

    async def addresses(self, host: str, port: int) -> list[str]:
        """The checked addresses to connect to for `host`; raises `FetchError` when the host
        cannot be resolved or any address it resolves to is refused."""
        literal = _ip_or_none(host)
        if literal is not None:
            if not self.permits(literal):
                raise FetchError(f"Access denied: {host} is {REFUSED}")
            return [str(literal)]
        found = await self._lookup(host, port)
        if host.removesuffix(".").lower() not in self.allow_hosts:
            for address in found:
                if not self.permits(address):
                    raise FetchError(f"Access denied: {host} resolves to {address}, {REFUSED}")
        return [str(address) for address in found]

    async def _lookup(self, host: str, port: int) -> list[IPAddress]:
        try:
            answers = await self._resolver(host, port)
        except (OSError, UnicodeError) as error:
            raise FetchError(f"Could not resolve host {host}: {describe_error(error)}") from None
        found: list[IPAddress] = []
        for answer in answers:
            address = _ip_or_none(str(answer))
            if address is None:
                raise FetchError(f"Could not resolve host {host}: bad address {answer!r}")
            if address not in found:
                found.append(address)
        if not found:
            raise FetchError(f"Could not resolve host {host}")
        return found

    def __repr__(self) -> str:
        allowed = sorted(self.allow_hosts) + [str(network) for network in self.allow_networks]
        return f"AddressPolicy(allow={allowed!r})"


def _parse_allow_entry(entry: object, field_name: str) -> tuple[IPNetwork | None, str | None]:
    """An allow-list entry as a network or a host name; `ValidationError` otherwise."""
    if isinstance(entry, str) and entry.strip():
        text = entry.strip()
        with contextlib.suppress(ValueError):  # not an address: perhaps a host name
            return ipaddress.ip_network(text.strip("[]"), strict=False), None
        host = text.removesuffix(".").lower()
        if _is_host_name(host) and not host.replace(".", "").isdigit():
            return None, host
    raise ValidationError(
        f"{field_name} entries must be IP addresses, networks or host names, got: {entry!r}"
    )


# --- URLs -----------------------------------------------------------------------------------


def shown(url: object) -> str:
    """`url` as text short enough for a message."""
    text = str(url)
    return text if len(text) <= _SHOWN_URL_CHARS else text[:_SHOWN_URL_CHARS] + "..."


def parse_url(url: str) -> httpx.URL:
    """`url` parsed and checked (http or https, a valid host and port); `FetchError` with a
    message for the model otherwise."""
    require("httpx", "tools")
    import httpx

    text = url.strip()
    if not text:
        raise FetchError("URL must not be blank")
    try:
        parsed = httpx.URL(text)
    except (httpx.InvalidURL, ValueError, TypeError) as error:
        raise FetchError(f"Invalid URL: {shown(text)} ({describe_error(error)})") from None
    return _checked(parsed, shown(text))


def _checked(parsed: httpx.URL, text: str) -> httpx.URL:
    scheme = parsed.scheme.lower()
    if not scheme:
        raise FetchError(f"Invalid URL: {text} (it must start with http:// or https://)")
    if scheme not in ("http", "https"):
        raise FetchError(f"Unsupported URL scheme {scheme!r}: only http and https can be used")
    host = parsed.raw_host.decode("ascii", errors="replace")
    if not host or (_ip_or_none(host) is None and not _is_host_name(host)):
        raise FetchError(f"Invalid URL: {text} (missing or malformed host)")
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise FetchError(f"Invalid URL: {text} (port out of range)")
    return parsed


def _port(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def media_type(content_type: str) -> str:
    """The media type of a ``Content-Type`` value, lower case, without parameters."""
    return content_type.split(";", 1)[0].strip().lower()


# --- fetching -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Limits:
    """How long a fetch may take and how much of the body it reads."""

    timeout: float
    """Seconds for the whole fetch: resolution, every redirect, the body."""
    max_bytes: int
    """The body is cut after this many (decoded) bytes."""
    max_redirects: int = DEFAULT_MAX_REDIRECTS


@dataclass(frozen=True, slots=True)
class Fetched:
    """A final (non-redirect) response."""

    url: str
    """The URL that answered (after redirects)."""
    status: int
    reason: str
    headers: Mapping[str, str]
    """Response headers, names in lower case."""
    content: bytes = b""
    truncated: bool = False
    """Whether the body was cut at `Limits.max_bytes`."""
    body_read: bool = True
    """False when the body was skipped (its content type was not wanted)."""
    charset: str | None = None

    @property
    def media_type(self) -> str:
        """The body's media type (``text/html``), or "" when the server gave none."""
        return media_type(self.headers.get("content-type", ""))

    def text(self, charset: str | None = None) -> str:
        """The body decoded with `charset`, else the response's charset (UTF-8 when none or
        unknown)."""
        try:
            return self.content.decode(charset or self.charset or "utf-8", errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class _Hop:
    """One request of a fetch: the first, or one a redirect leads to."""

    method: str
    url: httpx.URL
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None


async def fetch(
    method: str,
    url: str,
    *,
    policy: AddressPolicy,
    limits: Limits,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    read_body: Callable[[str], bool] | None = None,
) -> Fetched:
    """Send a request through the guard, following redirects, and read the final response.

    `read_body` gets the final response's media type and says whether to read the body.
    Every failure (refused address, bad URL, timeout, connection or protocol
    error, too many redirects) raises `FetchError` with a short message for the model.
    """
    require("httpx", "tools")
    import httpx

    hop = _Hop(method, parse_url(url), dict(headers or {}), body)
    try:
        async with asyncio.timeout(limits.timeout):
            return await _follow(hop, policy, limits, read_body)
    except (TimeoutError, httpx.TimeoutException):
        raise FetchError(f"Request timed out after {limits.timeout:g}s: {shown(url)}") from None
    except (
        httpx.HTTPError,
        httpx.InvalidURL,
        httpx.StreamError,
        OSError,
        UnicodeError,  # an unencodable header, or a redirect to an invalid IDNA host
        ValueError,
    ) as error:
        raise FetchError(f"Request failed: {shown(url)} ({describe_error(error)})") from None


async def _follow(
    hop: _Hop, policy: AddressPolicy, limits: Limits, read_body: Callable[[str], bool] | None
) -> Fetched:
    for _ in range(limits.max_redirects + 1):
        outcome = await _exchange(hop, policy, limits, read_body)
        if isinstance(outcome, Fetched):
            return outcome
        hop = outcome
    raise FetchError(f"Too many redirects (more than {limits.max_redirects})")


async def _exchange(
    hop: _Hop, policy: AddressPolicy, limits: Limits, read_body: Callable[[str], bool] | None
) -> Fetched | _Hop:
    """Send one hop on a client of its own: its final response, or the next hop."""
    import httpx

    host = hop.url.raw_host.decode("ascii")
    addresses = await policy.addresses(host, _port(hop.url))
    async with httpx.AsyncClient(
        follow_redirects=False,
        trust_env=False,  # no proxy: it would resolve the host out of the guard's sight
        verify=await policy.tls_context() if hop.url.scheme == "https" else False,
        timeout=limits.timeout,
    ) as client:
        response = await _connect(client, hop, addresses)
        try:
            following = _redirected(hop, response)
            if following is not None:
                return following
            return await _final(hop, response, limits, read_body)
        finally:
            await response.aclose()


async def _connect(client: httpx.AsyncClient, hop: _Hop, addresses: list[str]) -> httpx.Response:
    """Send `hop` to the first of `addresses` that accepts a connection."""
    import httpx

    reason = "no address"
    for address in addresses:
        try:
            return await client.send(_pinned(client, hop, address), stream=True)
        except httpx.ConnectError as error:
            reason = describe_error(error)
    raise FetchError(f"Could not connect to {hop.url.raw_host.decode('ascii')}: {reason}")


def _pinned(client: httpx.AsyncClient, hop: _Hop, address: str) -> httpx.Request:
    """`hop` as a request to `address`, still naming its host in ``Host`` and TLS."""
    host = hop.url.raw_host.decode("ascii")
    headers = {
        name: value
        for name, value in hop.headers.items()
        if name.lower() not in ("host", "accept-encoding")
    }
    headers["Host"] = hop.url.netloc.decode("ascii")
    headers["Accept-Encoding"] = "identity"  # a compressed body could burst the byte cap
    extensions = {}
    if hop.url.scheme == "https" and _ip_or_none(host) is None:
        extensions["sni_hostname"] = host  # the certificate is checked against it too
    return client.build_request(
        hop.method,
        hop.url.copy_with(host=address),
        headers=headers,
        content=hop.body,
        extensions=extensions,
    )


def _redirected(hop: _Hop, response: httpx.Response) -> _Hop | None:
    """The hop a redirect response leads to, or None when it is not a redirect."""
    import httpx

    location = response.headers.get("location")
    if response.status_code not in _REDIRECTS or not location:
        return None
    try:
        target = _checked(hop.url.join(location), shown(location))
    except httpx.InvalidURL:
        raise FetchError(f"Invalid redirect location: {shown(location)}") from None
    except FetchError as error:
        raise FetchError(f"Refused redirect: {error}") from None
    method, body, headers = hop.method, hop.body, dict(hop.headers)
    status = response.status_code
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, body = "GET", None
        headers = {k: v for k, v in headers.items() if k.lower() not in _BODY_HEADERS}
    if _origin(target) != _origin(hop.url):
        headers = {k: v for k, v in headers.items() if k.lower() in _SAFE_ACROSS_ORIGINS}
    return _Hop(method, target, headers, body)


def _origin(url: httpx.URL) -> tuple[str, bytes, int]:
    return url.scheme, url.raw_host.lower(), _port(url)


async def _final(
    hop: _Hop, response: httpx.Response, limits: Limits, read_body: Callable[[str], bool] | None
) -> Fetched:
    headers = {name.lower(): value for name, value in response.headers.items()}
    check_identity_encoding(headers)
    wanted = read_body is None or read_body(media_type(headers.get("content-type", "")))
    content, truncated = await read_capped(response, limits.max_bytes) if wanted else (b"", False)
    return Fetched(
        url=str(hop.url),
        status=response.status_code,
        reason=response.reason_phrase,
        headers=headers,
        content=content,
        truncated=truncated,
        body_read=wanted,
        charset=response.charset_encoding,
    )


def check_identity_encoding(headers: Mapping[str, str]) -> None:
    """Refuse a compressed body: decompressing one network chunk can produce gigabytes
    before the byte cap sees them (the guard asks for ``identity``; a server may ignore it)."""
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise FetchError(f"Compressed responses are not accepted (Content-Encoding: {encoding})")


async def read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Read `response`'s body up to `max_bytes`; the flag says whether more was left unread.
    Stops reading at the cap: an endless body is never buffered whole."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():  # never decompressed: see check_identity_encoding
        room = max_bytes - size
        if len(chunk) > room:
            chunks.append(chunk[:room])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False
