"""`HttpTool` (``http_request``): an agent sends HTTP requests to public addresses
(BEHAVIOUR 7.6, 7.7). The address guard, redirects, size cap and timeout are `_network`'s."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from agentensemble._checks import require_seconds
from agentensemble._extras import require
from agentensemble.errors import ValidationError
from agentensemble.review._model import Edit, ExitEarly
from agentensemble.tools._context import ToolContext
from agentensemble.tools._function import tool
from agentensemble.tools._network import (
    AddressPolicy,
    Fetched,
    FetchError,
    Limits,
    fetch,
    parse_url,
    require_positive_int,
    shown,
)
from agentensemble.tools._result import ToolResult

__all__ = ["DEFAULT_HTTP_MAX_BYTES", "METHODS", "HttpTool"]

DEFAULT_HTTP_MAX_BYTES = 1_000_000
"""The most response body `HttpTool` reads unless told otherwise (about a megabyte)."""

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
"""The HTTP methods the model may use."""

SHOWN_HEADERS = (
    "content-type",
    "content-length",
    "location",
    "retry-after",
    "www-authenticate",
    "etag",
    "last-modified",
)
"""The response headers shown to the model (when present)."""

_MANAGED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-www-form-urlencoded",
        "application/graphql",
        "application/yaml",
        "application/x-yaml",
        "application/x-ndjson",
    }
)


def _json_object(value: object) -> object:
    """Headers given as a JSON object string become the object (models sometimes send one)."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return value  # validation then reports that an object was expected
    return value


_Method = Annotated[str, Field(description="The HTTP method: " + ", ".join(METHODS))]
_Url = Annotated[str, Field(description="The absolute http or https URL to request")]
_Headers = Annotated[
    dict[str, str] | None,
    BeforeValidator(_json_object),
    Field(description="Request headers, as an object of header name to value"),
]
_Body = Annotated[str | None, Field(description="The request body text (for POST, PUT, PATCH)")]


def is_text_type(media: str) -> bool:
    """Whether a body of media type `media` is text to show (no type: assumed text)."""
    return (
        not media
        or media.startswith("text/")
        or media in _TEXT_TYPES
        or media.endswith(("+json", "+xml"))
    )


