"""`WebDashboard`: the live page of an ensemble's runs, served from its own thread."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import ipaddress
import socket
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agentensemble._logging import get_logger
from agentensemble.errors import ValidationError
from agentensemble.observability._events import EVENT_TYPES, EnsembleStartedEvent, TokenEvent
from agentensemble.observability._wire import event_adapter
from agentensemble.review._handlers import ReviewHandler, timeout_decision
from agentensemble.review._model import OnTimeoutAction, check_on_timeout, check_timeout
from agentensemble.web._hub import (
    DETAILED_TASKS,
    TOOL_CALLS_KEPT,
    Hub,
    Inbox,
    NobodyLeft,
    RunCanceller,
)

if TYPE_CHECKING:
    from agentensemble.observability._events import Event
    from agentensemble.observability._trace import ExecutionTrace
    from agentensemble.review import ReviewDecision, ReviewRequest

__all__ = ["DashboardListener", "WebDashboard", "WebReviewHandler"]

logger = get_logger("agentensemble.web")

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_START_TIMEOUT = 15.0
_STOP_TIMEOUT = 5.0
_CLOSE_PAGES_TIMEOUT = 2.0
"""Seconds the pages get to receive what is queued for them when the dashboard stops."""
HEARTBEAT_SECONDS = 15.0


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine only."""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class WebDashboard:
    """A live dashboard in the browser: every event of the runs it watches, as it happens;
    reviews decided in the page; runs cancelled from it.

    ``Ensemble(web_dashboard=dashboard)`` wires it (its `listener`, and its `review_handler`
    when the ensemble has none) and, when the run had to start the server, stops it when
    the run ends. Start it yourself (``with WebDashboard(port=0) as dashboard:``) to keep
    the page up across runs. The server runs on its own thread and event loop: the run's
    listener only appends to a queue, so a busy run never freezes the page and the page
    never slows the run.

    Bound to a loopback address (the default), WebSocket connections must come from a
    page on ``localhost``, ``127.0.0.1`` or ``::1``. Bound elsewhere, `token` is required,
    and every API call must carry it (``Authorization: Bearer <token>`` or ``?token=``).
    Reviews without a time limit of their own wait `review_timeout`, then `on_timeout`
    applies. The last `max_retained_runs` runs are kept for pages opened later.
    """

    def __init__(
        self,
        port: int = 7329,
        host: str = "127.0.0.1",
        *,
        review_timeout: timedelta | float = timedelta(minutes=5),
        on_timeout: OnTimeoutAction | str = OnTimeoutAction.CONTINUE,
        max_retained_runs: int = 10,
        max_snapshot_iterations: int = 5,
        token: str | None = None,
        max_client_pending: int = 10_000,
    ) -> None:
        _check_int(port, "port", 0, 65535)
        if not isinstance(host, str) or not host.strip():
            raise ValidationError(f"WebDashboard host must be a non-blank string, got: {host!r}")
        if token is not None and (not isinstance(token, str) or not token.strip()):
            raise ValidationError(f"WebDashboard token must be a non-blank string, got: {token!r}")
        if token is None and not is_loopback(host):
            raise ValidationError(
                f"WebDashboard host {host!r} is not a loopback address: set token=... so "
                "that only people who have it can watch and act on the runs"
            )
        _check_int(max_retained_runs, "max_retained_runs", 1, None)
        _check_int(max_snapshot_iterations, "max_snapshot_iterations", 0, None)
        _check_int(max_client_pending, "max_client_pending", 1, None)
        self.host = host
        self.requested_port = port
        self._last_port = port
        self.review_timeout = check_timeout(review_timeout, "WebDashboard review")
        self.on_timeout = check_on_timeout(on_timeout, "WebDashboard")
        self.max_retained_runs = max_retained_runs
        self.max_snapshot_iterations = max_snapshot_iterations
        self.token = token
        self.max_client_pending = max_client_pending
        self.listener = DashboardListener(self)
        """Add to an ensemble's `listeners` (or `RunOptions.listeners`) to show its runs."""
        self.review_handler = WebReviewHandler(self)
        """Set as an ensemble's `review_handler` to decide its reviews in the page."""
        self.readiness: Callable[[], str] | None = None
        """What ``/api/health/ready`` reports: a serving ensemble sets its server's state
        (READY answers 200, STARTING, DRAINING and STOPPED 503); None: READY."""
        self._lock = threading.RLock()
        self._server: _Server | None = None
        self._stopping: _Server | None = None
        """A server taken out of use and being stopped (a start waits for it)."""
        self._run_users = 0
        self._started_by_runs = False
        self._preloaded: list[Any] = []
        self._mode = "live"
        self._trace_json: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"WebDashboard(url={self.url!r})" if self.running else f"WebDashboard({self.host!r})"

    @classmethod
    def for_trace(cls, trace: ExecutionTrace, **options: Any) -> WebDashboard:
        """A dashboard showing a saved run (``agentensemble dashboard TRACE.json``)."""
        from agentensemble.observability._trace_events import trace_events

        dashboard = cls(**options)
        dashboard._preloaded = trace_events(trace)
        dashboard._mode = "trace"
        dashboard._trace_json[trace.ensemble_id] = trace.to_json()
        return dashboard

    # ---- lifecycle ----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        """The port the server listens on (the requested one until it first starts, the
        last one after it stops)."""
        server = self._server
        if server is not None:
            self._last_port = server.port
        return self._last_port

    @property
    def url(self) -> str:
        """The page's address (with ``?token=`` when a token is set)."""
        bare = self.host.strip("[]")
        host = f"[{bare}]" if ":" in bare else bare
        query = f"?token={self.token}" if self.token else ""
        return f"http://{host}:{self.port}/{query}"

    def start(self) -> WebDashboard:
        """Start serving (idempotent); returns once the server accepts connections. Raises
        `OSError` when the port cannot be bound."""
        self._start(by_runs=False)
        return self

    def stop(self) -> None:
        """Close every page's connection and stop the server (idempotent; returns once it
        has stopped, also when another thread is stopping it)."""
        with self._lock:
            server = self._detach() or self._stopping
        if server is not None:
            self._stop_server(server)

    def __enter__(self) -> WebDashboard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> WebDashboard:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    async def acquire_for_run(self) -> None:
        """A run with this dashboard starts: start the server if it is not running (the
        runs then own it: the last of them to end stops it). A server that cannot start
        (its port is taken) is logged and the run goes on without it."""
        with self._lock:
            self._run_users += 1
            needs_start = self._server is None
        if not needs_start:
            return
        try:
            await asyncio.to_thread(self._start, by_runs=True)
            logger.info("Web dashboard at %s", self.url)
        except OSError as error:
            logger.warning("Web dashboard could not start on %s: %s", self.url, error)
        except BaseException:  # cancelled meanwhile, or the `web` extra is missing
            await self.release_for_run()
            raise

    async def release_for_run(self) -> None:
        """A run with this dashboard ended: stop the server if the runs started it and
        this was the last of them."""
        with self._lock:
            self._run_users -= 1
            owned = self._started_by_runs and self._run_users == 0
            server = self._detach() if owned else None
        if server is not None:
            await asyncio.to_thread(self._stop_server, server)

    def _start(self, *, by_runs: bool) -> None:
        with self._lock:
            if self._stopping is not None:  # another caller is stopping the last server
                self._stop_server(self._stopping)
            if self._server is not None:
                return
            server = _Server(self)
            server.start()
            self._server = server
            self._started_by_runs = by_runs
            atexit.register(self.stop)  # close the pages' connections at exit

    def _detach(self) -> _Server | None:
        """Take the running server out of use (under the lock); the caller stops it."""
        server, self._server = self._server, None
        self._started_by_runs = False
        if server is not None:
            self._stopping = server
        return server

    def _stop_server(self, server: _Server) -> None:
        server.stop()
        atexit.unregister(self.stop)
        if self._stopping is server:
            self._stopping = None

    # ---- from the runs' threads -----------------------------------------------------------

    def put(self, item: Any) -> None:
        """Hand an event (or a callable) to the server's loop; dropped when not serving."""
        server = self._server
        if server is not None and server.inbox is not None:
            server.inbox.put(item)

    def hub(self) -> Hub | None:
        server = self._server
        return None if server is None else server.hub


