"""The network tools: http_request, web_scrape and web_search, and the address guard they
share (BEHAVIOUR 7.6, 7.7). A small HTTP server on 127.0.0.1 plays every remote side."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from agentensemble import Agent, Ensemble, ScriptedModel, Task, TaskExecutionError, tool_call
from agentensemble.errors import ValidationError
from agentensemble.review import ReviewDecision, ReviewHandler
from agentensemble.tools import ToolContext, ToolResult
from agentensemble.tools._http import HttpTool
from agentensemble.tools._network import (
    AddressPolicy,
    Fetched,
    FetchError,
    Limits,
    fetch,
    is_public_address,
)
from agentensemble.tools._resolve import tool_methods
from agentensemble.tools._web import (
    BraveSearch,
    SearchResult,
    SerpApiSearch,
    TavilySearch,
    WebScraperTool,
    WebSearchTool,
    strip_tags,
)
from tests.review.helpers import answering

pytestmark = pytest.mark.integration

LOOPBACK = ["127.0.0.1"]

ARTICLE = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk to light the "
    "great lamp. The lens, polished each morning, threw its beam twenty miles across the "
    "water."
)
PAGE = f"""<!doctype html>
<html><head><title>Lighthouse keeping</title><style>body {{ color: black }}</style></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About us</a> | <a href="/shop">Shop now</a></nav>
<main><article>
<h1>The keeper's log</h1>
<p>{ARTICLE}</p>
<p>Ships rounding the northern cape relied on the steady rhythm of the flashes to judge
their distance from the rocks, and many sailors owed their lives to that rhythm.</p>
<p>In winter storms the keeper stayed awake through the night, trimming the wick and
winding the clockwork that turned the lens.</p>
</article></main>
<footer><p>Copyright 2024 Example Corp. All rights reserved. Cookie settings.</p></footer>
<script>var tracking = "pixel";</script>
</body></html>"""


# --- a local HTTP server --------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    """A request the server received."""

    method: str
    target: str
    headers: dict[str, str]
    """Names in lower case."""
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.target).query))


Route = Callable[[Received, asyncio.StreamWriter], Awaitable[None]]


class LocalServer:
    """An HTTP/1.1 server on 127.0.0.1 with its own event loop in a thread. Tests add
    `routes` (path -> handler); every request is recorded in `received`."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.received: list[Received] = []
        self.disconnected = threading.Event()
        """Set when the client hangs up on an endless response."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: set[asyncio.Task[None]] = set()
        self._release = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.port = 0

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def start(self) -> None:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Release the hanging handlers, wait for every handler, stop the loop."""
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _call(self, coroutine: Awaitable[Any]) -> Any:
        async def run() -> Any:
            return await coroutine

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    async def _close(self) -> None:
        self._release.set()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            received = await _read_request(reader)
            self.received.append(received)
            await self.routes.get(received.path, self.respond(404, "no such page"))(
                received, writer
            )
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            await asyncio.gather(writer.wait_closed(), return_exceptions=True)

    # --- routes ---

    @staticmethod
    def respond(
        status: int,
        body: str | bytes = "",
        content_type: str = "text/plain; charset=utf-8",
        headers: Sequence[tuple[str, str]] = (),
    ) -> Route:
        data = body.encode() if isinstance(body, str) else body

        async def route(received: Received, writer: asyncio.StreamWriter) -> None:
            head = [("Content-Length", str(len(data)))]
            if content_type:
                head.append(("Content-Type", content_type))
            writer.write(_head(status, [*head, *headers]) + data)
            await writer.drain()

        return route

    def redirect(self, location: str, status: int = 302) -> Route:
        return self.respond(status, headers=[("Location", location)])

    def endless(self, content_type: str = "text/plain") -> Route:
        """Writes chunks until the client hangs up, then sets `disconnected`."""

        async def route(received: Received, writer: asyncio.StreamWriter) -> None:
            writer.write(_head(200, [("Content-Type", content_type)]))
            try:
                while True:
                    writer.write(b"x" * 16384)
                    await writer.drain()
                    await asyncio.sleep(0)  # let the loop notice the hang-up
            except (ConnectionError, OSError):
                self.disconnected.set()

        return route

    def hang(self) -> Route:
        """Answers only when the server stops."""

        async def route(received: Received, writer: asyncio.StreamWriter) -> None:
            await self._release.wait()

        return route


