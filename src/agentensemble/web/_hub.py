"""The dashboard's state, on the server's event loop: retained runs, connected clients,
pending reviews.

Events arrive from the runs' loops through `Inbox` (a thread-safe deque: the run only
appends) and are handled in batches on the server's loop: each becomes one wire message,
serialized once, broadcast to every client and retained. A client is sent what is queued
for it as one frame: a message, or a JSON array of messages. Per run the hub keeps a compacted
copy (the header, each task's latest state, its last tool calls and model calls, each
delegation's latest message: what a `hello` sends) and a window of recent messages (what a
`resume` replays). Tokens are broadcast only, consecutive ones of a task coalesced.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentensemble._logging import get_logger
from agentensemble.execution._facts import review_request_fields
from agentensemble.observability._events import (
    DelegationCompletedEvent,
    DelegationFailedEvent,
    DelegationStartedEvent,
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    LlmIterationCompletedEvent,
    LlmIterationStartedEvent,
    ReviewDecidedEvent,
    ReviewRequestedEvent,
    ReviewTimedOutEvent,
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskInputEvent,
    TaskStartEvent,
    TokenEvent,
    ToolCallEvent,
)
from agentensemble.observability._wire import serialize_event

if TYPE_CHECKING:
    from agentensemble.observability._events import Event
    from agentensemble.observability._trace_fold import TraceFold
    from agentensemble.review import ReviewDecision, ReviewRequest

__all__ = ["MAX_TEXT", "Client", "Hub", "Inbox", "NobodyLeft", "RunCanceller"]

logger = get_logger("agentensemble.web")

MAX_TEXT = 4000
"""Characters of one text field in a dashboard message (prompts, outputs, tool payloads):
the page shows this much; the full text is in the run's trace (``/api/runs/{id}``)."""

TOOL_CALLS_KEPT = 20
"""Tool calls per task in the compacted snapshot."""

DETAILED_TASKS = 100
"""Finished tasks per run whose tool calls and model calls the snapshot keeps: when one more
finishes, the oldest finished keeps only its start, input and end (the page applies the same
rule, so a page that watched the run and one opened later agree)."""

RESUME_WINDOW = 20_000
"""Messages per run a reconnecting client can resume from."""

REVIEW_GRACE = 10.0
"""Seconds the last page to leave has to come back (a reload, a dropped connection)
before the reviews it could have decided end with their timeout action."""

BATCH = 500
"""Most messages sent to a client in one frame (a JSON array) when several are queued."""

FLUSH_DELAY = 0.02
"""Seconds the inbox collects events before the server handles them as one batch."""


_DELEGATION_EVENTS = (DelegationStartedEvent, DelegationCompletedEvent, DelegationFailedEvent)


class Client:
    """One connected page: a bounded queue of frames and the task that sends them."""

    def __init__(self, send: Callable[[str], Any], *, max_pending: int) -> None:
        self.send = send
        self.max_pending = max_pending
        self.pending: collections.deque[str] = collections.deque()
        self.wake = asyncio.Event()
        self.closed = asyncio.Event()
        """Set once the server closes this client (it may be stuck in a send)."""
        self.closing: tuple[int, str] | None = None
        """Why the server is closing this client (code, reason), once it is."""
        self.dropped = False
        """Closed for being too slow."""

    def offer(self, frame: str) -> bool:
        """Queue `frame`; False when the client has `max_pending` frames unsent."""
        if self.closing is not None:
            return True
        if len(self.pending) >= self.max_pending:
            return False
        self.pending.append(frame)
        self.wake.set()
        return True

    def _next_frame(self) -> str:
        """The next message, or up to `BATCH` queued messages as one JSON array."""
        pending = self.pending
        if len(pending) == 1:
            return pending.popleft()
        batch = [pending.popleft() for _ in range(min(len(pending), BATCH))]
        return f"[{','.join(batch)}]"

    def close(self, code: int, reason: str, *, after_pending: bool = False) -> None:
        """Stop taking frames and close the connection with `code`: at once (a client
        that cannot keep up), or once the frames already queued are sent."""
        if self.closing is None:
            self.closing = (code, reason)
            self.wake.set()
            if not after_pending:
                self.pending.clear()
                self.closed.set()

    async def write(self) -> tuple[int, str]:
        """Send queued frames until the client is closed; returns the close code."""
        while True:
            await self.wake.wait()
            self.wake.clear()
            while self.pending:
                await self.send(self._next_frame())
            if self.closing is not None:
                return self.closing