class HttpTool:
    """Give it to an agent (``tools=[HttpTool()]``) so that it can call HTTP APIs.

    The model gets the status line, the main response headers and the body text, cut at
    `max_bytes` (and told so); error statuses are failures that still show the response.
    Requests go only to public addresses unless `allow` lists hosts, addresses or networks
    (``allow=["127.0.0.1", "10.0.0.0/8", "api.internal"]``); every redirect is checked the
    same way. `timeout` (seconds) covers the whole request. `default_headers` are sent with
    every request (the model's headers override them) and are not shown to the reviewer.
    A body without a Content-Type header is sent as JSON when it parses as JSON, else as
    plain text.

    With `require_approval`, each request is first shown to the ensemble's review handler:
    it may allow it, edit the body, or refuse it (the model is told "HTTP request rejected
    by reviewer: {method} {url}"); a run without a review handler then fails with
    `ToolConfigurationError`. Raises `ValidationError` for a malformed setting.
    """

    def __init__(
        self,
        *,
        allow: Sequence[str] = (),
        timeout: float = 10.0,
        max_bytes: int = DEFAULT_HTTP_MAX_BYTES,
        require_approval: bool = False,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        require("httpx", "tools")
        self.policy = AddressPolicy(allow, owner="HttpTool")
        self.limits = Limits(
            timeout=require_seconds(timeout, "HttpTool timeout"),
            max_bytes=require_positive_int(max_bytes, "HttpTool max_bytes"),
        )
        self.require_approval = require_approval
        self.default_headers = _check_default_headers(default_headers)

    @tool(name="http_request")
    async def http_request(
        self,
        context: ToolContext,
        method: _Method,
        url: _Url,
        headers: _Headers = None,
        body: _Body = None,
    ) -> ToolResult:
        """Send an HTTP request to a URL and return the response status, main headers and
        body text."""
        try:
            verb = _check_method(method)
            url = url.strip()
            requested = str(parse_url(url))
            sent = {**self.default_headers, **_check_headers(headers or {})}
            if self.require_approval:
                decision = await context.request_approval(
                    _describe(verb, url, body), require_handler=True
                )
                if isinstance(decision, ExitEarly):
                    return ToolResult.failure(f"HTTP request rejected by reviewer: {verb} {url}")
                if isinstance(decision, Edit):
                    body = decision.revised_output
            fetched = await fetch(
                verb,
                url,
                policy=self.policy,
                limits=self.limits,
                headers=_with_content_type(sent, body),
                body=None if body is None else _encoded(body),
                read_body=is_text_type,
            )
        except FetchError as error:
            return ToolResult.failure(str(error))
        return _result(verb, requested, fetched, self.limits.max_bytes)

    def __repr__(self) -> str:
        return (
            f"HttpTool({self.policy!r}, timeout={self.limits.timeout:g}, "
            f"max_bytes={self.limits.max_bytes}, require_approval={self.require_approval})"
        )


def _check_default_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise ValidationError(
            f"HttpTool default_headers must be a mapping of names to values, got: {headers!r}"
        )
    try:
        return _check_headers(headers)
    except FetchError as error:
        raise ValidationError(f"HttpTool default_headers: {error}") from None


def _check_method(method: str) -> str:
    verb = method.strip().upper()
    if not verb:
        raise FetchError("HTTP method must not be blank")
    if verb not in METHODS:
        raise FetchError(
            f"Unsupported HTTP method {method.strip()!r}: use one of {', '.join(METHODS)}"
        )
    return verb


def _check_headers(headers: Mapping[Any, Any]) -> dict[str, str]:
    """`headers` when every name is a token and every value is one line of text."""
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise FetchError(f"Invalid header name: {name!r}")
        if name.lower() in _MANAGED_HEADERS:
            raise FetchError(f"Header {name!r} is set by the tool and cannot be given")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise FetchError(f"Invalid value for header {name!r}: it must be one line of text")
        if not value.isascii():
            raise FetchError(f"Invalid value for header {name!r}: it must be ASCII text")
        checked[name] = value
    return checked


def _encoded(body: str) -> bytes:
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape, say
        raise FetchError("The request body is not valid Unicode text") from None


def _with_content_type(headers: dict[str, str], body: str | None) -> dict[str, str]:
    """`headers`, plus a Content-Type for a body that has none."""
    if body is None or any(name.lower() == "content-type" for name in headers):
        return headers
    try:
        json.loads(body)
    except ValueError:
        return {**headers, "Content-Type": "text/plain; charset=utf-8"}
    return {**headers, "Content-Type": "application/json"}


def _describe(method: str, url: str, body: str | None) -> str:
    """What the reviewer is asked to approve."""
    text = f"HTTP request: {method} {url}"
    return text if body is None else f"{text}\nBody:\n{body}"


def _result(method: str, url: str, fetched: Fetched, max_bytes: int) -> ToolResult:
    """The response as the model sees it; an error status is a failure showing it."""
    text = _format(fetched, url, max_bytes)
    structured = {
        "status": fetched.status,
        "url": fetched.url,
        "headers": dict(fetched.headers),
        "truncated": fetched.truncated,
    }
    if fetched.status >= 400:
        message = f"HTTP {fetched.status} {fetched.reason}: {method} {shown(url)}".rstrip()
        return ToolResult(
            output=text, is_success=False, error_message=message, structured_output=structured
        )
    return ToolResult.success(text, structured=structured)


def _format(fetched: Fetched, url: str, max_bytes: int) -> str:
    lines = [f"HTTP {fetched.status} {fetched.reason}".rstrip()]
    if fetched.url != url:
        lines.append(f"Final URL: {fetched.url}")
    lines += [
        f"{name}: {fetched.headers[name]}" for name in SHOWN_HEADERS if name in fetched.headers
    ]
    lines.append("")
    if not fetched.body_read:
        lines.append(f"[Body not shown: content type {fetched.media_type} is not text]")
    elif not fetched.content:
        lines.append("[Empty body]")
    else:
        lines.append(fetched.text())
        if fetched.truncated:
            lines.append(f"[Body cut at {max_bytes} bytes]")
    return "\n".join(lines)
