"""`WebScraperTool` (``web_scrape``) reads a web page as text; `WebSearchTool`
(``web_search``) searches the web through a `WebSearchProvider`: `TavilySearch`,
`SerpApiSearch` or `BraveSearch` (BEHAVIOUR 7.6, 7.7).

Pages are fetched through `_network`'s address guard. Search providers talk to their own
fixed API hosts (or the `base_url` given), so they skip the guard, but they too run under a
timeout, read a capped body and close their client every time.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import Field

from agentensemble._calling import call_user_code
from agentensemble._checks import require_seconds, require_text
from agentensemble._extras import require
from agentensemble.errors import ToolConfigurationError, ValidationError, describe_error
from agentensemble.tools._function import tool
from agentensemble.tools._network import (
    AddressPolicy,
    Fetched,
    FetchError,
    Limits,
    check_identity_encoding,
    fetch,
    read_capped,
    require_positive_int,
    shown,
)
from agentensemble.tools._result import ToolResult

__all__ = [
    "BraveSearch",
    "SearchResult",
    "SerpApiSearch",
    "TavilySearch",
    "WebScraperTool",
    "WebSearchError",
    "WebSearchProvider",
    "WebSearchTool",
]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_PAGE_TYPES = _HTML_TYPES | {"text/plain", ""}
_ACCEPT = "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8"
_USER_AGENT = "agentensemble-web-scraper"
_PROVIDER_MAX_BYTES = 2_000_000
_MAX_SEARCH_RESULTS = 20
_TAG = re.compile(r"<[^>]*>")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\f\v\r]+")


# --- web_scrape -----------------------------------------------------------------------------


class WebScraperTool:
    """Give it to an agent (``tools=[WebScraperTool()]``) so that it can read web pages.

    The page's main content is extracted with trafilatura (navigation, footers and other
    boilerplate dropped), or, when that finds nothing, the page's text with the markup
    stripped; plain-text pages are returned as they are. The text is cut at `max_chars`
    characters and the body at `max_bytes` bytes (the model is told). Pages are fetched
    only from public addresses unless `allow` lists hosts, addresses or networks, and every
    redirect is checked the same way; `timeout` (seconds) covers the whole fetch. Raises
    `ValidationError` for a malformed setting.
    """

    def __init__(
        self,
        *,
        allow: Sequence[str] = (),
        timeout: float = 10.0,
        max_bytes: int = 5_000_000,
        max_chars: int = 5000,
    ) -> None:
        require("httpx", "tools")
        require("trafilatura", "tools")
        self.policy = AddressPolicy(allow, owner="WebScraperTool")
        self.limits = Limits(
            timeout=require_seconds(timeout, "WebScraperTool timeout"),
            max_bytes=require_positive_int(max_bytes, "WebScraperTool max_bytes"),
        )
        self.max_chars = require_positive_int(max_chars, "WebScraperTool max_chars")

    @tool(name="web_scrape")
    async def web_scrape(
        self, url: Annotated[str, Field(description="The http or https URL of the page")]
    ) -> ToolResult:
        """Fetch a web page and return its main text content, without navigation, ads and
        other boilerplate."""
        url = url.strip()
        try:
            fetched = await fetch(
                "GET",
                url,
                policy=self.policy,
                limits=self.limits,
                headers={"Accept": _ACCEPT, "User-Agent": _USER_AGENT},
                read_body=lambda media: media in _PAGE_TYPES,
            )
        except FetchError as error:
            return ToolResult.failure(str(error))
        if not 200 <= fetched.status < 300:
            return ToolResult.failure(f"HTTP {fetched.status} {fetched.reason}: {shown(url)}")
        if not fetched.body_read:
            return ToolResult.failure(
                f"Unsupported content type {fetched.media_type}: web_scrape reads HTML and "
                f"plain-text pages ({shown(url)})"
            )
        try:  # extraction runs in a thread; the tool stops waiting at its timeout
            async with asyncio.timeout(self.limits.timeout):
                text = await call_user_code(_page_text, fetched, is_async=False)
        except TimeoutError:
            return ToolResult.failure(
                f"Extracting the text of {shown(url)} took longer than {self.limits.timeout:g}s"
            )
        if not text:
            return ToolResult.failure(f"No readable text found at {shown(url)}")
        return ToolResult.success(self._cut(text, fetched))

    def _cut(self, text: str, fetched: Fetched) -> str:
        notes = []
        if len(text) > self.max_chars:
            text = text[: self.max_chars]
            notes.append(f"[Content cut at {self.max_chars} characters]")
        if fetched.truncated:
            notes.append(f"[Page cut at {self.limits.max_bytes} bytes before extraction]")
        return "\n\n".join([text, *notes])

    def __repr__(self) -> str:
        return (
            f"WebScraperTool({self.policy!r}, timeout={self.limits.timeout:g}, "
            f"max_bytes={self.limits.max_bytes}, max_chars={self.max_chars})"
        )


def _page_text(fetched: Fetched) -> str:
    """The readable text of a fetched page (CPU work: call it off the event loop)."""
    if not _is_html(fetched):
        return _tidy(fetched.text())
    page = fetched.text(_meta_charset(fetched))
    return _main_content(page, fetched.url) or strip_tags(page)


def _is_html(fetched: Fetched) -> bool:
    """HTML by its content type, or, without one, by its first character."""
    if fetched.media_type:
        return fetched.media_type in _HTML_TYPES
    return fetched.content.lstrip()[:1] == b"<"


def _meta_charset(fetched: Fetched) -> str | None:
    """The charset an HTML page declares in a ``<meta>`` tag, when the response gave none."""
    if fetched.charset:
        return None
    found = _META_CHARSET.search(fetched.content[:4096])
    return found.group(1).decode("ascii") if found else None


def _main_content(page: str, url: str) -> str:
    """The page's main content by trafilatura ("" when it finds none or fails)."""
    trafilatura = require("trafilatura", "tools")
    try:
        extracted = trafilatura.extract(page, url=url, include_comments=False)
    except Exception:  # a page it cannot parse: the fallback takes over
        return ""
    return _tidy(extracted) if isinstance(extracted, str) else ""


