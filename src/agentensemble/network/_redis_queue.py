"""Durable request queues on Redis Streams (`RequestQueue.redis`).

A queue is one stream per priority, read by one consumer group. Each worker process is a
consumer named after its incarnation (``host:pid:start-ms``) and keeps a heartbeat key alive
from a thread. A pending entry whose owner's heartbeat is gone is claimed by the next worker
that looks (a Lua script checks and claims at once); one held past the visibility timeout
by a worker that no longer tracks it is claimed too; one delivered `max_deliveries` times
is dead-lettered with a FAILED result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError as SchemaError

from agentensemble._extras import require
from agentensemble._logging import get_logger
from agentensemble.errors import ValidationError
from agentensemble.network import _redis_keys as keys
from agentensemble.network import _redis_scripts as scripts
from agentensemble.network._spi import RESULT_TTL, BadRequest, Received, RequestQueue
from agentensemble.network._wire import Priority, WorkRequest, WorkResponse

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

__all__ = ["RedisRequestQueue"]

T = TypeVar("T")

_log = get_logger(__name__)

_PRIORITIES = tuple(Priority)
"""Highest first: the order in which streams are read."""
_DEDUPE_TTL = timedelta(days=1)
_SCAN_COUNT = 100
"""Pending entries looked at per stream by one reclaim pass (the next pass goes on)."""
_EVENTS_PER_READ = 1_000
_RESULT_MS = int(RESULT_TTL.total_seconds() * 1000)
RELEASED = "released"
"""The consumer released entries are handed to: it has no heartbeat, so peers take them."""


@dataclass(frozen=True, slots=True)
class _Taken:
    """Where a dequeued request sits: its stream (by priority index) and entry id, and
    whether it was reclaimed from a worker that died (it may be what killed it)."""

    index: int
    entry_id: str
    reclaimed: bool = False


@dataclass(frozen=True, slots=True)
class _Entry:
    """A stream entry handed to this consumer."""

    index: int
    entry_id: str
    fields: dict[str, str]
    reclaimed: bool = False


class RedisRequestQueue(RequestQueue):
    """`RequestQueue.redis(url, ...)`: see the module docstring."""

    def __init__(
        self,
        url: str,
        *,
        heartbeat_ttl: timedelta = timedelta(seconds=3),
        visibility_timeout: timedelta = timedelta(minutes=5),
        max_deliveries: int = 3,
    ) -> None:
        require("redis.asyncio", "redis")
        for name, value in (
            ("heartbeat_ttl", heartbeat_ttl),
            ("visibility_timeout", visibility_timeout),
        ):
            if not isinstance(value, timedelta) or value <= timedelta(0):
                raise ValidationError(
                    f"RequestQueue.redis {name} must be a positive timedelta, got: {value!r}"
                )
        if (
            isinstance(max_deliveries, bool)
            or not isinstance(max_deliveries, int)
            or (max_deliveries < 1)
        ):
            raise ValidationError(
                f"RequestQueue.redis max_deliveries must be an int >= 1, got: {max_deliveries!r}"
            )
        self._url = url
        self._heartbeat_ttl = heartbeat_ttl.total_seconds()
        self._visibility = visibility_timeout.total_seconds()
        self._max_deliveries = max_deliveries
        self._period = min(self._heartbeat_ttl / 3, self._visibility / 4)
        # A lapsed heartbeat is noticed within a tenth of its lifetime: a dead worker's
        # request waits the heartbeat's lifetime, and little more, before a peer takes it.
        self._reclaim_period = self._period * 0.3
        # The key lives a reclaim period less than heartbeat_ttl, so that a dead worker's
        # requests are taken within heartbeat_ttl of its last beat; a live worker refreshes
        # it every third of heartbeat_ttl, with more than half of it to spare.
        self._beat_ms = int((self._heartbeat_ttl - self._reclaim_period) * 1000)
        self._errors: Any = require("redis.exceptions", "redis")
        self._lock = threading.Lock()  # guards _taken, read by the heartbeat thread
        self._reset()

    def __repr__(self) -> str:
        return f"RequestQueue.redis({self._url!r})"

    def _reset(self) -> None:
        """Per-process state, made lazily (a forked child makes its own)."""
        self._pid = os.getpid()
        self._consumer = f"{socket.gethostname()}:{self._pid}:{int(time.time() * 1000)}"
        self._client_: Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self._heartbeat: _Heartbeat | None = None
        self._taken: dict[tuple[str, str], _Taken] = {}
        self._groups: set[str] = set()
        self._reclaim_at: dict[str, float] = {}
        self._cursors: dict[str, list[str]] = {}

    @property
    def consumer(self) -> str:
        """This worker's consumer name in the groups (``host:pid:start-ms``)."""
        return self._consumer

    @property
    def _client(self) -> Redis:
        if self._pid != os.getpid():
            self._reset()
        self._loop, stale = keys.bind_loop(self._loop, "RequestQueue.redis")
        if stale:  # its loop closed: the client and scripts were bound to it
            self._client_, self._scripts = None, {}
        if self._client_ is None:
            self._client_ = keys.async_client(self._url, max_connections=keys.MAX_CONNECTIONS)
        return self._client_

    def _script(self, text: str) -> AsyncScript:
        script = self._scripts.get(text)
        if script is None:
            script = self._scripts[text] = self._client.register_script(text)
        return script

    # -- enqueue -------------------------------------------------------------------------

    async def enqueue(self, queue: str, request: WorkRequest) -> bool:
        """Add `request` to the stream of its priority unless its id was accepted before
        (one Lua script: ``SET NX`` of the id, then ``XADD``)."""
        priority = request.priority
        entry = await self._script(scripts.ENQUEUE)(
            keys=[
                keys.request_key(queue, request.request_id),
                keys.stream_key(queue, priority),
                keys.entries_key(queue, priority),
            ],
            args=[request.to_json(), request.request_id, int(_DEDUPE_TTL.total_seconds())],
        )
        return entry is not None

    # -- dequeue -------------------------------------------------------------------------

    async def dequeue(self, queue: str, timeout: float) -> Received | None:
        """The next request: a reclaimed one first, then the highest priority waiting one,
        blocking up to `timeout` seconds (in slices, so that reclaim keeps running)."""
        taken = await self.dequeue_many(queue, 1, timeout)
        return taken[0] if taken else None

    async def dequeue_many(self, queue: str, count: int, timeout: float) -> list[Received]:
        """Up to `count` requests in one round trip (a reclaimed one, or the oldest of the
        highest priorities), blocking up to `timeout` seconds for the first."""
        await self._start_heartbeat()
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            try:
                entries = await self._next_entries(queue, count, deadline)
            except (self._errors.ConnectionError, self._errors.TimeoutError) as error:
                _log.warning("Redis unreachable while reading queue %r: %s", queue, error)
                entries = []
                await _sleep_until(deadline, self._period)
            if entries:
                return [self._received(queue, entry) for entry in entries]
            if time.monotonic() >= deadline:
                return []

    async def _next_entries(self, queue: str, count: int, deadline: float) -> list[_Entry]:
        """One round: a reclaim pass when due, a priority read, then a blocking read until
        the next reclaim pass is due."""
        reclaimed = await self._reclaim_if_due(queue)
        if reclaimed is not None:
            return [reclaimed]
        entries = await self._with_groups(queue, lambda: self._read_next(queue, count))
        if entries:
            return entries
        block = min(deadline - time.monotonic(), self._reclaim_period)
        if block <= 0:
            return []
        entry = await self._with_groups(queue, lambda: self._read_blocking(queue, block))
        return [] if entry is None else [entry]

    async def _with_groups(self, queue: str, call: Callable[[], Awaitable[T]]) -> T:
        """`call`, creating the queue's streams and group first when they are missing (a
        new queue, or a Redis that lost them)."""
        if queue not in self._groups:
            await self._create_groups(queue)
        try:
            return await call()
        except self._errors.ResponseError as error:
            if "NOGROUP" not in str(error):
                raise
            await self._create_groups(queue)
            return await call()

    async def _create_groups(self, queue: str) -> None:
        for priority in _PRIORITIES:
            try:
                await self._client.xgroup_create(
                    keys.stream_key(queue, priority), keys.group_name(queue), id="0", mkstream=True
                )
            except self._errors.ResponseError as error:
                if "BUSYGROUP" not in str(error):
                    raise
        self._groups.add(queue)

    async def _read_next(self, queue: str, count: int) -> list[_Entry]:
        """The oldest new entries of the highest priority streams that have some (never
        more than `count`)."""
        got = await self._script(scripts.READ_NEXT)(
            keys=_streams(queue), args=[keys.group_name(queue), self._consumer, count]
        )
        return [
            self._take(queue, int(got[n]) - 1, got[n + 1], _pairs(got[n + 2]))
            for n in range(0, len(got or ()), 3)
        ]

    async def _read_blocking(self, queue: str, block: float) -> _Entry | None:
        """Wait up to `block` seconds for a new entry on any stream of `queue`. Of entries of
        several streams arriving together, the highest priority one is taken and the others
        are handed back at once (a worker takes one entry per free slot)."""
        streams = _streams(queue)
        reply = await self._client.xreadgroup(
            keys.group_name(queue),
            self._consumer,
            dict.fromkeys(streams, ">"),
            count=1,
            block=max(int(block * 1000), 1),
        )
        entries = sorted(
            (
                self._take(queue, streams.index(stream), entry_id, fields)
                for stream, items in _stream_replies(reply)
                for entry_id, fields in items
            ),
            key=lambda entry: (entry.index, entry.entry_id),
        )
        if not entries:
            return None
        for extra in entries[1:]:
            with self._lock:
                self._taken.pop((queue, f"entry:{extra.entry_id}"), None)
            await self._release(queue, _Taken(extra.index, extra.entry_id))
        return entries[0]

    def _take(
        self,
        queue: str,
        index: int,
        entry_id: str,
        fields: dict[str, str],
        *,
        reclaimed: bool = False,
    ) -> _Entry:
        """Record an entry handed to this consumer (until it is received it is tracked under
        its entry id, so that the heartbeat thread keeps it)."""
        with self._lock:
            self._taken[(queue, f"entry:{entry_id}")] = _Taken(index, entry_id, reclaimed)
        return _Entry(index, entry_id, fields, reclaimed)

    def _received(self, queue: str, entry: _Entry) -> Received:
        """The request of `entry` (or what is wrong with it), tracked by its request id."""
        received = _parse(entry)
        with self._lock:
            self._taken.pop((queue, f"entry:{entry.entry_id}"), None)
            self._taken[(queue, received.request_id)] = _Taken(
                entry.index, entry.entry_id, entry.reclaimed
            )
        return received

    # -- reclaim -------------------------------------------------------------------------

    async def _reclaim_if_due(self, queue: str) -> _Entry | None:
        now = time.monotonic()
        if now < self._reclaim_at.get(queue, 0.0) or self._holds_reclaimed(queue):
            return None
        self._reclaim_at[queue] = now + self._reclaim_period
        claimed, cursors, more, answered = await self._script(scripts.RECLAIM)(
            keys=[*_streams(queue), *_entries(queue), keys.dead_key(queue)],
            args=self._reclaim_args(queue),
        )
        self._cursors[queue] = list(cursors)
        if more:
            self._reclaim_at[queue] = now  # claimed one: look again at the next dequeue
        if answered:
            _log.warning("Answered %d dead or deleted entries of queue %r", answered, queue)
        if not claimed:
            return None
        index, entry_id, fields, delivery, why = claimed
        _log.warning(
            "Reclaimed entry %s of queue %r (delivery %s): %s", entry_id, queue, delivery, why
        )
        return self._take(queue, int(index) - 1, entry_id, _pairs(fields), reclaimed=True)

    def _holds_reclaimed(self, queue: str) -> bool:
        """Whether this worker runs a request reclaimed from a dead worker. It then takes no
        other: if that request is what kills workers, the requests that die with it would
        otherwise spend their deliveries beside it and be dead-lettered too. (Peers
        reclaim meanwhile; new requests are still read.)"""
        with self._lock:
            return any(t.reclaimed for (q, _), t in self._taken.items() if q == queue)

    def _reclaim_args(self, queue: str) -> list[str | int]:
        with self._lock:
            mine = [
                f"{t.index + 1}:{t.entry_id}" for (q, _), t in self._taken.items() if q == queue
            ]
        cursors = self._cursors.get(queue) or ["-"] * len(_PRIORITIES)
        return [
            keys.group_name(queue),
            self._consumer,
            int(self._visibility * 1000),
            int(max(self._heartbeat_ttl, self._period * 3) * 1000),
            self._max_deliveries,
            _SCAN_COUNT,
            int(RESULT_TTL.total_seconds() * 1000),
            keys.heartbeat_key(""),
            keys.result_key(""),
            keys.notify_channel(""),
            int(self._heartbeat_ttl * 2) + 1,
            keys.request_key(queue, ""),
            *cursors,
            *mine,
        ]

    # -- acknowledge, release ------------------------------------------------------------

    async def acknowledge(self, queue: str, request_id: str) -> None:
        """Mark the request done: ``XACK`` and ``XDEL`` its entry in one transaction."""
        async with self._settling(queue, request_id) as taken:
            if taken is not None:
                await self._acknowledge(queue, request_id, taken)

    async def _acknowledge(self, queue: str, request_id: str, taken: _Taken) -> None:
        priority = _PRIORITIES[taken.index]
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.xack(keys.stream_key(queue, priority), keys.group_name(queue), taken.entry_id)
            pipe.xdel(keys.stream_key(queue, priority), taken.entry_id)
            pipe.hdel(keys.entries_key(queue, priority), taken.entry_id)
            # the id stays deduped as long as results are kept, not a day
            pipe.pexpire(keys.request_key(queue, request_id), _RESULT_MS)
            await pipe.execute()

    async def answer(self, queue: str, response: WorkResponse, ttl: timedelta = RESULT_TTL) -> bool:
        """Store `response` once (see `RedisResultStore.store`) and acknowledge its request,
        in one script: one round trip, and nothing between the two. False when a response
        was already stored."""
        async with self._settling(queue, response.request_id) as taken:
            return await self._answer(queue, response, ttl, taken)

    async def _answer(
        self, queue: str, response: WorkResponse, ttl: timedelta, taken: _Taken | None
    ) -> bool:
        priority = _PRIORITIES[taken.index] if taken else Priority.NORMAL
        won = await self._script(scripts.ANSWER)(
            keys=[
                keys.result_key(response.request_id),
                keys.stream_key(queue, priority),
                keys.entries_key(queue, priority),
                keys.request_key(queue, response.request_id),
            ],
            args=[
                response.to_json(),
                max(int(ttl.total_seconds() * 1000), 1),
                keys.notify_channel(response.request_id),
                keys.group_name(queue),
                taken.entry_id if taken else "",
            ],
        )
        return bool(won)

    async def record_events(self, request_id: str, events: Sequence[Mapping[str, Any]]) -> None:
        """Append wire events to the request's event stream (one round trip), kept as long
        as results are."""
        key = keys.events_key(request_id)
        async with self._client.pipeline(transaction=False) as pipe:
            for event in events:
                pipe.xadd(key, {"event": json.dumps(event)})
            pipe.pexpire(key, int(RESULT_TTL.total_seconds() * 1000))
            await pipe.execute()

    async def read_events(
        self, request_id: str, cursor: str | None, timeout: float
    ) -> tuple[list[dict[str, Any]], str | None]:
        """The events after stream entry `cursor`, blocking up to `timeout` seconds."""
        block = int(timeout * 1000) if timeout > 0 else None
        reply = await self._client.xread(
            {keys.events_key(request_id): cursor or "0-0"}, count=_EVENTS_PER_READ, block=block
        )
        events = []
        for _, entries in _stream_replies(reply):
            for entry_id, fields in entries:
                events.append(json.loads(fields["event"]))
                cursor = entry_id
        return events, cursor

    async def release(self, queue: str, request_id: str) -> None:
        """Hand the request back: its entry goes to a consumer without a heartbeat, which
        the next reclaim pass of any worker takes from (not counted as a delivery)."""
        async with self._settling(queue, request_id) as taken:
            if taken is not None:
                await self._release(queue, taken)

    async def _release(self, queue: str, taken: _Taken) -> None:
        await self._script(scripts.RELEASE)(
            keys=[keys.stream_key(queue, _PRIORITIES[taken.index])],
            args=[keys.group_name(queue), self._consumer, RELEASED, taken.entry_id],
        )

    @contextlib.asynccontextmanager
    async def _settling(self, queue: str, request_id: str) -> AsyncIterator[_Taken | None]:
        """The entry of a request being acknowledged or released: no longer tracked (the
        heartbeat stops covering it) unless the write fails, which puts it back, so that a
        later try still finds it and this worker's own reclaim never re-runs it."""
        taken = self._forget(queue, request_id)
        try:
            yield taken
        except BaseException:
            if taken is not None:
                with self._lock:
                    self._taken.setdefault((queue, request_id), taken)
            raise

    def _forget(self, queue: str, request_id: str) -> _Taken | None:
        with self._lock:
            taken = self._taken.pop((queue, request_id), None)
        if taken is None:
            _log.debug("Request %r of queue %r is not held by this worker", request_id, queue)
        return taken

    # -- heartbeat, close ----------------------------------------------------------------

    async def _start_heartbeat(self) -> None:
        """Beat once now (before the first read: peers must see this worker alive), then
        from a daemon thread every third of the heartbeat ttl."""
        client = self._client  # resets the state in a forked child first
        if self._heartbeat is not None:
            return
        key = keys.heartbeat_key(self._consumer)
        await client.set(key, 1, px=self._beat_ms)
        if self._heartbeat is None:
            self._heartbeat = _Heartbeat(self, key)
            self._heartbeat.start()

    def _held(self) -> dict[str, list[tuple[str, str]]]:
        """The (stream, entry id) pairs this worker holds, by group (for the heartbeat)."""
        with self._lock:
            held = [(queue, taken) for (queue, _), taken in self._taken.items()]
        by_group: dict[str, list[tuple[str, str]]] = {}
        for queue, taken in held:
            stream = keys.stream_key(queue, _PRIORITIES[taken.index])
            by_group.setdefault(keys.group_name(queue), []).append((stream, taken.entry_id))
        return by_group

    async def aclose(self) -> None:
        """Stop the heartbeat (its key is deleted: peers take what this worker still held)
        and close the connections."""
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()
            await asyncio.to_thread(heartbeat.join, 5.0)
        if self._client_ is None or self._pid != os.getpid():
            return
        client, self._client_ = self._client_, None
        await client.aclose()