@dataclass(frozen=True, slots=True)
class RunCanceller:
    """Cancels a run from another thread: the task running it, on its loop."""

    loop: asyncio.AbstractEventLoop
    task: asyncio.Task[Any]

    def cancel(self) -> bool:
        if self.task.done() or self.loop.is_closed():
            return False
        self.loop.call_soon_threadsafe(self.task.cancel)
        return True


@dataclass(slots=True)
class _TaskSlots:
    """A task's messages that the snapshot keeps (seq, frame)."""

    started: tuple[int, str] | None = None
    input: tuple[int, str] | None = None
    ended: tuple[int, str] | None = None
    iteration_started: tuple[int, str] | None = None
    tools: collections.deque[tuple[int, str]] = field(
        default_factory=lambda: collections.deque(maxlen=TOOL_CALLS_KEPT)
    )
    iterations: collections.deque[tuple[int, str]] = field(default_factory=collections.deque)
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def messages(self) -> Iterable[tuple[int, str]]:
        for single in (self.started, self.input, self.iteration_started, self.ended):
            if single is not None:
                yield single
        yield from self.tools
        yield from self.iterations


@dataclass(slots=True)
class RunRecord:
    """One retained run."""

    ensemble_id: str
    trace: TraceFold
    started: tuple[int, str] | None = None
    completed: tuple[int, str] | None = None
    header: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, _TaskSlots] = field(default_factory=dict)
    delegations: dict[str, tuple[int, str]] = field(default_factory=dict)
    recent: collections.deque[tuple[int, str]] = field(
        default_factory=lambda: collections.deque(maxlen=RESUME_WINDOW)
    )
    outputs: list[str] = field(default_factory=list)
    """Tasks completed so far that are not delegated workers (a running run's trace)."""
    finished: collections.deque[str] = field(default_factory=collections.deque)
    """Finished tasks that still have their details, oldest first."""
    forgotten_seq: int = 0
    """The highest seq that fell out of `recent` (a resume from before it needs a hello)."""
    last_seq: int = 0
    canceller: RunCanceller | None = None
    ended_event: EnsembleCompletedEvent | None = None

    def snapshot(self) -> list[tuple[int, str]]:
        """The compacted messages, in seq order."""
        kept = [m for m in (self.started, self.completed) if m is not None]
        kept.extend(self.delegations.values())
        for slots in self.tasks.values():
            kept.extend(slots.messages())
        kept.sort(key=lambda message: message[0])
        return kept

    def remember(self, seq: int, frame: str) -> None:
        if len(self.recent) == self.recent.maxlen:
            self.forgotten_seq = self.recent[0][0]
        self.recent.append((seq, frame))

    def since(self, cursor: int) -> list[str] | None:
        """The retained messages after `cursor`, or None when some were forgotten."""
        if cursor < self.forgotten_seq:
            return None
        return [frame for seq, frame in self.recent if seq > cursor]

    def trace_json(self) -> str:
        """The run's trace as JSON: so far (exit reason ``RUNNING``) while it runs."""
        ended = self.ended_event
        if ended is None:
            ended = EnsembleCompletedEvent(
                ensemble_id=self.ensemble_id,
                duration=datetime.now(UTC) - self._started_at(),
                exit_reason="RUNNING",
                output_task_ids=tuple(self.outputs),
            )
        return self.trace.trace_for(ended).to_json()

    def _started_at(self) -> datetime:
        """When the run started (now, if its start was never seen)."""
        started = self.header.get("startedAt")
        if isinstance(started, str):
            return datetime.fromisoformat(started.replace("Z", "+00:00"))
        return datetime.now(UTC)

    def summary(self) -> dict[str, Any]:
        return {**self.header, "ensembleId": self.ensemble_id, "lastSeq": self.last_seq}


@dataclass(slots=True)
class _PendingReview:
    request: ReviewRequest
    ensemble_id: str
    answer: concurrent.futures.Future[ReviewDecision]
    frame: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    waiting: bool = False
    """The dashboard's review handler waits for this decision (else another handler
    decides it, and the page only shows it)."""