class _TextCollector(HTMLParser):
    """Collects the text of an HTML page, skipping scripts, styles and the head."""

    SKIPPED = frozenset({"script", "style", "noscript", "template", "svg", "head", "title"})
    BLOCKS = re.compile(r"p|div|br|li|tr|h[1-6]|section|article|header|footer|nav|main|table|ul|ol")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIPPED:
            self._skipping += 1
        elif self.BLOCKS.fullmatch(tag):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif self.BLOCKS.fullmatch(tag):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def strip_tags(page: str) -> str:
    """The text of an HTML page with its markup, scripts and styles removed."""
    collector = _TextCollector()
    with contextlib.suppress(Exception):  # HTMLParser is lenient; keep what it collected
        collector.feed(page)
        collector.close()
    return _tidy("".join(collector.parts))


def _tidy(text: str) -> str:
    """`text` with runs of spaces collapsed and blank lines removed."""
    lines = (_SPACES.sub(" ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


# --- web_search -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One search hit."""

    title: str
    url: str
    snippet: str = ""


@runtime_checkable
class WebSearchProvider(Protocol):
    """A search backend for `WebSearchTool`."""

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        """At most `max_results` results for `query`; raises (e.g. `WebSearchError`) on
        failure, with a message fit for the model."""
        ...


class WebSearchError(Exception):
    """A search provider failed; the message is shown to the model."""


class WebSearchTool:
    """Give it to an agent (``tools=[WebSearchTool(TavilySearch(key))]``) so that it can
    search the web. The model gets up to `max_results` results as a numbered list of titles,
    URLs and snippets, or "No results found for: {query}". A provider's failure is reported
    to the model. Raises `ValidationError` for a provider without a ``search`` method or a
    `max_results` that is not a positive integer.
    """

    def __init__(self, provider: WebSearchProvider, *, max_results: int = 5) -> None:
        if not callable(getattr(provider, "search", None)):
            raise ValidationError(
                f"WebSearchTool provider must have an async search(query, max_results) "
                f"method, got: {provider!r}"
            )
        self.provider = provider
        self.max_results = require_positive_int(max_results, "WebSearchTool max_results")

    @tool(name="web_search")
    async def web_search(
        self, query: Annotated[str, Field(description="What to search the web for")]
    ) -> ToolResult:
        """Search the web and return the top results, each with its title, URL and snippet."""
        query = query.strip()
        if not query:
            return ToolResult.failure("Search query must not be blank")
        try:
            results = list(await self.provider.search(query, self.max_results))
            results = results[: self.max_results]
            text = format_results(results) if results else ""
        except ToolConfigurationError:
            raise
        except Exception as error:  # the provider's failure, or results of the wrong shape
            return ToolResult.failure(f"Web search failed: {describe_error(error)}")
        if not results:
            return ToolResult.success(f"No results found for: {query}")
        return ToolResult.success(text, structured=results)

    def __repr__(self) -> str:
        return f"WebSearchTool({self.provider!r}, max_results={self.max_results})"


def format_results(results: Sequence[SearchResult]) -> str:
    """Search results as a numbered list for the model."""
    entries = []
    for number, result in enumerate(results, start=1):
        lines = [f"{number}. {result.title or result.url}", f"   URL: {result.url}"]
        if result.snippet:
            lines.append(f"   {result.snippet}")
        entries.append("\n".join(lines))
    return "\n\n".join(entries)


# --- providers ------------------------------------------------------------------------------


class _ApiSearch:
    """What the built-in providers share: an API key, a base URL and a timeout."""

    name = "Search provider"

    def __init__(self, api_key: str, base_url: str, *, timeout: float = 10.0) -> None:
        require("httpx", "tools")
        kind = type(self).__name__
        self._api_key = require_text(api_key, f"{kind} api_key must not be blank")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValidationError(
                f"{kind} base_url must start with http:// or https://, got: {base_url!r}"
            )
        self.base_url = base_url.rstrip("/")
        self.timeout = require_seconds(timeout, f"{kind} timeout")

    async def _json(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str],
        params: Mapping[str, str | int] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> Any:
        """Call the API and return its JSON answer; `WebSearchError` on any failure."""
        import httpx

        try:
            async with asyncio.timeout(self.timeout):
                status, content = await self._send(method, path, headers, params, body)
        except (TimeoutError, httpx.TimeoutException):
            raise WebSearchError(f"{self.name} did not answer within {self.timeout:g}s") from None
        except (httpx.HTTPError, httpx.StreamError, OSError) as error:
            raise WebSearchError(f"{self.name} request failed: {describe_error(error)}") from None
        if status >= 400:
            raise WebSearchError(f"{self.name} returned HTTP {status}: {_excerpt(content)}")
        try:
            return json.loads(content)
        except ValueError:
            raise WebSearchError(f"{self.name} returned a response that is not JSON") from None

    async def _send(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        params: Mapping[str, str | int] | None,
        body: Mapping[str, Any] | None,
    ) -> tuple[int, bytes]:
        import httpx

        async with (
            httpx.AsyncClient(timeout=self.timeout) as client,
            client.stream(
                method,
                self.base_url + path,
                headers={**headers, "Accept-Encoding": "identity"},
                params=params,
                json=body,
            ) as response,
        ):
            check_identity_encoding(response.headers)
            content, truncated = await read_capped(response, _PROVIDER_MAX_BYTES)
        if truncated:
            raise WebSearchError(f"{self.name} sent more than {_PROVIDER_MAX_BYTES} bytes")
        return response.status_code, content

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"  # never the key


class TavilySearch(_ApiSearch):
    """Search with Tavily (https://tavily.com): ``POST /search``, key as a bearer token."""

    name = "Tavily"

    def __init__(
        self, api_key: str, base_url: str = "https://api.tavily.com", *, timeout: float = 10.0
    ) -> None:
        super().__init__(api_key, base_url, timeout=timeout)

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        """Up to `max_results` (at most 20) results for `query`."""
        data = await self._json(
            "POST",
            "/search",
            headers={"Authorization": f"Bearer {self._api_key}"},
            body={"query": query, "max_results": min(max_results, _MAX_SEARCH_RESULTS)},
        )
        return _results(_items(data, "results"), url="url", snippet="content")


class SerpApiSearch(_ApiSearch):
    """Search Google through SerpApi (https://serpapi.com): ``GET /search.json``, key as the
    ``api_key`` parameter."""

    name = "SerpApi"

    def __init__(
        self, api_key: str, base_url: str = "https://serpapi.com", *, timeout: float = 10.0
    ) -> None:
        super().__init__(api_key, base_url, timeout=timeout)

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        """Up to `max_results` organic Google results for `query`."""
        data = await self._json(
            "GET",
            "/search.json",
            headers={"Accept": "application/json"},
            params={"engine": "google", "q": query, "num": max_results, "api_key": self._api_key},
        )
        if isinstance(data, dict) and "organic_results" not in data and data.get("error"):
            error = str(data["error"])
            if "hasn't returned any results" in error:
                return []
            raise WebSearchError(f"SerpApi error: {error}")
        return _results(_items(data, "organic_results"), url="link", snippet="snippet")


class BraveSearch(_ApiSearch):
    """Search with the Brave Search API (https://brave.com/search/api/):
    ``GET /res/v1/web/search``, key in the ``X-Subscription-Token`` header."""

    name = "Brave Search"

    def __init__(
        self,
        api_key: str,
        base_url: str = "https://api.search.brave.com",
        *,
        timeout: float = 10.0,
    ) -> None:
        super().__init__(api_key, base_url, timeout=timeout)

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        """Up to `max_results` (at most 20) web results for `query`."""
        data = await self._json(
            "GET",
            "/res/v1/web/search",
            headers={"Accept": "application/json", "X-Subscription-Token": self._api_key},
            params={"q": query, "count": min(max_results, _MAX_SEARCH_RESULTS)},
        )
        web = data.get("web") if isinstance(data, dict) else None
        return _results(_items(web, "results"), url="url", snippet="description")


def _items(data: object, key: str) -> list[Mapping[str, Any]]:
    """The objects listed under `key` in a JSON answer ([] when absent)."""
    found = data.get(key) if isinstance(data, dict) else None
    if not isinstance(found, list):
        return []
    return [item for item in found if isinstance(item, Mapping)]


def _results(items: list[Mapping[str, Any]], *, url: str, snippet: str) -> list[SearchResult]:
    """Results from API items (title, and the `url` and `snippet` fields); no URL, no result."""
    results = []
    for item in items:
        link = _clean(item.get(url))
        if link:
            results.append(SearchResult(_clean(item.get("title")), link, _clean(item.get(snippet))))
    return results


def _clean(value: object) -> str:
    """A text field of an API answer: markup (``<strong>``) and entities removed."""
    if not isinstance(value, str):
        return ""
    return " ".join(html.unescape(_TAG.sub("", value)).split())


def _excerpt(content: bytes, limit: int = 200) -> str:
    text = " ".join(content.decode("utf-8", errors="replace").split())
    return text if len(text) <= limit else text[:limit] + "..."