class _Heartbeat(threading.Thread):
    """Keeps the heartbeat key alive and the held entries fresh, off the event loop, with
    its own synchronous client; deletes the key when stopped."""

    def __init__(self, queue: RedisRequestQueue, key: str) -> None:
        super().__init__(name=f"agentensemble-heartbeat-{queue.consumer}", daemon=True)
        self._queue = queue
        self._key = key
        self._stopped = threading.Event()
        self._redis_error: type[Exception] = require("redis", "redis").RedisError

    def stop(self) -> None:
        """Ask the thread to end (it deletes the key on its way out)."""
        self._stopped.set()

    def run(self) -> None:
        sync_redis = require("redis", "redis")
        queue = self._queue
        client = sync_redis.Redis.from_url(
            queue._url, decode_responses=True, socket_timeout=max(queue._period, 1.0)
        )
        touch = client.register_script(scripts.TOUCH)
        try:
            while not self._stopped.wait(queue._period):
                self._beat(client, touch)
            client.delete(self._key)
        except self._redis_error as error:
            _log.warning("Could not delete heartbeat %s: %s", self._key, error)
        finally:
            client.close()

    def _beat(self, client: Any, touch: Any) -> None:
        queue = self._queue
        try:
            client.set(self._key, 1, px=queue._beat_ms)
            for group, held in queue._held().items():
                touch(
                    keys=[stream for stream, _ in held],
                    args=[group, queue.consumer, *[entry_id for _, entry_id in held]],
                )
        except self._redis_error as error:
            _log.warning("Heartbeat %s failed: %s", self._key, error)


