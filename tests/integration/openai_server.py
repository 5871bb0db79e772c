"""A local HTTP server speaking the OpenAI chat-completions wire format, for tests.

Replies are scripted: each is a final text, a list of tool calls ``(id, name, arguments)``,
or an HTTP error status. Every request body is recorded. ``stream: true`` requests get
server-sent events chunked the way OpenAI chunks them, usage in the last chunk.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Error:
    status: int
    retry_after_ms: int = 1


@dataclass
class ToolCalls:
    calls: list[tuple[str, str, str]]


@dataclass
class Hang:
    """Hold the request open until `release` is set (or 10 s pass), then answer `text`."""

    release: threading.Event = field(default_factory=threading.Event)
    text: str = "too late"


@dataclass
class NoChoices:
    """A 200 reply whose ``choices`` list is empty (some servers send one on overload)."""


@dataclass
class Raw:
    """A 200 reply with this body, as is (a server that sends something else than a chat
    completion)."""

    body: bytes
    content_type: str = "application/json"


@dataclass
class CutStream:
    """A streamed reply that stops after `chunks` chunks of `text`: the connection reset
    (`reset`), or closed as if the stream had ended, with no finish, usage or ``[DONE]``."""

    text: str
    chunks: int = 2
    reset: bool = False


Scripted = str | ToolCalls | Error | Hang | NoChoices | CutStream | Raw


@dataclass
class OpenAIStub:
    replies: list[Scripted]
    usage: tuple[int, int] = (11, 7)
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    """Each request's ``Authorization`` header (None when it had none)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_reply(
        self, body: dict[str, Any], path: str, authorization: str | None = None
    ) -> Scripted:
        with self.lock:
            self.requests.append(body)
            self.paths.append(path)
            self.authorizations.append(authorization)
            return self.replies.pop(0)


def _message(reply: str | ToolCalls) -> dict[str, Any]:
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in reply.calls
        ],
    }


def _completion(reply: str | ToolCalls, usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": "stub-model",
        "choices": [
            {
                "index": 0,
                "message": _message(reply),
                "finish_reason": "stop" if isinstance(reply, str) else "tool_calls",
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        },
    }


def _chunks(reply: str | ToolCalls, usage: tuple[int, int]) -> Iterator[dict[str, Any]]:
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    if isinstance(reply, str):
        for index in range(0, len(reply), 4):
            delta: dict[str, Any] = {"content": reply[index : index + 4]}
            yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    else:
        for position, (call_id, name, arguments) in enumerate(reply.calls):
            half = len(arguments) // 2
            first = {
                "index": position,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments[:half]},
            }
            second = {"index": position, "function": {"arguments": arguments[half:]}}
            for part in (first, second):
                delta = {"tool_calls": [part]}
                yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    totals = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    yield {**base, "choices": [], "usage": totals}


def _cut_stream(handler: BaseHTTPRequestHandler, reply: CutStream, usage: tuple[int, int]) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for chunk in list(_chunks(reply.text, usage))[: reply.chunks]:
        handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
    handler.wfile.flush()
    if reply.reset:  # RST instead of FIN: the client sees "connection reset"
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.close_connection = True


def _handler(stub: OpenAIStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        disable_nagle_algorithm = True  # headers and body go out as separate writes

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            reply = stub.next_reply(body, self.path, self.headers.get("Authorization"))
            if isinstance(reply, Hang):
                reply.release.wait(timeout=10)
                reply = reply.text
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client gave up
                self._answer(body, reply)

        def _answer(
            self,
            body: dict[str, Any],
            reply: str | ToolCalls | Error | NoChoices | CutStream | Raw,
        ) -> None:
            if isinstance(reply, Raw):
                self._send_bytes(200, reply.body, {"Content-Type": reply.content_type})
            elif isinstance(reply, CutStream):
                _cut_stream(self, reply, stub.usage)
            elif isinstance(reply, NoChoices):
                self._send(200, {**_completion("", stub.usage), "choices": []})
            elif isinstance(reply, Error):
                self._send(
                    reply.status,
                    {"error": {"message": "scripted failure"}},
                    {"retry-after-ms": str(reply.retry_after_ms)},
                )
            elif body.get("stream"):
                self._stream(reply)
            else:
                self._send(200, _completion(reply, stub.usage))

        def _send(
            self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            self._send_bytes(status, json.dumps(payload).encode(), headers)

        def _send_bytes(
            self, status: int, data: bytes, headers: dict[str, str] | None = None
        ) -> None:
            headers = {"Content-Type": "application/json", **(headers or {})}
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, reply: str | ToolCalls) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in _chunks(reply, stub.usage):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


class OpenAIServer:
    """Context manager running the stub on 127.0.0.1 with an ephemeral port."""

    def __init__(self, stub: OpenAIStub) -> None:
        self.stub = stub
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET server: a host name, never bytes
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