class DashboardListener:
    """The run side of the dashboard: hands each event to the server's loop (an append).

    It is fed as a fold (`handlers`): synchronously as each event is emitted, so the
    server gets a run's events in `seq` order whatever the other listeners do. Its
    `on_token` only asks the run to stream answers."""

    def __init__(self, dashboard: WebDashboard) -> None:
        self._dashboard = dashboard
        handlers: dict[type[Any], Callable[[DashboardListener, Any], None]] = {
            kind: DashboardListener._put for kind in EVENT_TYPES
        }
        handlers[EnsembleStartedEvent] = DashboardListener._started
        self.handlers: Mapping[type[Any], Callable[[DashboardListener, Any], None]] = handlers

    def __repr__(self) -> str:
        return f"DashboardListener({self._dashboard!r})"

    async def on_token(self, event: TokenEvent) -> None:
        """Tokens reach the dashboard through `handlers`; this method makes runs stream."""

    def _put(self, event: Event) -> None:
        self._dashboard.put(event)

    def _started(self, event: EnsembleStartedEvent) -> None:
        """A run started (on its own task): the page may cancel that task."""
        self._dashboard.put(event)
        hub = self._dashboard.hub()
        task = asyncio.current_task()
        if hub is not None and task is not None:
            canceller = RunCanceller(asyncio.get_running_loop(), task)
            self._dashboard.put(lambda: hub.attach_canceller(event.ensemble_id, canceller))


