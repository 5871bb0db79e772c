"""A small MCP server for the `McpTools` tests, built with the official SDK's `MCPServer`.

Run as a script it serves over stdio; ``--http`` serves streamable HTTP on a free port of
127.0.0.1 (path ``/mcp``) instead, and prints the port once it listens.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("agentensemble-test", log_level="ERROR")

PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)
"""A 1x1 PNG."""


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(structured_output=False)
def shout(text: str) -> str:
    """Repeat the text in capitals."""
    return text.upper() + "!"


@server.tool()
def explode(reason: str) -> str:
    """Always fails with `reason` (the client gets a result with ``isError``)."""
    raise ToolError(f"exploded: {reason}")


@server.tool(name="text.reverse", structured_output=False)
def reverse(text: str) -> str:
    """Reverse the text (its name has a dot, which model providers refuse)."""
    return text[::-1]


@server.tool()
def pixel() -> Image:
    """A one-pixel PNG image."""
    return Image(data=PIXEL, format="png")


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
async def hang() -> str:
    """Never answers (until the call is cancelled)."""
    await anyio.Event().wait()
    return "unreachable"


def main(argv: list[str]) -> None:
    """Serve over stdio, or over streamable HTTP with ``--http``: the server listens on a
    free port of 127.0.0.1, then prints it (connections made from then on wait in the
    socket's backlog until the server accepts them)."""
    if argv[:1] == ["--http"]:
        import socket

        import uvicorn

        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        listening.listen(64)
        print(listening.getsockname()[1], flush=True)
        config = uvicorn.Config(server.streamable_http_app(), log_level="error")
        uvicorn.Server(config).run(sockets=[listening])
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