class Inbox:
    """Where the runs' threads leave events (and other work) for the server's loop: an
    append and, for the first item of a batch, one wake-up of that loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, handle: Callable[[list[Any]], None]):
        self._loop = loop
        self._handle = handle
        self._items: collections.deque[Any] = collections.deque()
        self._scheduled = False

    def put(self, item: Any) -> None:
        """Called from any thread; never blocks."""
        self._items.append(item)
        if not self._scheduled:
            self._scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._later)
            except RuntimeError:  # the server's loop is closed: the dashboard stopped
                self._items.clear()

    def _later(self) -> None:
        self._loop.call_later(FLUSH_DELAY, self.flush)

    def flush(self) -> None:
        """Handle everything put so far (on the server's loop)."""
        self._scheduled = False
        items = []
        while self._items:
            items.append(self._items.popleft())
        if items:
            self._handle(items)


class Hub:
    """Retained runs, clients and pending reviews; every method runs on the server's loop."""

    def __init__(
        self,
        *,
        max_retained_runs: int,
        max_snapshot_iterations: int,
        max_client_pending: int = 10_000,
        mode: str = "live",
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.max_retained_runs = max_retained_runs
        self.max_snapshot_iterations = max_snapshot_iterations
        self.max_client_pending = max_client_pending
        self.mode = mode
        self.settings = dict(settings or {})
        self.runs: collections.OrderedDict[str, RunRecord] = collections.OrderedDict()
        self.clients: set[Client] = set()
        """Pages that get the broadcast."""
        self.connected: set[Client] = set()
        """Every open connection's client, joined or still to send its `resume`."""
        self.reviews: dict[str, _PendingReview] = {}
        self.messages_sent = 0
        self.clients_dropped = 0
        self.catch_up: Callable[[], None] = lambda: None
        """Handles what the inbox holds now (set by the server): reads see every event
        put before them."""
        self.sockets = 0
        """Open WebSocket connections (joined or not)."""
        self.no_sockets = asyncio.Event()
        self.no_sockets.set()

    def socket_opened(self) -> None:
        self.sockets += 1
        self.no_sockets.clear()

    def socket_closed(self) -> None:
        self.sockets -= 1
        if not self.sockets:
            self.no_sockets.set()

    # ---- events -----------------------------------------------------------------------

    def handle(self, items: list[Any]) -> None:
        """A batch from the inbox: events, and callables to run in their place in order."""
        token: dict[str, Any] | None = None
        for item in items:
            if isinstance(item, TokenEvent):
                token = self._coalesce(token, item)
                continue
            self._flush_token(token)
            token = None
            if callable(item):
                item()
            else:
                self._event(item)
        self._flush_token(token)

    def _coalesce(self, pending: dict[str, Any] | None, event: TokenEvent) -> dict[str, Any]:
        if (
            pending is not None
            and pending["taskId"] == event.task_id
            and pending["ensembleId"] == event.ensemble_id
        ):
            pending["token"] += event.token
            pending["lastSeq"] = event.seq
            return pending
        self._flush_token(pending)
        return {
            "type": "token",
            "ensembleId": event.ensemble_id,
            "seq": event.seq,
            "taskId": event.task_id,
            "taskIndex": event.task_index,
            "taskDescription": event.task_description,
            "agentRole": event.agent_role,
            "token": event.token,
            "sentAt": event.timestamp.isoformat().replace("+00:00", "Z"),
        }

    def _flush_token(self, pending: dict[str, Any] | None) -> None:
        if pending is not None:
            run = self.runs.get(pending["ensembleId"])
            if run is not None:
                run.last_seq = max(run.last_seq, pending.get("lastSeq", pending["seq"]))
            self.broadcast(json.dumps(pending))

    def _event(self, event: Event) -> None:
        run = self._run_for(event)
        run.trace.on(event)
        message = serialize_event(event)
        self._annotate(run, event, message)
        frame = json.dumps(message)
        if len(frame) > MAX_TEXT:  # else no text in it can be longer
            frame = json.dumps(_truncated(message))
        run.last_seq = max(run.last_seq, event.seq)
        run.remember(event.seq, frame)
        self._retain(run, event, (event.seq, frame))
        self.broadcast(frame)

    def _run_for(self, event: Event) -> RunRecord:
        run = self.runs.get(event.ensemble_id)
        if run is None:
            from agentensemble.observability._trace_fold import TraceFold

            run = RunRecord(event.ensemble_id, TraceFold())
            self.runs[event.ensemble_id] = run
            while len(self.runs) > self.max_retained_runs:
                self._forget(next(iter(self.runs)))
        return run

    def _forget(self, ensemble_id: str) -> None:
        self.runs.pop(ensemble_id, None)

    def _annotate(self, run: RunRecord, event: Event, message: dict[str, Any]) -> None:
        """Add what the page needs to fold compacted and live messages alike."""
        if isinstance(event, ToolCallEvent):
            slots = run.tasks.setdefault(event.task_id, _TaskSlots())
            slots.tool_calls += 1
            message["toolCallIndex"] = slots.tool_calls
        elif isinstance(event, LlmIterationCompletedEvent):
            slots = run.tasks.setdefault(event.task_id, _TaskSlots())
            slots.input_tokens += max(event.input_tokens, 0)
            slots.output_tokens += max(event.output_tokens, 0)
            message["taskInputTokens"] = slots.input_tokens
            message["taskOutputTokens"] = slots.output_tokens
        elif isinstance(event, ReviewRequestedEvent):
            message["deadlineMs"] = _deadline_ms(event)
        elif isinstance(event, EnsembleStartedEvent):
            run.header = {
                "name": event.name,
                "workflow": event.workflow,
                "totalTasks": event.total_tasks,
                "startedAt": message.get("startedAt"),
                "status": "running",
            }
        elif isinstance(event, EnsembleCompletedEvent):
            run.ended_event = event
            run.header.update(
                status=_status(event),
                exitReason=event.exit_reason,
                completedAt=message.get("completedAt"),
                durationMs=message.get("durationMs"),
            )

    def _retain(self, run: RunRecord, event: Event, kept: tuple[int, str]) -> None:
        """Keep `kept` in the run's snapshot if it is the latest of its kind."""
        if isinstance(event, EnsembleStartedEvent):
            run.started = kept
        elif isinstance(event, EnsembleCompletedEvent):
            run.completed = kept
            self._end_reviews(event.ensemble_id)
        elif isinstance(event, _DELEGATION_EVENTS):
            run.delegations[event.delegation_id] = kept
        elif isinstance(event, ReviewRequestedEvent):
            self._review_announced(event, kept[1])
        elif isinstance(event, (ReviewDecidedEvent, ReviewTimedOutEvent)):
            self.reviews.pop(event.review_id, None)
        else:
            self._retain_task(run, event, kept)

    def _retain_task(self, run: RunRecord, event: Event, kept: tuple[int, str]) -> None:
        if isinstance(event, TaskStartEvent):
            run.tasks.setdefault(event.task_id, _TaskSlots()).started = kept
        elif isinstance(event, TaskInputEvent):
            run.tasks.setdefault(event.task_id, _TaskSlots()).input = kept
        elif isinstance(event, (TaskCompleteEvent, TaskFailedEvent)):
            slots = run.tasks.setdefault(event.task_id, _TaskSlots())
            slots.ended = kept
            slots.iteration_started = None
            run.finished.append(event.task_id)
            if isinstance(event, TaskCompleteEvent) and event.parent_task_id is None:
                run.outputs.append(event.task_id)
            if len(run.finished) > DETAILED_TASKS:
                trimmed = run.tasks.get(run.finished.popleft())
                if trimmed is not None:
                    trimmed.tools.clear()
                    trimmed.iterations.clear()
        elif isinstance(event, ToolCallEvent):
            run.tasks.setdefault(event.task_id, _TaskSlots()).tools.append(kept)
        elif isinstance(event, LlmIterationStartedEvent):
            run.tasks.setdefault(event.task_id, _TaskSlots()).iteration_started = kept
        elif isinstance(event, LlmIterationCompletedEvent):
            slots = run.tasks.setdefault(event.task_id, _TaskSlots())
            slots.iteration_started = None
            if self.max_snapshot_iterations:
                slots.iterations.append(kept)
                while len(slots.iterations) > self.max_snapshot_iterations:
                    slots.iterations.popleft()

    # ---- clients ----------------------------------------------------------------------

    def broadcast(self, frame: str) -> None:
        self.messages_sent += 1
        for client in tuple(self.clients):
            if not client.offer(frame):
                self.drop(client, 1013, "client too slow: reconnect to resync")

    def join(self, client: Client) -> None:
        """Send `client` a hello and add it to the broadcast (nothing in between)."""
        self.catch_up()
        client.offer(self.hello())
        self.clients.add(client)

    def resume(self, client: Client, cursors: Mapping[str, Any]) -> None:
        """Send what `client` missed since `cursors`, or a fresh hello when that is no
        longer retained; then add it to the broadcast."""
        self.catch_up()
        frames = self._missed(cursors)
        if frames is None or len(frames) >= client.max_pending:
            client.offer(self.hello())
        else:
            for frame in frames:
                client.offer(frame)
            client.offer(json.dumps({"type": "resumed", "cursors": self.cursors()}))
        self.clients.add(client)

    def _missed(self, cursors: Mapping[str, Any]) -> list[str] | None:
        if not isinstance(cursors, Mapping) or any(run not in self.runs for run in cursors):
            return None
        frames: list[str] = []
        for ensemble_id, run in self.runs.items():
            cursor = cursors.get(ensemble_id)
            if cursor is None:
                frames.extend(frame for _, frame in run.snapshot())
                continue
            if isinstance(cursor, bool) or not isinstance(cursor, int):
                return None
            missed = run.since(cursor)
            if missed is None:
                return None
            frames.extend(missed)
        return frames

    def connect(self, client: Client) -> None:
        self.connected.add(client)

    def leave(self, client: Client) -> None:
        """`client` disconnected. When the last page goes (not one dropped for being slow:
        it reconnects), nobody is left to decide the pending reviews: they end."""
        self.connected.discard(client)
        self.clients.discard(client)
        if not self.clients and not client.dropped and self.reviews:
            asyncio.get_running_loop().call_later(REVIEW_GRACE, self._end_reviews_if_alone)

    def _end_reviews_if_alone(self) -> None:
        if not self.clients:
            self.end_reviews()

    def end_reviews(self) -> None:
        """End every waiting review with its timeout action."""
        for review in tuple(self.reviews.values()):
            _answer(review.answer, None)

    def drop(self, client: Client, code: int, reason: str) -> None:
        """Disconnect a page that cannot keep up (it resyncs when it reconnects)."""
        self.clients.discard(client)
        self.clients_dropped += 1
        client.dropped = True
        client.close(code, reason)

    def close_all(self, code: int, reason: str) -> None:
        """Close every connection once it has been sent what is queued for it."""
        for client in tuple(self.connected):
            self.clients.discard(client)
            client.close(code, reason, after_pending=True)

    def cursors(self) -> dict[str, int]:
        return {ensemble_id: run.last_seq for ensemble_id, run in self.runs.items()}

    def hello(self) -> str:
        """The late-join message: every retained run's compacted messages, in order."""
        head = json.dumps(
            {
                "type": "hello",
                "mode": self.mode,
                "serverTimeMs": round(time.time() * 1000),
                "cursors": self.cursors(),
                "settings": self.settings,
            }
        )
        runs = ",".join(
            f'{{"ensembleId":{json.dumps(ensemble_id)},"messages":['
            + ",".join(frame for _, frame in run.snapshot())
            + "]}"
            for ensemble_id, run in self.runs.items()
        )
        reviews = ",".join(r.frame for r in self.reviews.values() if r.frame is not None)
        return f'{head[:-1]},"runs":[{runs}],"reviews":[{reviews}]}}'

    # ---- reviews and cancel -------------------------------------------------------------

    def open_review(
        self, request: ReviewRequest, answer: concurrent.futures.Future[ReviewDecision]
    ) -> None:
        """Register the handler's wait for a review. Its `review_requested` event came
        first (when the dashboard listens to the run), and a page may have decided
        already: the decision is handed on."""
        pending = self.reviews.get(request.review_id)
        if pending is None:  # the dashboard decides but does not listen to this run
            self._review_announced(_announcement(request), None)
            pending = self.reviews[request.review_id]
        earlier, pending.answer = pending.answer, answer
        pending.waiting = True
        if earlier.done() and not earlier.cancelled():
            error = earlier.exception()
            _answer(answer, None if error is not None else earlier.result())

    def close_review(self, review_id: str) -> None:
        """The handler stopped waiting (decided, timed out or cancelled)."""
        pending = self.reviews.get(review_id)
        if pending is not None and pending.waiting:
            del self.reviews[review_id]

    def _review_announced(self, event: ReviewRequestedEvent, frame: str | None) -> None:
        if frame is None:  # not from a run's events: shown to the pages from here
            message = serialize_event(event)
            message["deadlineMs"] = _deadline_ms(event)
            frame = json.dumps(_truncated(message))
            self.broadcast(frame)
        pending = self.reviews.get(event.review_id)
        if pending is None:
            from agentensemble.review import ReviewRequest, ReviewTiming
            from agentensemble.review._model import OnTimeoutAction

            request = ReviewRequest(
                task_description=event.task_description,
                task_output=event.task_output,
                timing=ReviewTiming(event.timing),
                timeout=event.timeout,
                on_timeout=OnTimeoutAction(event.on_timeout),
                review_id=event.review_id,
            )
            pending = _PendingReview(request, event.ensemble_id, concurrent.futures.Future())
            self.reviews[event.review_id] = pending
        pending.frame = frame
        pending.summary = {
            "reviewId": event.review_id,
            "ensembleId": event.ensemble_id,
            "taskDescription": event.task_description,
            "timing": event.timing,
            "timeoutMs": event.timeout.total_seconds() * 1000,
            "onTimeout": event.on_timeout,
            "toolName": event.tool_name,
            "requiredRole": event.required_role,
        }

    def decide(self, review_id: object, decision: object, revised: object) -> str:
        """Apply a page's decision: ``applied``, ``ignored`` (unknown or already decided),
        ``elsewhere`` (the run's reviews go to another handler) or ``invalid`` (not a
        decision)."""
        chosen = _decision(decision, revised)
        if chosen is None:
            return "invalid"
        pending = self.reviews.get(review_id) if isinstance(review_id, str) else None
        if pending is None or pending.answer.done():
            return "ignored"
        if not pending.waiting:
            return "elsewhere"
        _answer(pending.answer, chosen)
        return "applied"

    def _end_reviews(self, ensemble_id: str) -> None:
        for review_id, review in tuple(self.reviews.items()):
            if review.ensemble_id == ensemble_id:
                self.reviews.pop(review_id, None)

    def pending_reviews(self) -> list[dict[str, Any]]:
        return [review.summary for review in self.reviews.values() if review.summary]

    def cancel(self, ensemble_id: str) -> str:
        """``cancelling``, ``unknown`` (not retained), ``finished`` or ``not-cancellable``."""
        run = self.runs.get(ensemble_id)
        if run is None:
            return "unknown"
        if run.ended_event is not None:
            return "finished"
        if run.canceller is None or not run.canceller.cancel():
            return "not-cancellable"
        return "cancelling"

    def attach_canceller(self, ensemble_id: str, canceller: RunCanceller) -> None:
        run = self.runs.get(ensemble_id)
        if run is not None:
            run.canceller = canceller


def _deadline_ms(event: ReviewRequestedEvent) -> int | None:
    """When the review times out, in epoch milliseconds (None: it waits forever)."""
    seconds = event.timeout.total_seconds()
    return round((event.timestamp.timestamp() + seconds) * 1000) if seconds else None


def _announcement(request: ReviewRequest) -> ReviewRequestedEvent:
    """The `review_requested` event of a review the dashboard decides but did not see
    announced (it is not among the run's listeners)."""
    return ReviewRequestedEvent(
        task_id=request.task_id,
        task_description=request.task_description,
        **review_request_fields(request),
    )


def _status(event: EnsembleCompletedEvent) -> str:
    if event.error_type == "CancelledError":
        return "cancelled"
    return {
        "COMPLETED": "completed",
        "USER_EXIT_EARLY": "stopped early",
        "TIMEOUT": "timed out",
    }.get(event.exit_reason, "failed")


def _decision(decision: object, revised: object) -> ReviewDecision | None:
    """The decision a page sent: approve/continue, edit (with `revised`), exit_early."""
    from agentensemble.review._model import Continue, Edit, ExitEarly

    if not isinstance(decision, str):
        return None
    chosen = decision.strip().lower().replace("-", "_")
    if chosen in {"approve", "continue"}:
        return Continue()
    if chosen == "edit":
        return Edit(revised) if isinstance(revised, str) and revised.strip() else None
    if chosen in {"exit_early", "exit"}:
        return ExitEarly()
    return None


def _answer(
    answer: concurrent.futures.Future[ReviewDecision], decision: ReviewDecision | None
) -> None:
    """Resolve a waiting review (None: as if it timed out); a decided one stays decided."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):  # decided meanwhile
        if decision is None:
            answer.set_exception(NobodyLeft())
        else:
            answer.set_result(decision)


class NobodyLeft(Exception):
    """The last page closed while a review waited: the handler applies the timeout action."""


def _truncated(value: Any) -> Any:
    """`value` with every string longer than `MAX_TEXT` cut, saying how much was left out."""
    if isinstance(value, str):
        if len(value) <= MAX_TEXT:
            return value
        return f"{value[:MAX_TEXT]}… [{len(value) - MAX_TEXT} more characters]"
    if isinstance(value, dict):
        return {key: _truncated(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_truncated(item) for item in value]
    return value