class WebReviewHandler(ReviewHandler):
    """Asks the people watching the dashboard: the first decision from any page wins. When
    the last page closes, waiting reviews end as if they timed out."""

    def __init__(self, dashboard: WebDashboard) -> None:
        self._dashboard = dashboard

    def __repr__(self) -> str:
        return f"WebReviewHandler({self._dashboard!r})"

    @property
    def default_timeout(self) -> timedelta:
        """How long a review without its own time limit waits (the dashboard's)."""
        return self._dashboard.review_timeout

    @property
    def default_on_timeout(self) -> OnTimeoutAction:
        return self._dashboard.on_timeout

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        hub = self._dashboard.hub()
        if hub is None:  # not serving: nobody can decide
            return timeout_decision(request)
        answer: concurrent.futures.Future[ReviewDecision] = concurrent.futures.Future()
        self._dashboard.put(lambda: hub.open_review(request, answer))
        try:
            return await asyncio.wrap_future(answer)
        except NobodyLeft:
            return timeout_decision(request)
        finally:
            self._dashboard.put(lambda: hub.close_review(request.review_id))


class _Server:
    """The server's thread, loop and uvicorn server."""

    def __init__(self, dashboard: WebDashboard) -> None:
        self.dashboard = dashboard
        self.port = dashboard.requested_port
        self.hub: Hub | None = None
        self.inbox: Inbox | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._uvicorn: Any = None
        self._stopping: asyncio.Event | None = None
        self._abandoned = False
        """Set when start() gave up waiting: the server stops as soon as it is up."""

    def start(self) -> None:
        from agentensemble._extras import require

        for module in ("starlette", "uvicorn", "websockets"):
            require(module, "web")
        sock = _bind(self.dashboard.host, self.dashboard.requested_port)
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(
            target=self._serve, args=(sock,), name="agentensemble-dashboard", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT):
            self._abandoned = True
            self.stop()
            raise OSError(f"the web dashboard did not start within {_START_TIMEOUT:.0f} s")
        if self._failure is not None:
            raise self._failure

    def _serve(self, sock: socket.socket) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        try:
            loop.run_until_complete(self._main(sock))
        except BaseException as error:  # reported to start() if it is still waiting
            self._failure = error
            logger.exception("Web dashboard server failed")
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            sock.close()

    async def _main(self, sock: socket.socket) -> None:
        import uvicorn

        from agentensemble.web._app import build_app

        dashboard = self.dashboard
        hub = Hub(
            max_retained_runs=dashboard.max_retained_runs,
            max_snapshot_iterations=dashboard.max_snapshot_iterations,
            max_client_pending=dashboard.max_client_pending,
            mode=dashboard._mode,
            settings={
                "detailedTasks": DETAILED_TASKS,
                "toolCallsKept": TOOL_CALLS_KEPT,
                "iterationsKept": dashboard.max_snapshot_iterations,
                "reviewTimeoutMs": dashboard.review_timeout.total_seconds() * 1000,
                "onTimeout": dashboard.on_timeout.value,
                "maxRetainedRuns": dashboard.max_retained_runs,
            },
        )
        event_adapter()  # built now, not when the first event of a run arrives
        if dashboard._preloaded:
            hub.handle(dashboard._preloaded)
        self.hub = hub
        self.inbox = Inbox(asyncio.get_running_loop(), hub.handle)
        hub.catch_up = self.inbox.flush
        self._stopping = asyncio.Event()
        config = uvicorn.Config(
            build_app(dashboard, hub, self._stopping),
            log_level="warning",
            lifespan="off",
            ws="websockets-sansio",
            ws_ping_interval=None,
            timeout_graceful_shutdown=2,
        )
        self._uvicorn = server = _ready_server(uvicorn.Server, config, self._on_ready)
        async with asyncio.TaskGroup() as group:
            heartbeat = group.create_task(_heartbeat(hub))
            await server.serve(sockets=[sock])
            heartbeat.cancel()
        self.inbox.flush()

    def _on_ready(self) -> None:
        self._ready.set()
        if self._abandoned:
            self.stop()

    def stop(self) -> None:
        loop, thread = self.loop, self._thread
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                asyncio.run_coroutine_threadsafe(self._close_pages(), loop)
        if thread is not None and thread is not threading.current_thread():
            thread.join(_STOP_TIMEOUT)

    async def _close_pages(self) -> None:
        """Send every page what is queued for it, close it (1001), then stop serving."""
        try:
            if self._stopping is not None:
                self._stopping.set()
            if self.inbox is not None:
                self.inbox.flush()
            if self.hub is not None:
                self.hub.end_reviews()
                self.hub.close_all(1001, "dashboard stopping")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_CLOSE_PAGES_TIMEOUT):
                        await self.hub.no_sockets.wait()
        finally:
            if self._uvicorn is not None:
                self._uvicorn.should_exit = True


def _ready_server(base: type[Any], config: Any, ready: Callable[[], None]) -> Any:
    """A uvicorn server that calls `ready` once it accepts connections."""

    class ReadyServer(base):  # type: ignore[misc]
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            ready()

    return ReadyServer(config)


async def _heartbeat(hub: Hub) -> None:
    import json
    import time

    while True:
        await asyncio.sleep(HEARTBEAT_SECONDS)
        hub.broadcast(json.dumps({"type": "heartbeat", "serverTimeMs": round(time.time() * 1000)}))


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if host == "localhost":
        host = "127.0.0.1"
    sock = socket.create_server((host.strip("[]"), port), family=family, reuse_port=False)
    sock.setblocking(False)
    return sock


def _check_int(value: object, name: str, low: int, high: int | None) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValidationError(f"WebDashboard {name} must be an integer {bound}, got: {value!r}")
