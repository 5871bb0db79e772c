"""The dashboard's HTTP and WebSocket endpoints (starlette), on the server's loop."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentensemble._logging import get_logger
from agentensemble.web._dashboard import is_loopback
from agentensemble.web._hub import Client

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.websockets import WebSocket

    from agentensemble.web._dashboard import WebDashboard
    from agentensemble.web._hub import Hub

__all__ = ["build_app"]

logger = get_logger("agentensemble.web")

_ASSETS = {"app.js": "text/javascript", "app.css": "text/css"}
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_INVALID_DECISION = (
    'a decision is "approve", "exit_early", or "edit" with a non-blank "revisedOutput"'
)
_CLOSE_GRACE = 1.0
"""Seconds a closing WebSocket gets to finish its close handshake."""


def build_app(dashboard: WebDashboard, hub: Hub, stopping: asyncio.Event) -> Any:
    """The dashboard's application: the page, its WebSocket, and the JSON API."""
    from starlette.applications import Starlette
    from starlette.routing import Route, WebSocketRoute

    endpoints = _Endpoints(dashboard, hub, stopping)
    app = Starlette(
        routes=[
            Route("/", endpoints.page),
            Route("/static/{name}", endpoints.asset),
            WebSocketRoute("/ws", endpoints.socket),
            Route("/api/status", endpoints.status),
            Route("/api/health/live", endpoints.live),
            Route("/api/health/ready", endpoints.ready),
            Route("/api/runs", endpoints.runs),
            Route("/api/runs/{ensemble_id}", endpoints.trace),
            Route("/api/runs/{ensemble_id}/cancel", endpoints.cancel, methods=["POST"]),
            Route("/api/reviews", endpoints.reviews),
            Route("/api/reviews/{review_id}", endpoints.decide, methods=["POST"]),
        ],
    )
    return _LoopbackHosts(app) if is_loopback(dashboard.host) else app


