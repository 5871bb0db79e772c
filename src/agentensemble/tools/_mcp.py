"""`McpTools`: the tools of an MCP (Model Context Protocol) server as agent tools.

::

    async with McpTools.stdio("uvx", ["mcp-server-fetch"]) as fetch:
        agent = Agent("Researcher", "Read pages", llm=model, tools=fetch.tools)
        await Ensemble(tasks=[Task("Summarise https://example.com", agent=agent)]).arun()

Entering connects (the protocol handshake) and lists the server's tools; leaving closes the
session and the transport (a stdio server process is stopped), also when the body raises.
Entries are counted, so nested or concurrent ``async with`` blocks share one connection,
closed when the last one ends. The connection lives in a task of its own: it may be entered
and left from different tasks, and a broken transport fails tool calls, not the caller.

Each tool keeps the server's description and input schema. Its name is made acceptable to
model providers (``^[a-zA-Z0-9_-]{1,64}$``, after the optional ``prefix``); `McpTool` keeps
the server's own name for the call. A call's text content becomes the result text, its
structured content the `ToolResult.structured_output`; a result flagged ``isError``, a
transport error or a timeout is a failed result the model sees, never an exception.

Needs the ``mcp`` extra (``pip install "agentensemble[mcp]"``), imported on first use.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from agentensemble._checks import require_seconds, require_text
from agentensemble._extras import require
from agentensemble._logging import get_logger
from agentensemble.errors import ToolConfigurationError, ValidationError, describe_error
from agentensemble.models import ToolSpec
from agentensemble.tools._context import ToolContext
from agentensemble.tools._result import ToolResult

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import anyio
    from mcp import Client
    from mcp.client._transport import TransportStreams
    from mcp_types import CallToolResult, ContentBlock
    from mcp_types import Tool as ToolDefinition

__all__ = ["McpTool", "McpTools"]

logger = get_logger(__name__)

DEFAULT_TIMEOUT = 60.0
"""Seconds one tool call may take, unless `McpTools` is given another `timeout`."""
DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds connecting (starting the server, the handshake, listing tools) may take."""
_HTTP_TIMEOUT = 30.0
"""Seconds an HTTP connect or write may take."""
_HTTP_READ_TIMEOUT = 300.0
"""Seconds an HTTP read may wait (server-sent event streams stay open between events)."""
_NAME_LIMIT = 64
_NOT_A_NAME_CHARACTER = re.compile(r"[^a-zA-Z0-9_-]")
_RUNNING: set[asyncio.Task[None]] = set()
"""Connection tasks, referenced until they end (the event loop holds tasks weakly)."""

ServerTarget = Any
"""What `mcp.Client` connects to: a streamable HTTP URL, `mcp.StdioServerParameters`, an
in-process `MCPServer`, or a zero-argument function returning a transport (a transport
connects only once, so `McpTools` asks the function for a new one per connection)."""