def _head(status: int, headers: Sequence[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _read_request(reader: asyncio.StreamReader) -> Received:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    request_line, *header_lines = head.strip().split("\r\n")
    method, target, _ = request_line.split(" ", 2)
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Received(method, target, headers, body)


@pytest.fixture
def server() -> Iterator[LocalServer]:
    running = LocalServer()
    running.start()
    yield running
    running.stop()


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every address a socket connects to during the test."""
    seen: list[object] = []
    connect = socket.socket.connect

    def spy(self: socket.socket, address: Any) -> Any:
        seen.append(address)
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", spy)
    return seen


def fake_resolver(names: dict[str, list[str]]) -> Callable[[str, int], Awaitable[list[str]]]:
    async def resolve(host: str, port: int) -> list[str]:
        host = host.lower().removesuffix(".")
        if host not in names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return names[host]

    return resolve


def context() -> ToolContext:
    return ToolContext(run_id="r", task_id="t", agent_role="Agent", task_description="Fetch")


async def scrape(tool: WebScraperTool, url: str) -> ToolResult:
    result = await tool.web_scrape(url)
    assert isinstance(result, ToolResult)
    return result


async def request(
    tool: HttpTool,
    method: str,
    url: str,
    headers: dict[str, str] | None = None,
    body: str | None = None,
) -> ToolResult:
    result = await tool.http_request(context(), method, url, headers, body)
    assert isinstance(result, ToolResult)
    return result


def failure(result: ToolResult) -> str:
    assert not result.is_success, result
    assert result.error_message is not None
    return result.error_message


# --- construction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: HttpTool(max_bytes=0), "HttpTool max_bytes must be > 0, got: 0"),
        (lambda: HttpTool(max_bytes=-5), "HttpTool max_bytes must be > 0, got: -5"),
        (lambda: HttpTool(timeout=-1), "HttpTool timeout must be a positive number"),
        (lambda: WebScraperTool(max_chars=-1), "WebScraperTool max_chars must be > 0, got: -1"),
        (lambda: WebScraperTool(max_bytes=True), "WebScraperTool max_bytes must be an integer"),
        (
            lambda: HttpTool(allow=["not a host!"]),
            "HttpTool allow entries must be IP addresses, networks or host names, "
            "got: 'not a host!'",
        ),
        (lambda: WebScraperTool(allow=[""]), "WebScraperTool allow entries must be"),
        (lambda: WebScraperTool(allow=["10.0.0.0/33"]), "got: '10.0.0.0/33'"),
        (lambda: HttpTool(allow="127.0.0.1"), "HttpTool allow must be a list, got: str"),
        (
            lambda: HttpTool(default_headers={"Bad Name": "x"}),
            "HttpTool default_headers: Invalid header name: 'Bad Name'",
        ),
        (
            lambda: WebSearchTool(object()),  # type: ignore[arg-type]
            "WebSearchTool provider must have an async search",
        ),
        (
            lambda: WebSearchTool(TavilySearch("k"), max_results=0),
            "WebSearchTool max_results must be > 0, got: 0",
        ),
        (lambda: TavilySearch(" "), "TavilySearch api_key must not be blank"),
        (
            lambda: BraveSearch("k", base_url="api.search.brave.com"),
            "BraveSearch base_url must start with http:// or https://, got: 'api.search.brave.com'",
        ),
        (lambda: SerpApiSearch("k", timeout=0), "SerpApiSearch timeout must be a positive"),
    ],
)
def test_constructor_misuse_names_the_field_and_value(
    make: Callable[[], object], message: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        make()
    assert message in str(raised.value)


def test_allow_entries_are_networks_addresses_or_host_names() -> None:
    policy = AddressPolicy(["127.0.0.1", "10.0.0.0/8", "[::1]", "Intranet.Example."])
    assert policy.allow_hosts == {"intranet.example"}
    assert [str(network) for network in policy.allow_networks] == [
        "127.0.0.1/32",
        "10.0.0.0/8",
        "::1/128",
    ]


def test_the_tools_are_offered_with_their_names_and_arguments() -> None:
    (http,) = tool_methods(HttpTool())
    (scraper,) = tool_methods(WebScraperTool())
    (search,) = tool_methods(WebSearchTool(TavilySearch("k")))
    assert [http.spec.name, scraper.spec.name, search.spec.name] == [
        "http_request",
        "web_scrape",
        "web_search",
    ]
    schema = http.spec.parameters
    assert list(schema["properties"]) == ["method", "url", "headers", "body"]
    assert schema["required"] == ["method", "url"]
    assert scraper.spec.parameters["required"] == ["url"]
    assert search.spec.parameters["required"] == ["query"]


def test_the_repr_never_shows_an_api_key() -> None:
    assert "secret" not in repr(WebSearchTool(BraveSearch("secret-key")))


def test_importing_the_tools_does_not_import_httpx_or_trafilatura() -> None:
    code = (
        "import sys, agentensemble\n"
        "before = {'httpx' in sys.modules, 'trafilatura' in sys.modules}\n"
        "import agentensemble.tools._http, agentensemble.tools._web\n"
        "assert 'httpx' not in sys.modules and 'trafilatura' not in sys.modules, before\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- the address guard ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "192.0.2.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "2002:7f00:1::",  # 6to4 around 127.0.0.1
        "64:ff9b::a00:1",  # NAT64 around 10.0.0.1
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "fec0::1",  # deprecated site-local
    ],
)
def test_private_and_special_addresses_are_refused(address: str) -> None:
    assert not is_public_address(ipaddress.ip_address(address))
    assert not AddressPolicy().permits(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
)
def test_public_addresses_are_permitted(address: str) -> None:
    assert is_public_address(ipaddress.ip_address(address))


def test_the_allow_list_permits_its_networks_also_as_mapped_ipv6() -> None:
    policy = AddressPolicy(["127.0.0.1", "10.0.0.0/8"])
    for address in ("127.0.0.1", "::ffff:127.0.0.1", "10.200.3.4"):
        assert policy.permits(ipaddress.ip_address(address))
    assert not policy.permits(ipaddress.ip_address("127.0.0.2"))
    assert not policy.permits(ipaddress.ip_address("::1"))


async def test_every_resolved_address_is_checked() -> None:
    resolver = fake_resolver({"mixed.test": ["93.184.216.34", "10.0.0.7"]})
    with pytest.raises(FetchError) as raised:
        await AddressPolicy(resolver=resolver).addresses("mixed.test", 80)
    assert str(raised.value) == (
        "Access denied: mixed.test resolves to 10.0.0.7, a private, loopback, link-local or "
        "reserved address"
    )


async def test_an_allowed_host_name_is_trusted_whatever_it_resolves_to() -> None:
    resolver = fake_resolver({"intranet.test": ["10.0.0.7", "10.0.0.7"]})
    policy = AddressPolicy(["intranet.test"], resolver=resolver)
    assert await policy.addresses("INTRANET.test.", 80) == ["10.0.0.7"]


async def test_a_host_that_does_not_resolve_is_reported() -> None:
    policy = AddressPolicy(resolver=fake_resolver({}))
    with pytest.raises(FetchError, match=r"^Could not resolve host nowhere\.test: "):
        await policy.addresses("nowhere.test", 80)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",
        "10.0.0.1",
        "169.254.169.254",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "2130706433",  # 127.0.0.1 as one number
    ],
)
async def test_internal_addresses_are_refused_before_any_connection(
    server: LocalServer, connections: list[object], host: str
) -> None:
    server.routes["/"] = server.respond(200, "internal secret")
    url = f"http://{host}:{server.port}/"
    for result in (
        await scrape(WebScraperTool(), url),
        await request(HttpTool(), "GET", url),
    ):
        assert failure(result).startswith("Access denied: ")
    assert connections == []
    assert server.received == []


# --- web_scrape -----------------------------------------------------------------------------


async def test_a_page_is_scraped_to_its_main_text(server: LocalServer) -> None:
    server.routes["/article"] = server.respond(200, PAGE, "text/html; charset=utf-8")
    result = await scrape(WebScraperTool(allow=LOOPBACK), server.url("/article"))
    assert result.is_success
    assert ARTICLE in result.output
    assert "In winter storms the keeper stayed awake" in result.output
    for boilerplate in ("About us", "Shop now", "Copyright 2024", "tracking", "color: black"):
        assert boilerplate not in result.output
    (received,) = server.received
    assert received.method == "GET"
    assert received.headers["accept"].startswith("text/html")
    assert received.headers["host"] == f"127.0.0.1:{server.port}"


async def test_the_text_is_cut_at_max_chars(server: LocalServer) -> None:
    server.routes["/article"] = server.respond(200, PAGE, "text/html")
    whole = await scrape(WebScraperTool(allow=LOOPBACK), server.url("/article"))
    cut = await scrape(WebScraperTool(allow=LOOPBACK, max_chars=40), server.url("/article"))
    assert cut.output == whole.output[:40] + "\n\n[Content cut at 40 characters]"


async def test_a_page_trafilatura_finds_nothing_in_falls_back_to_its_text(
    server: LocalServer,
) -> None:
    page = "<html><body><footer>Only a <b>footer</b> here</footer><script>x()</script></body>"
    server.routes["/footer"] = server.respond(200, page, "text/html")
    result = await scrape(WebScraperTool(allow=LOOPBACK), server.url("/footer"))
    assert result.output == "Only a footer here"


def test_the_fallback_keeps_blocks_on_their_own_lines() -> None:
    page = "<head><title>T</title></head><h1>Title</h1><p>One &amp; <i>two</i></p><li>three"
    assert strip_tags(page) == "Title\nOne & two\nthree"


async def test_a_plain_text_page_is_returned_as_text(server: LocalServer) -> None:
    server.routes["/notes.txt"] = server.respond(200, "line one\n\n  line   two  \n")
    result = await scrape(WebScraperTool(allow=LOOPBACK), server.url("/notes.txt"))
    assert result.output == "line one\nline two"


async def test_a_page_without_a_charset_header_is_decoded_as_it_declares(
    server: LocalServer,
) -> None:
    page = '<html><head><meta charset="iso-8859-1"></head><body><footer>Caf\xe9</footer></body>'
    server.routes["/latin"] = server.respond(200, page.encode("latin-1"), "text/html")
    result = await scrape(WebScraperTool(allow=LOOPBACK), server.url("/latin"))
    assert result.output == "Café"


async def test_a_page_without_a_content_type_is_read_as_html_when_it_looks_like_it(
    server: LocalServer,
) -> None:
    server.routes["/untyped"] = server.respond(200, "<p>Hello <b>there</b></p>", content_type="")
    result = await scrape(WebScraperTool(allow=LOOPBACK), server.url("/untyped"))
    assert result.output == "Hello there"


@pytest.mark.parametrize(
    ("route", "message"),
    [
        (LocalServer.respond(404, "gone"), "HTTP 404 Not Found: {url}"),
        (LocalServer.respond(503, "busy"), "HTTP 503 Service Unavailable: {url}"),
        (
            LocalServer.respond(200, b"\x89PNG", "image/png"),
            "Unsupported content type image/png: web_scrape reads HTML and plain-text pages "
            "({url})",
        ),
        (LocalServer.respond(200, "<html><body></body></html>", "text/html"), "No readable"),
    ],
)
async def test_pages_that_cannot_be_read_are_reported(
    server: LocalServer, route: Route, message: str
) -> None:
    server.routes["/page"] = route
    url = server.url("/page")
    result = await scrape(WebScraperTool(allow=LOOPBACK), url)
    assert failure(result).startswith(message.format(url=url))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "URL must not be blank"),
        ("   ", "URL must not be blank"),
        ("not a url", "Invalid URL: not a url (it must start with http:// or https://)"),
        ("example.com/page", "Invalid URL: example.com/page (it must start with http://"),
        ("http://", "Invalid URL: http:// (missing or malformed host)"),
        ("http:///etc/passwd", "Invalid URL: http:///etc/passwd (missing or malformed host)"),
        ("http://exa mple.com/", "Invalid URL: http://exa mple.com/ (missing or malformed"),
        ("http://[::1/", "Invalid URL: http://[::1/ ("),
        ("http://example.com:99999/", "Invalid URL: http://example.com:99999/ (port out of"),
        ("ftp://example.com/file", "Unsupported URL scheme 'ftp': only http and https"),
        ("file:///etc/passwd", "Unsupported URL scheme 'file': only http and https"),
        ("javascript:alert(1)", "Unsupported URL scheme 'javascript': only http and https"),
        ("gopher://127.0.0.1:70/", "Unsupported URL scheme 'gopher': only http and https"),
    ],
)
async def test_malformed_urls_and_other_schemes_are_refused(
    connections: list[object], url: str, message: str
) -> None:
    for result in (
        await scrape(WebScraperTool(allow=LOOPBACK), url),
        await request(HttpTool(allow=LOOPBACK), "GET", url),
    ):
        assert failure(result).startswith(message)
    assert connections == []


async def test_a_slow_server_times_out(server: LocalServer) -> None:
    server.routes["/slow"] = server.hang()
    result = await scrape(WebScraperTool(allow=LOOPBACK, timeout=0.05), server.url("/slow"))
    assert failure(result) == f"Request timed out after 0.05s: {server.url('/slow')}"


async def test_an_endless_page_is_cut_at_the_byte_cap(server: LocalServer) -> None:
    server.routes["/endless"] = server.endless("text/plain")
    tool = WebScraperTool(allow=LOOPBACK, max_bytes=50_000, max_chars=100_000)
    result = await scrape(tool, server.url("/endless"))
    assert result.output == "x" * 50_000 + "\n\n[Page cut at 50000 bytes before extraction]"
    assert await asyncio.to_thread(server.disconnected.wait, 30)


# --- redirects ------------------------------------------------------------------------------


async def test_a_redirect_into_a_refused_address_is_refused(server: LocalServer) -> None:
    server.routes["/start"] = server.redirect("http://169.254.169.254/latest/meta-data/")
    result = await scrape(WebScraperTool(allow=LOOPBACK), server.url("/start"))
    assert failure(result) == (
        "Access denied: 169.254.169.254 is a private, loopback, link-local or reserved address"
    )


async def test_trust_in_a_host_name_does_not_carry_over_to_where_it_redirects(
    server: LocalServer,
) -> None:
    """``public.test`` is allowed by name (it resolves to 127.0.0.1 here); its redirect to
    127.0.0.1 itself, an address nobody allowed, is refused before it is requested."""
    server.routes["/hop"] = server.redirect(server.url("/admin"))
    server.routes["/admin"] = server.respond(200, "admin console")
    server.routes["/same-host"] = server.redirect(f"//public.test:{server.port}/page")
    server.routes["/page"] = server.respond(200, "the page")
    policy = AddressPolicy(["public.test"], resolver=fake_resolver({"public.test": ["127.0.0.1"]}))
    limits = Limits(timeout=10, max_bytes=1000)

    with pytest.raises(FetchError, match=r"^Access denied: 127\.0\.0\.1 is a private"):
        await fetch("GET", server.url("/hop", "public.test"), policy=policy, limits=limits)
    assert [received.path for received in server.received] == ["/hop"]

    fetched = await fetch(
        "GET", server.url("/same-host", "public.test"), policy=policy, limits=limits
    )
    assert (fetched.status, fetched.content) == (200, b"the page")
    assert fetched.url == server.url("/page", "public.test")
    assert server.received[-1].headers["host"] == f"public.test:{server.port}"


async def test_redirects_follow_http_method_rules_and_drop_credentials_across_origins(
    server: LocalServer,
) -> None:
    server.routes["/keep"] = server.redirect("/echo", status=307)
    server.routes["/see-other"] = server.redirect("/echo", status=303)
    server.routes["/elsewhere"] = server.redirect(server.url("/echo", "public.test"), 308)
    server.routes["/echo"] = server.respond(200, "ok")
    policy = AddressPolicy(
        ["127.0.0.1", "public.test"], resolver=fake_resolver({"public.test": ["127.0.0.1"]})
    )
    credentials = {"Authorization": "Bearer t", "Content-Type": "text/plain"}

    async def post(path: str) -> Received:
        await fetch(
            "POST",
            server.url(path),
            policy=policy,
            limits=Limits(timeout=10, max_bytes=1000),
            headers=credentials,
            body=b"payload",
        )
        return server.received[-1]

    kept = await post("/keep")
    assert (kept.method, kept.body, kept.headers["authorization"]) == (
        "POST",
        b"payload",
        "Bearer t",
    )
    seen_other = await post("/see-other")
    assert (seen_other.method, seen_other.body) == ("GET", b"")
    assert "content-type" not in seen_other.headers
    elsewhere = await post("/elsewhere")
    assert (elsewhere.method, elsewhere.body) == ("POST", b"payload")
    assert "authorization" not in elsewhere.headers


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("/loop", "Too many redirects (more than 5)"),
        ("ftp://example.com/", "Refused redirect: Unsupported URL scheme 'ftp'"),
        ("http://[oops/", "Refused redirect: Invalid URL: http://[oops/ (missing or malformed"),
        ("http://a:notaport/", "(Invalid URL in location header: Invalid port: 'notaport'"),
    ],
)
async def test_bad_redirects_are_reported(server: LocalServer, location: str, message: str) -> None:
    server.routes["/loop"] = server.redirect(location)
    result = await request(HttpTool(allow=LOOPBACK), "GET", server.url("/loop"))
    assert message in failure(result)


# --- http_request ---------------------------------------------------------------------------


async def test_a_request_returns_status_headers_and_body(server: LocalServer) -> None:
    server.routes["/items"] = server.respond(
        201, '{"id": 7}', "application/json", headers=[("ETag", '"v1"'), ("X-Other", "no")]
    )
    tool = HttpTool(allow=LOOPBACK, default_headers={"X-Api-Key": "k", "Accept": "text/plain"})
    result = await request(
        tool, "post", server.url("/items"), {"Accept": "application/json"}, '{"name": "a"}'
    )
    assert result.output == (
        'HTTP 201 Created\ncontent-type: application/json\ncontent-length: 9\netag: "v1"\n\n'
        '{"id": 7}'
    )
    assert result.structured_output["status"] == 201
    (received,) = server.received
    assert (received.method, received.body) == ("POST", b'{"name": "a"}')
    assert received.headers["content-type"] == "application/json"
    assert received.headers["x-api-key"] == "k"
    assert received.headers["accept"] == "application/json"


async def test_headers_may_also_come_as_a_json_string(server: LocalServer) -> None:
    server.routes["/"] = server.respond(200, "ok")
    (http,) = tool_methods(HttpTool(allow=LOOPBACK))
    arguments = {"method": "GET", "url": server.url("/"), "headers": '{"X-Trace": "abc"}'}
    result = await http.invoke(json.dumps(arguments), context())
    assert result.is_success, result
    assert server.received[0].headers["x-trace"] == "abc"


async def test_a_text_body_is_sent_as_plain_text(server: LocalServer) -> None:
    server.routes["/"] = server.respond(204)
    result = await request(HttpTool(allow=LOOPBACK), "PUT", server.url("/"), body="hello")
    assert result.output == "HTTP 204 No Content\ncontent-type: text/plain; charset=utf-8\n" + (
        "content-length: 0\n\n[Empty body]"
    )
    assert server.received[0].headers["content-type"] == "text/plain; charset=utf-8"


async def test_an_error_status_is_a_failure_that_shows_the_response(server: LocalServer) -> None:
    server.routes["/missing"] = server.respond(404, '{"error": "no such item"}', "application/json")
    url = server.url("/missing")
    result = await request(HttpTool(allow=LOOPBACK), "DELETE", url)
    assert failure(result) == f"HTTP 404 Not Found: DELETE {url}"
    assert result.text_for_model.startswith("HTTP 404 Not Found\n")
    assert result.text_for_model.endswith('{"error": "no such item"}')


async def test_a_binary_body_is_not_shown(server: LocalServer) -> None:
    server.routes["/logo.png"] = server.respond(200, b"\x89PNG\r\n", "image/png")
    result = await request(HttpTool(allow=LOOPBACK), "GET", server.url("/logo.png"))
    assert result.output.endswith("[Body not shown: content type image/png is not text]")


async def test_an_endless_response_is_cut_and_the_connection_closed(server: LocalServer) -> None:
    server.routes["/stream"] = server.endless("application/json")
    result = await request(
        HttpTool(allow=LOOPBACK, max_bytes=100_000), "GET", server.url("/stream")
    )
    assert result.is_success
    body = result.output.split("\n\n", 1)[1]
    assert body == "x" * 100_000 + "\n[Body cut at 100000 bytes]"
    assert result.structured_output["truncated"] is True
    assert await asyncio.to_thread(server.disconnected.wait, 30)


@pytest.mark.parametrize(
    ("method", "headers", "message"),
    [
        ("", None, "HTTP method must not be blank"),
        ("FETCH", None, "Unsupported HTTP method 'FETCH': use one of GET, POST, PUT, PATCH"),
        ("GET", {"Bad Header": "x"}, "Invalid header name: 'Bad Header'"),
        ("GET", {"X-A": "one\r\nX-B: two"}, "Invalid value for header 'X-A'"),
        ("GET", {"Host": "internal"}, "Header 'Host' is set by the tool and cannot be given"),
    ],
)
async def test_bad_requests_are_reported_without_sending(
    server: LocalServer, method: str, headers: dict[str, str] | None, message: str
) -> None:
    result = await request(HttpTool(allow=LOOPBACK), method, server.url("/"), headers)
    assert failure(result).startswith(message)
    assert server.received == []


# --- http_request approvals -----------------------------------------------------------------


def run_post(server: LocalServer, handler: ReviewHandler | None) -> tuple[ScriptedModel, Ensemble]:
    call = tool_call("http_request", method="POST", url=server.url("/orders"), body="2 cakes")
    model = ScriptedModel([call, "Done."])
    tool = HttpTool(allow=LOOPBACK, require_approval=True)
    agent = Agent("Clerk", "Places orders", llm=model, tools=[tool])
    return model, Ensemble(tasks=[Task("Order cakes", agent=agent)], review_handler=handler)


def tool_result_seen(model: ScriptedModel) -> str:
    return model.requests[1].messages[-1].text or ""


@pytest.mark.parametrize(
    ("decision", "sent"),
    [(ReviewDecision.Continue(), b"2 cakes"), (ReviewDecision.Edit("1 cake"), b"1 cake")],
)
def test_an_approved_request_is_sent_with_the_reviewed_body(
    server: LocalServer, decision: ReviewDecision, sent: bytes
) -> None:
    server.routes["/orders"] = server.respond(200, "ordered")
    reviewer = answering(decision)
    model, ensemble = run_post(server, reviewer)
    assert ensemble.run().raw == "Done."
    (review,) = reviewer.requests
    assert review.tool_name == "http_request"
    assert review.task_output == f"HTTP request: POST {server.url('/orders')}\nBody:\n2 cakes"
    assert [received.body for received in server.received] == [sent]
    assert tool_result_seen(model).endswith("\n\nordered")


def test_a_rejected_request_is_not_sent(server: LocalServer) -> None:
    model, ensemble = run_post(server, answering(ReviewDecision.ExitEarly()))
    ensemble.run()
    assert tool_result_seen(model) == (
        f"Error: HTTP request rejected by reviewer: POST {server.url('/orders')}"
    )
    assert server.received == []


def test_a_request_that_needs_approval_fails_the_run_without_a_review_handler(
    server: LocalServer,
) -> None:
    model, ensemble = run_post(server, None)
    with pytest.raises(TaskExecutionError, match="Tool 'http_request' requires approval"):
        ensemble.run()
    assert len(model.requests) == 1
    assert server.received == []


# --- web_search -----------------------------------------------------------------------------


def json_route(server: LocalServer, payload: object, status: int = 200) -> Route:
    return server.respond(status, json.dumps(payload), "application/json")


async def search(tool: WebSearchTool, query: str) -> ToolResult:
    result = await tool.web_search(query)
    assert isinstance(result, ToolResult)
    return result


LIGHT, KEEPER, TOWER = "https://a.example/light", "https://b.example/keeper", "A tower with a lamp."
TWO_RESULTS = (
    "1. Lighthouse\n   URL: https://a.example/light\n   A tower with a lamp.\n\n"
    "2. https://b.example/keeper\n   URL: https://b.example/keeper\n   Keeps the light."
)


async def test_tavily_posts_the_query_with_a_bearer_token(server: LocalServer) -> None:
    server.routes["/search"] = json_route(
        server,
        {
            "query": "lighthouses",
            "results": [
                {"title": "Lighthouse", "url": LIGHT, "content": TOWER},
                {"title": "", "url": KEEPER, "content": "Keeps the light."},
                {"title": "No URL", "content": "skipped"},
                {"title": "Third", "url": "https://c.example/", "content": "over the limit"},
            ],
        },
    )
    tool = WebSearchTool(TavilySearch("tvly-key", base_url=server.url("")), max_results=2)
    result = await search(tool, "  lighthouses ")
    assert result.output == TWO_RESULTS
    assert result.structured_output[0] == SearchResult(
        "Lighthouse", "https://a.example/light", "A tower with a lamp."
    )
    (received,) = server.received
    assert (received.method, received.path) == ("POST", "/search")
    assert received.headers["authorization"] == "Bearer tvly-key"
    assert json.loads(received.body) == {"query": "lighthouses", "max_results": 2}


async def test_serpapi_sends_the_key_and_query_as_parameters(server: LocalServer) -> None:
    server.routes["/search.json"] = json_route(
        server,
        {
            "organic_results": [
                {"title": "Lighthouse", "link": LIGHT, "snippet": TOWER},
                {"link": KEEPER, "snippet": "Keeps  the\nlight."},
            ]
        },
    )
    tool = WebSearchTool(SerpApiSearch("serp-key", base_url=server.url("/")), max_results=3)
    result = await search(tool, "lighthouses")
    assert result.output == TWO_RESULTS
    (received,) = server.received
    assert (received.method, received.path) == ("GET", "/search.json")
    assert received.query == {
        "engine": "google",
        "q": "lighthouses",
        "num": "3",
        "api_key": "serp-key",
    }


async def test_brave_sends_the_key_in_a_header_and_strips_highlights(
    server: LocalServer,
) -> None:
    server.routes["/res/v1/web/search"] = json_route(
        server,
        {
            "type": "search",
            "web": {
                "results": [
                    {
                        "title": "<strong>Lighthouse</strong>",
                        "url": LIGHT,
                        "description": "A tower with a <strong>lamp</strong>.",
                    },
                    {"title": "", "url": KEEPER, "description": "Keeps the light."},
                ]
            },
        },
    )
    tool = WebSearchTool(BraveSearch("brave-key", base_url=server.url("")))
    result = await search(tool, "lighthouses")
    assert result.output == TWO_RESULTS
    (received,) = server.received
    assert (received.method, received.path) == ("GET", "/res/v1/web/search")
    assert received.headers["x-subscription-token"] == "brave-key"
    assert received.query == {"q": "lighthouses", "count": "5"}


@pytest.mark.parametrize(
    ("make", "path"),
    [
        (TavilySearch, "/search"),
        (SerpApiSearch, "/search.json"),
        (BraveSearch, "/res/v1/web/search"),
    ],
)
async def test_no_results_are_reported_as_such(
    server: LocalServer, make: type[TavilySearch], path: str
) -> None:
    server.routes[path] = json_route(server, {})
    result = await search(WebSearchTool(make("k", base_url=server.url(""))), "zzqx")
    assert (result.is_success, result.output) == (True, "No results found for: zzqx")


async def test_serpapi_no_results_error_is_an_empty_result(server: LocalServer) -> None:
    no_results = {"error": "Google hasn't returned any results for this query."}
    server.routes["/search.json"] = json_route(server, no_results)
    result = await search(WebSearchTool(SerpApiSearch("k", base_url=server.url(""))), "zzqx")
    assert result.output == "No results found for: zzqx"


@pytest.mark.parametrize(
    ("route", "message"),
    [
        (
            LocalServer.respond(401, '{"detail": "Unauthorized: invalid API key"}'),
            'Web search failed: Tavily returned HTTP 401: {"detail": "Unauthorized: invalid',
        ),
        (
            LocalServer.respond(200, "<html>maintenance</html>", "text/html"),
            "Web search failed: Tavily returned a response that is not JSON",
        ),
    ],
)
async def test_provider_errors_are_reported(
    server: LocalServer, route: Route, message: str
) -> None:
    server.routes["/search"] = route
    result = await search(WebSearchTool(TavilySearch("k", base_url=server.url(""))), "q")
    assert failure(result).startswith(message)


async def test_a_serpapi_error_is_reported(server: LocalServer) -> None:
    server.routes["/search.json"] = json_route(server, {"error": "Invalid API key."})
    result = await search(WebSearchTool(SerpApiSearch("k", base_url=server.url(""))), "q")
    assert failure(result) == "Web search failed: SerpApi error: Invalid API key."


async def test_a_slow_provider_times_out(server: LocalServer) -> None:
    server.routes["/res/v1/web/search"] = server.hang()
    provider = BraveSearch("k", base_url=server.url(""), timeout=0.05)
    result = await search(WebSearchTool(provider), "q")
    assert failure(result) == "Web search failed: Brave Search did not answer within 0.05s"


async def test_an_unreachable_provider_is_reported() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = TavilySearch("k", base_url=f"http://127.0.0.1:{port}")
    result = await search(WebSearchTool(provider), "q")
    assert failure(result).startswith("Web search failed: Tavily request failed: ")


async def test_a_blank_query_or_a_broken_provider_is_reported() -> None:
    class Broken:
        async def search(self, query: str, max_results: int) -> list[SearchResult]:
            raise RuntimeError("index offline")

    tool = WebSearchTool(Broken())
    assert failure(await search(tool, "  ")) == "Search query must not be blank"
    assert failure(await search(tool, "q")) == "Web search failed: index offline"


# --- end to end -----------------------------------------------------------------------------


def test_an_agent_scrapes_a_page(server: LocalServer) -> None:
    server.routes["/article"] = server.respond(200, PAGE, "text/html; charset=utf-8")
    model = ScriptedModel([tool_call("web_scrape", url=server.url("/article")), "A keeper."])
    agent = Agent("Researcher", "Reads pages", llm=model, tools=[WebScraperTool(allow=LOOPBACK)])
    output = Ensemble(tasks=[Task("Summarise the article", agent=agent)]).run()
    assert output.raw == "A keeper."
    seen = tool_result_seen(model)
    assert ARTICLE in seen
    assert "Copyright" not in seen


def test_fetched_text_falls_back_to_utf8_for_an_unknown_charset() -> None:
    fetched = Fetched("u", 200, "OK", {}, "café".encode(), charset="no-such-charset")
    assert fetched.text() == "café"


# --- found in review ---------------------------------------------------------------------


async def test_a_redirect_to_another_origin_keeps_only_harmless_headers(
    server: LocalServer,
) -> None:
    server.routes["/elsewhere"] = server.redirect(server.url("/echo", "public.test"), 302)
    server.routes["/echo"] = server.respond(200, "ok")
    policy = AddressPolicy(
        ["127.0.0.1", "public.test"], resolver=fake_resolver({"public.test": ["127.0.0.1"]})
    )
    tool = HttpTool(allow=["127.0.0.1", "public.test"], default_headers={"X-Api-Key": "SECRET"})
    tool.policy = policy
    result = await request(tool, "GET", server.url("/elsewhere"), {"X-Auth-Token": "t"})
    assert result.is_success
    first, second = server.received[-2:]
    assert first.headers["x-api-key"] == "SECRET"
    assert "x-api-key" not in second.headers
    assert "x-auth-token" not in second.headers
    assert second.headers["accept-encoding"] == "identity"


async def test_a_compressed_body_is_refused_unread(server: LocalServer) -> None:
    server.routes["/zip"] = server.respond(
        200, b"\x28\xb5\x2f\xfd" * 10, headers=[("Content-Encoding", "zstd")]
    )
    tool = HttpTool(allow=["127.0.0.1"], max_bytes=10)
    message = failure(await request(tool, "GET", server.url("/zip")))
    assert message == "Compressed responses are not accepted (Content-Encoding: zstd)"


@pytest.mark.parametrize(
    ("headers", "body", "message"),
    [
        ({"X-A": "café"}, None, "Invalid value for header 'X-A': it must be ASCII text"),
        (None, "\ud800", "The request body is not valid Unicode text"),
    ],
)
async def test_text_that_cannot_be_sent_is_reported(
    server: LocalServer, headers: dict[str, str] | None, body: str | None, message: str
) -> None:
    sent = len(server.received)
    result = await request(HttpTool(allow=["127.0.0.1"]), "POST", server.url("/x"), headers, body)
    assert failure(result) == message
    assert len(server.received) == sent


async def test_a_provider_returning_the_wrong_shape_is_a_failed_search() -> None:
    class Sloppy:
        async def search(self, query: str, max_results: int) -> object:
            return [{"title": "a dict, not a SearchResult"}]

    result = await search(WebSearchTool(Sloppy()), "anything")  # type: ignore[arg-type]
    assert failure(result).startswith("Web search failed:")