class _LoopbackHosts:
    """On a loopback binding, refuse requests naming another host (421): a page on a
    domain that rebinds to 127.0.0.1 must not read the runs."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in {"http", "websocket"} and not _loopback_host(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": "Host not allowed"})
                return
            await send(
                {
                    "type": "http.response.start",
                    "status": 421,
                    "headers": [(b"content-type", b"text/plain")],
                }
            )
            await send({"type": "http.response.body", "body": b"Host not allowed"})
            return
        await self.app(scope, receive, send)


def _loopback_host(scope: Any) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"host":
            host = urlsplit(f"//{value.decode('latin-1')}").hostname
            return host is not None and is_loopback(host)
    return False


class _Endpoints:
    def __init__(self, dashboard: WebDashboard, hub: Hub, stopping: asyncio.Event) -> None:
        self.dashboard = dashboard
        self.hub = hub
        self.stopping = stopping
        self.loopback = is_loopback(dashboard.host)
        self._files: dict[str, bytes] = {}

    def _file(self, name: str) -> bytes:
        """A file of the page, read from the package once."""
        content = self._files.get(name)
        if content is None:
            content = (resources.files("agentensemble.web") / "static" / name).read_bytes()
            self._files[name] = content
        return content

    # ---- checks ---------------------------------------------------------------------------

    def _authorized(self, headers: Any, query: Any) -> bool:
        token = self.dashboard.token
        if token is None:
            return True
        given = query.get("token") or ""
        header = headers.get("authorization") or ""
        if header.lower().startswith("bearer "):
            given = header[7:].strip()
        return hmac.compare_digest(given.encode(), token.encode())

    def _origin_allowed(self, origin: str | None, *, required: bool) -> bool:
        """On a loopback binding, only pages from this machine may connect (a missing
        origin passes only where `required` is False: scripts calling the API)."""
        if not self.loopback:
            return True
        if origin is None:
            return not required
        host = urlsplit(origin).hostname
        return host is not None and is_loopback(host)

    async def _guard(self, request: Request) -> Response | None:
        from starlette.responses import JSONResponse

        if not self._authorized(request.headers, request.query_params):
            return JSONResponse({"error": "missing or wrong token"}, status_code=401)
        self.hub.catch_up()
        if request.method == "POST" and not self._origin_allowed(
            request.headers.get("origin"), required=False
        ):
            return JSONResponse({"error": "origin not allowed"}, status_code=403)
        return None

    # ---- the page ---------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        from starlette.responses import Response

        return Response(self._file("index.html"), media_type="text/html", headers=_SECURITY_HEADERS)

    async def asset(self, request: Request) -> Response:
        from starlette.responses import Response

        name = request.path_params["name"]
        if name not in _ASSETS:
            return Response("not found", status_code=404)
        return Response(self._file(name), media_type=_ASSETS[name], headers=_SECURITY_HEADERS)

    # ---- the API ----------------------------------------------------------------------------

    async def live(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        return JSONResponse({"status": "UP"})

    async def ready(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        state = self._state()
        return JSONResponse({"status": state}, status_code=200 if state == "READY" else 503)

    def _state(self) -> str:
        """STOPPING while the server stops; else the state of what the dashboard serves
        (a serving ensemble's READY, DRAINING...), or READY."""
        if self.stopping.is_set():
            return "STOPPING"
        readiness = self.dashboard.readiness
        return "READY" if readiness is None else str(readiness())

    async def status(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        from agentensemble._version import __version__

        if (refused := await self._guard(request)) is not None:
            return refused
        return JSONResponse(
            {
                "status": "STOPPING" if self.stopping.is_set() else "READY",
                "lifecycleState": self._state(),
                "mode": self.hub.mode,
                "version": __version__,
                "clients": len(self.hub.clients),
                "connections": self.hub.sockets,
                "runs": len(self.hub.runs),
                "pendingReviews": len(self.hub.reviews),
                "messagesSent": self.hub.messages_sent,
                "clientsDropped": self.hub.clients_dropped,
            }
        )

    async def runs(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if (refused := await self._guard(request)) is not None:
            return refused
        return JSONResponse([run.summary() for run in reversed(self.hub.runs.values())])

    async def trace(self, request: Request) -> Response:
        from starlette.responses import JSONResponse, Response

        if (refused := await self._guard(request)) is not None:
            return refused
        ensemble_id = request.path_params["ensemble_id"]
        saved = self.dashboard._trace_json.get(ensemble_id)
        if saved is not None:
            return Response(saved, media_type="application/json")
        run = self.hub.runs.get(ensemble_id)
        if run is None:
            return JSONResponse({"error": f"no retained run {ensemble_id!r}"}, status_code=404)
        try:
            text = run.trace_json()
        except ValueError as error:  # the dashboard started after the run did
            return JSONResponse({"error": f"no trace of run {ensemble_id!r}: {error}"}, 409)
        return Response(text, media_type="application/json")

    async def cancel(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if (refused := await self._guard(request)) is not None:
            return refused
        ensemble_id = request.path_params["ensemble_id"]
        outcome = self.hub.cancel(ensemble_id)
        status = {"cancelling": 202, "unknown": 404}.get(outcome, 409)
        return JSONResponse({"ensembleId": ensemble_id, "result": outcome}, status_code=status)

    async def reviews(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if (refused := await self._guard(request)) is not None:
            return refused
        return JSONResponse(self.hub.pending_reviews())

    async def decide(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if (refused := await self._guard(request)) is not None:
            return refused
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": "the body must be JSON"}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"error": "the body must be a JSON object"}, status_code=400)
        outcome = self.hub.decide(
            request.path_params["review_id"], body.get("decision"), body.get("revisedOutput")
        )
        status = {"applied": 200, "ignored": 404, "elsewhere": 409}.get(outcome, 400)
        body = {"result": outcome}
        if outcome == "invalid":
            body["error"] = _INVALID_DECISION
        return JSONResponse(body, status_code=status)

    # ---- the WebSocket ------------------------------------------------------------------------

    async def socket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        if not self._origin_allowed(websocket.headers.get("origin"), required=True):
            await websocket.close(1008, "Origin not allowed")
            return
        if not self._authorized(websocket.headers, websocket.query_params):
            await websocket.close(1008, "missing or wrong token")
            return
        self.hub.socket_opened()
        try:
            await self._serve_socket(websocket)
        finally:
            self.hub.socket_closed()

    async def _serve_socket(self, websocket: WebSocket) -> None:
        client = Client(websocket.send_text, max_pending=self.hub.max_client_pending)
        self.hub.connect(client)
        resuming = websocket.query_params.get("resume") == "1"
        if not resuming:
            self.hub.join(client)
        writer = asyncio.create_task(client.write())
        reader = asyncio.create_task(self._read(websocket, client, joined=not resuming))
        closed = asyncio.create_task(client.closed.wait())
        tasks = {writer, reader, closed}
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.hub.leave(client)
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
        if client.closing is not None:
            await _close(websocket, *client.closing)

    async def _read(self, websocket: WebSocket, client: Client, *, joined: bool) -> None:
        from starlette.websockets import WebSocketDisconnect

        with contextlib.suppress(WebSocketDisconnect):
            while True:
                message = _parsed(await websocket.receive_text())
                kind = message.get("type")
                if kind == "ping":
                    client.offer('{"type":"pong"}')
                elif kind == "resume" and not joined:
                    joined = True
                    self.hub.resume(client, message.get("cursors") or {})
                elif kind == "review_decision":
                    outcome = self.hub.decide(
                        message.get("reviewId"),
                        message.get("decision"),
                        message.get("revisedOutput"),
                    )
                    if outcome == "invalid":
                        client.offer(_error(_INVALID_DECISION))
                    elif outcome == "elsewhere":
                        client.offer(_error("this run's reviews are decided by another handler"))


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    """Close with `code`; a client that reads nothing (so the close frame cannot be sent)
    is dropped after `_CLOSE_GRACE`, one that left meanwhile needs nothing more."""
    from starlette.websockets import WebSocketDisconnect

    try:
        async with asyncio.timeout(_CLOSE_GRACE):
            await websocket.close(code, reason)
    except TimeoutError:
        _abort(websocket)
    except (WebSocketDisconnect, RuntimeError, OSError) as gone:
        logger.debug("WebSocket gone before its close: %s", gone)


def _abort(websocket: WebSocket) -> None:
    """Drop the connection of a client that reads nothing (its close frame cannot be sent):
    uvicorn's protocol object, the ASGI `send` of the socket, holds the transport."""
    protocol = getattr(getattr(websocket, "_send", None), "__self__", None)
    transport = getattr(protocol, "transport", None)
    if transport is not None and hasattr(transport, "abort"):
        transport.abort()


def _parsed(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _error(text: str) -> str:
    return json.dumps({"type": "error", "message": text})