# -- helpers -----------------------------------------------------------------------------


def _streams(queue: str) -> list[str]:
    return [keys.stream_key(queue, priority) for priority in _PRIORITIES]


def _entries(queue: str) -> list[str]:
    return [keys.entries_key(queue, priority) for priority in _PRIORITIES]


def _pairs(flat: list[str] | dict[str, str]) -> dict[str, str]:
    """Stream entry fields as a dict (Lua replies them as a flat list)."""
    if isinstance(flat, dict):
        return flat
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _stream_replies(reply: Any) -> list[tuple[str, list[tuple[str, dict[str, str]]]]]:
    """XREADGROUP's reply as (stream, entries) pairs (RESP2 lists or RESP3 dicts)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return [
            (stream, items[0] if items and isinstance(items[0], list) else items)
            for stream, items in reply.items()
        ]
    return [(stream, items) for stream, items in reply]


def _parse(entry: _Entry) -> Received:
    """The entry's `WorkRequest`, or a `BadRequest` saying what is wrong with it."""
    payload = entry.fields.get("payload")
    fallback = f"entry:{entry.entry_id}"
    if payload is None:
        return BadRequest(fallback, f"queue entry {entry.entry_id} has no 'payload' field")
    try:
        request = WorkRequest.model_validate_json(payload)
    except SchemaError as error:
        return BadRequest(_request_id_of(payload) or fallback, _describe(error))
    # a stream entry's id starts with the Redis server's time of the XADD, in milliseconds
    return request.stamped(int(entry.entry_id.split("-", 1)[0]) / 1000)


def _request_id_of(payload: str) -> str | None:
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    request_id = data.get("requestId") if isinstance(data, dict) else None
    return request_id if isinstance(request_id, str) and request_id.strip() else None


def _describe(error: SchemaError) -> str:
    """``invalid request: priority: Input should be ... (got 'URGENT'); ...``."""
    problems = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "payload"
        value = problem.get("input")
        shown = "" if isinstance(value, dict) or value is None else f" (got {value!r})"
        problems.append(f"{where}: {problem['msg']}{shown}")
    return "invalid request: " + "; ".join(problems)


async def _sleep_until(deadline: float, most: float) -> None:
    """Back off after a connection error, never past `deadline`."""
    await asyncio.sleep(max(min(deadline - time.monotonic(), most), 0.0))