class McpTools:
    """The tools of one MCP server, connected with ``async with``.

    Build it with `McpTools.stdio` (a local server process) or `McpTools.http` (streamable
    HTTP), or pass anything `mcp.Client` accepts (see `ServerTarget`). `tools` is available
    while connected; the tools' calls fail with `ToolConfigurationError` once it is closed.
    Use one `McpTools` within one event loop.
    """

    def __init__(
        self,
        server: ServerTarget,
        *,
        label: str | None = None,
        prefix: str | None = None,
        timeout: timedelta | float | None = DEFAULT_TIMEOUT,
        connect_timeout: timedelta | float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """`label` names the server in messages; `prefix` is put before every tool name
        (``prefix_name``) to tell apart the tools of several servers; `timeout` bounds each
        tool call (None: no limit), `connect_timeout` the connection."""
        require("mcp", "mcp")
        if server is None:
            raise ValidationError("McpTools server must not be null")
        self._server = server
        self.label = label or _label(server)
        """Names the server in error messages."""
        self.prefix = (
            "" if prefix is None else require_text(prefix, "McpTools prefix must not be blank")
        )
        """Put before every tool name, with an underscore, when not empty."""
        self.timeout = None if timeout is None else require_seconds(timeout, "McpTools timeout")
        """Seconds one tool call may take (None: no limit)."""
        self.connect_timeout = require_seconds(connect_timeout, "McpTools connect_timeout")
        """Seconds connecting may take."""
        self._lock = asyncio.Lock()
        self._entries = 0
        self._client: Client | None = None
        self._tools: list[McpTool] | None = None
        self._closing = asyncio.Event()
        self._connection: asyncio.Task[None] | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        prefix: str | None = None,
        timeout: timedelta | float | None = DEFAULT_TIMEOUT,
        connect_timeout: timedelta | float = DEFAULT_CONNECT_TIMEOUT,
    ) -> McpTools:
        """A server run as a subprocess speaking MCP on its stdin and stdout. `env` is added
        to the few variables the SDK passes on (``PATH``, ``HOME``...); the process is
        stopped when the connection closes."""
        require_text(command, "McpTools command must not be blank")
        from mcp import StdioServerParameters

        parameters = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
        )
        return cls(
            parameters,
            label=" ".join([command, *args]),
            prefix=prefix,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        prefix: str | None = None,
        timeout: timedelta | float | None = DEFAULT_TIMEOUT,
        connect_timeout: timedelta | float = DEFAULT_CONNECT_TIMEOUT,
    ) -> McpTools:
        """A server at `url` speaking streamable HTTP, with `headers` (authorization, say)
        sent on every request."""
        require_text(url, "McpTools url must not be blank")
        server: ServerTarget = url
        if headers:
            sent = dict(headers)
            server = lambda: _http_transport(url, sent)  # noqa: E731 (a new one per connection)
        return cls(
            server, label=url, prefix=prefix, timeout=timeout, connect_timeout=connect_timeout
        )

    def __repr__(self) -> str:
        return f"McpTools({self.label!r})"

    @property
    def connected(self) -> bool:
        """Whether the server is connected and its tools listed."""
        return self._tools is not None

    @property
    def tools(self) -> list[McpTool]:
        """The server's tools, as listed when it connected."""
        if self._tools is None:
            raise ToolConfigurationError(_not_connected(self.label))
        return list(self._tools)

    @property
    def names(self) -> dict[str, str]:
        """Each tool's name as the model sees it, mapped to the server's name for it."""
        return {tool.spec.name: tool.server_name for tool in self.tools}

    async def __aenter__(self) -> Self:
        """Connect, unless already connected (entries are counted)."""
        async with self._lock:
            if self._entries == 0:
                await self._connect()
            self._entries += 1
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the connection when this is the last entry; the server process, if any,
        is stopped before this returns."""
        async with self._lock:
            self._entries -= 1
            if self._entries == 0:
                await self._disconnect()

    @property
    def client(self) -> Client | None:
        """The SDK's `mcp.Client` while connected (for resources, prompts...), None once the
        connection is lost; `ToolConfigurationError` outside ``async with``."""
        if self._tools is None:
            raise ToolConfigurationError(_not_connected(self.label))
        return self._client

    async def _connect(self) -> None:
        import anyio

        listed: asyncio.Future[list[ToolDefinition]] = asyncio.get_running_loop().create_future()
        scope = anyio.CancelScope()
        self._closing = asyncio.Event()
        self._connection = _start(
            self._hold(listed, scope, self._closing), f"MCP server {self.label}"
        )
        try:
            async with asyncio.timeout(self.connect_timeout):
                definitions = await asyncio.shield(listed)
        except BaseException as error:
            scope.cancel()  # an anyio cancel: the SDK's shielded shutdown still runs
            await self._disconnect()
            if isinstance(error, Exception):
                raise _connect_error(self.label, error, self.connect_timeout) from error
            raise
        self._tools = _tools_of(self, definitions)

    async def _hold(
        self,
        listed: asyncio.Future[list[ToolDefinition]],
        scope: anyio.CancelScope,
        closing: asyncio.Event,
    ) -> None:
        """The connection's task: connect, list the tools, wait for `closing`."""
        with scope:
            try:
                async with self._new_client() as client:
                    self._client = client
                    try:
                        listed.set_result(await _list_tools(client))
                        await closing.wait()
                    finally:
                        if self._client is client:
                            self._client = None
            except Exception as error:
                if listed.done():
                    cause = describe_error(_innermost(error))
                    logger.warning("MCP server %s: the connection failed: %s", self.label, cause)
                else:
                    listed.set_exception(error)
            finally:
                listed.cancel()  # no-op once it has a result or an error

    def _new_client(self) -> Client:
        from mcp import Client

        server = self._server() if callable(self._server) else self._server
        return Client(server)

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        self._tools = None
        self._closing.set()
        if connection is not None:
            await asyncio.shield(connection)  # a cancelled caller leaves it to finish closing


class McpTool:
    """One tool of an MCP server, as the agent loop sees it."""

    def __init__(self, owner: McpTools, definition: ToolDefinition, name: str) -> None:
        self.owner = owner
        """The server's `McpTools`, which holds the connection."""
        self.server_name = definition.name
        """The tool's name on the server (`spec.name` is the one shown to the model)."""
        description = definition.description or definition.title or f"MCP tool {definition.name}"
        self._spec = ToolSpec(name, description, definition.input_schema)

    def __repr__(self) -> str:
        return f"McpTool({self._spec.name!r}, server={self.owner.label!r})"

    @property
    def spec(self) -> ToolSpec:
        """Name (made acceptable to providers), description and the server's input schema."""
        return self._spec

    async def invoke(self, arguments: str, context: ToolContext | None = None) -> ToolResult:
        """Send ``tools/call`` with the parsed JSON `arguments`. Errors the model can act on
        (bad JSON, the tool's own error, transport failures, timeouts) come back as a failed
        result; a closed connection raises `ToolConfigurationError`."""
        parsed = _parse_arguments(arguments)
        if isinstance(parsed, str):
            return ToolResult.failure(parsed)
        client = self.owner.client
        if client is None:
            return ToolResult.failure(f"MCP server {self.owner.label}: the connection was lost")
        timeout = self.owner.timeout
        try:
            async with asyncio.timeout(timeout) as deadline:
                result = await client.call_tool(self.server_name, parsed)
        except TimeoutError as error:
            if not deadline.expired():
                return ToolResult.failure(self._failed(error))
            return ToolResult.failure(f"MCP tool '{self.server_name}' timed out after {timeout:g}s")
        except Exception as error:  # transport, protocol and validation errors alike
            return ToolResult.failure(self._failed(error))
        return to_tool_result(result)

    def _failed(self, error: BaseException) -> str:
        cause = describe_error(_innermost(error))
        return f"MCP tool '{self.server_name}' failed on server {self.owner.label}: {cause}"


def to_tool_result(result: CallToolResult) -> ToolResult:
    """A ``tools/call`` result as a `ToolResult`: the text of its content (other content
    described in brackets; the structured content as JSON when there is no text)."""
    text = "\n".join(describe_content(block) for block in result.content)
    if result.is_error:
        return ToolResult.failure(text or "The MCP tool reported an error without a message")
    structured = result.structured_content
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    return ToolResult.success(text, structured=structured)


def describe_content(block: ContentBlock) -> str:
    """Text content as it is; images, audio and resources as a short bracketed note."""
    from mcp_types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent
    from mcp_types import TextResourceContents as ResourceText

    match block:
        case TextContent(text=text) | EmbeddedResource(resource=ResourceText(text=text)):
            return text
        case ImageContent() | AudioContent():
            return f"[{block.type}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
        case ResourceLink():
            return f"[resource link: {block.name} <{block.uri}>]"
        case EmbeddedResource():
            return f"[resource: {block.resource.uri}, {block.resource.mime_type or 'binary'}]"
    return f"[{block.type} content]"


def tool_names(server_names: Sequence[str], prefix: str = "") -> list[str]:
    """Names model providers accept, one per server tool name and unique: characters other
    than letters, digits, ``_`` and ``-`` become ``_``; too long names are cut at 64
    characters; a repeated name gets ``_2``, ``_3``... ."""
    start = f"{prefix}_" if prefix else ""
    taken: set[str] = set()
    names = []
    for server_name in server_names:
        safe = _NOT_A_NAME_CHARACTER.sub("_", start + server_name)[:_NAME_LIMIT] or "tool"
        name = _unique(safe, taken)
        taken.add(name)
        names.append(name)
    return names


def _unique(name: str, taken: set[str]) -> str:
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        suffix = f"_{number}"
        candidate = name[: _NAME_LIMIT - len(suffix)] + suffix
    return candidate


def _tools_of(owner: McpTools, definitions: Sequence[ToolDefinition]) -> list[McpTool]:
    names = tool_names([definition.name for definition in definitions], owner.prefix)
    return [McpTool(owner, d, name) for d, name in zip(definitions, names, strict=True)]


async def _list_tools(client: Client) -> list[ToolDefinition]:
    """Every tool the server lists, following the pages."""
    page = await client.list_tools()
    definitions = list(page.tools)
    while page.next_cursor is not None:
        page = await client.list_tools(cursor=page.next_cursor)
        definitions += page.tools
    return definitions


def _parse_arguments(arguments: str) -> dict[str, Any] | str:
    """The model's JSON arguments as an object, or why they are not one."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as error:
        return f"Invalid JSON arguments: {error}"
    if not isinstance(parsed, dict):
        return "Tool arguments must be a JSON object"
    return parsed


def _start(work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
    """Run `work` in a task of its own, referenced until it ends."""
    task = asyncio.create_task(work, name=name)
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    return task


@asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[TransportStreams]:
    """Streamable HTTP with `headers` on every request (the SDK takes them on its client)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(_HTTP_TIMEOUT, read=_HTTP_READ_TIMEOUT)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _label(server: object) -> str:
    from mcp import StdioServerParameters

    if isinstance(server, StdioServerParameters):
        return " ".join([server.command, *server.args])
    if isinstance(server, str):
        return server
    return type(server).__name__


def _innermost(error: BaseException) -> BaseException:
    """The one error inside task-group wrappers (anyio groups transport errors)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _connect_error(label: str, error: Exception, seconds: float) -> ToolConfigurationError:
    """Why connecting failed, as the caller should see it."""
    if isinstance(error, TimeoutError):
        return ToolConfigurationError(
            f"MCP server {label} did not connect within {seconds:g}s (connect_timeout)"
        )
    return ToolConfigurationError(
        f"Could not connect to MCP server {label}: {describe_error(_innermost(error))}"
    )


def _not_connected(label: str) -> str:
    return (
        f"MCP server {label} is not connected: use its tools inside "
        "``async with McpTools...``, and build the agents that use them inside it"
    )
