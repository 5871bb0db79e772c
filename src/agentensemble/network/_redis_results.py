"""Responses in Redis (`ResultStore.redis`): written once, announced by the write that won.

Waiters share one pub/sub connection per store. A waiter's channel is subscribed first and
the key read once the subscription is confirmed, so a response stored before, during or
after subscribing is seen; when the connection comes back after Redis restarted, redis-py
subscribes again and each confirmation reads the key again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from agentensemble._extras import require
from agentensemble._logging import get_logger
from agentensemble.network import _redis_keys as keys
from agentensemble.network._spi import RESULT_TTL, ResultStore
from agentensemble.network._wire import WorkResponse

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from redis.asyncio import Redis
    from redis.asyncio.client import PubSub
    from redis.commands.core import AsyncScript

__all__ = ["RedisResultStore"]

_log = get_logger(__name__)

_STORE = keys.STORE_RESULT_LUA + "\nreturn store_result(KEYS[1], ARGV[3], ARGV[1], ARGV[2])\n"
_BATCH = 500
"""Keys read by one MGET (waiters whose subscription was just confirmed)."""
_BACKOFF = 0.5
"""Seconds before the reader or the subscriber tries again after a connection error."""
_LAST_LOOK = 1.0
"""Seconds the final read of a waiter that timed out may take."""


class RedisResultStore(ResultStore):
    """`ResultStore.redis(url)`: see the module docstring."""

    def __init__(self, url: str) -> None:
        require("redis.asyncio", "redis")
        self._url = url
        self._errors: Any = require("redis.exceptions", "redis")
        self._reset()

    def __repr__(self) -> str:
        return f"ResultStore.redis({self._url!r})"

    def _reset(self) -> None:
        """Per-process state, made lazily (a forked child makes its own)."""
        self._pid = os.getpid()
        self._client_: Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._store_script: AsyncScript | None = None
        self._pubsub: PubSub | None = None
        self._waiters: dict[str, set[asyncio.Future[WorkResponse | None]]] = {}
        self._subscribed: set[str] = set()
        self._to_check: set[str] = set()
        self._wake: asyncio.Event | None = None
        self._closing = False
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def _client(self) -> Redis:
        if self._pid != os.getpid():
            self._reset()
        self._loop, stale = keys.bind_loop(self._loop, "ResultStore.redis")
        if stale:  # its loop closed: the client, the pub/sub connection and tasks with it
            self._reset()
            self._loop = asyncio.get_running_loop()
        if self._client_ is None:
            self._client_ = keys.async_client(self._url, max_connections=keys.MAX_CONNECTIONS)
        return self._client_

    async def store(self, response: WorkResponse, ttl: timedelta = RESULT_TTL) -> bool:
        """Write `response` unless one is stored for its id (``SET NX PX``) and publish it
        only when this write won (one Lua script)."""
        if self._store_script is None:
            self._store_script = self._client.register_script(_STORE)
        request_id = response.request_id
        won = await self._store_script(
            keys=[keys.result_key(request_id)],
            args=[
                response.to_json(),
                max(int(ttl.total_seconds() * 1000), 1),
                keys.notify_channel(request_id),
            ],
        )
        return bool(won)

    async def retrieve(self, request_id: str) -> WorkResponse | None:
        """The stored response (None when none is stored or it expired)."""
        return _parse(request_id, await self._client.get(keys.result_key(request_id)))

    async def wait(self, request_id: str, timeout: float) -> WorkResponse | None:
        """The response, waiting up to `timeout` seconds for it to be stored."""
        if timeout <= 0:
            return await self.retrieve(request_id)
        future: asyncio.Future[WorkResponse | None] = asyncio.get_running_loop().create_future()
        self._add_waiter(request_id, future)
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            return await self._last_look(request_id)
        finally:
            self._remove_waiter(request_id, future)

    async def _last_look(self, request_id: str) -> WorkResponse | None:
        """One more read when a wait times out (a publish may be on its way)."""
        try:
            async with asyncio.timeout(_LAST_LOOK):
                return await self.retrieve(request_id)
        except (TimeoutError, self._errors.RedisError):
            return None

    # -- waiters -------------------------------------------------------------------------

    def _add_waiter(self, request_id: str, future: asyncio.Future[WorkResponse | None]) -> None:
        self._client  # noqa: B018 -- resets the state in a forked child first
        self._waiters.setdefault(request_id, set()).add(future)
        if keys.notify_channel(request_id) in self._subscribed:
            # Another waiter subscribed it already: the announcement may have come and gone,
            # so this one reads the key too.
            self._to_check.add(request_id)
        self._start()
        self._poke()

    def _remove_waiter(self, request_id: str, future: asyncio.Future[WorkResponse | None]) -> None:
        waiting = self._waiters.get(request_id)
        if waiting is None:
            return
        waiting.discard(future)
        if not waiting:
            del self._waiters[request_id]
            self._poke()

    def _resolve(self, request_id: str, response: WorkResponse | None) -> None:
        for future in self._waiters.get(request_id, ()):
            if not future.done():
                future.set_result(response)

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # -- background tasks ----------------------------------------------------------------

    def _start(self) -> None:
        """Start the background work of this store (once, on the first wait)."""
        if self._tasks and not self._tasks[0].done():
            return
        self._subscribed.clear()  # a new pub/sub connection subscribes afresh
        self._wake = asyncio.Event()
        pubsub = self._pubsub = self._client.pubsub()
        task = asyncio.create_task(self._run(self._wake, pubsub), name="agentensemble-results")
        self._tasks = [task]

    async def _run(self, wake: asyncio.Event, pubsub: PubSub) -> None:
        """Connect the pub/sub connection, then subscribe and read side by side."""
        while pubsub.connection is None:
            try:
                await cast("Callable[[], Awaitable[None]]", pubsub.connect)()
            except (self._errors.ConnectionError, self._errors.TimeoutError) as error:
                _log.warning("Redis unreachable for result notifications: %s", error)
                await asyncio.sleep(_BACKOFF)
        async with asyncio.TaskGroup() as group:
            group.create_task(self._subscriber(wake, pubsub))
            group.create_task(self._reader(pubsub))

    async def _subscriber(self, wake: asyncio.Event, pubsub: PubSub) -> None:
        """Bring the subscriptions in line with the waiters and read the keys of waiters
        whose subscription was confirmed; the only task that sends on the pub/sub
        connection."""
        while not self._closing:
            await wake.wait()
            wake.clear()
            try:
                await self._sync_subscriptions(pubsub)
                await self._check()
            except (self._errors.ConnectionError, self._errors.TimeoutError) as error:
                _log.warning("Redis unreachable for result subscriptions: %s", error)
                await asyncio.sleep(_BACKOFF)
                wake.set()

    async def _sync_subscriptions(self, pubsub: PubSub) -> None:
        wanted = {keys.notify_channel(request_id) for request_id in self._waiters}
        added, removed = wanted - self._subscribed, self._subscribed - wanted
        for chunk in _chunks(sorted(added)):
            await pubsub.subscribe(*chunk)
            self._subscribed.update(chunk)
        for chunk in _chunks(sorted(removed)):
            await pubsub.unsubscribe(*chunk)
            self._subscribed.difference_update(chunk)

    async def _check(self) -> None:
        """Read the keys of waiters whose subscription was confirmed (a response stored
        before the subscription took effect is found here)."""
        while self._to_check:
            batch = [rid for rid in list(self._to_check)[:_BATCH] if rid in self._waiters]
            self._to_check.difference_update(batch)
            self._to_check.intersection_update(self._waiters)
            if not batch:
                continue
            try:
                values = await self._client.mget([keys.result_key(rid) for rid in batch])
            except BaseException:
                self._to_check.update(batch)
                raise
            for request_id, value in zip(batch, values, strict=True):
                response = _parse(request_id, value)
                if response is not None:
                    self._resolve(request_id, response)

    async def _reader(self, pubsub: PubSub) -> None:
        """Dispatch what arrives on the pub/sub connection; redis-py reconnects it (and
        subscribes again) after a connection error."""
        while not self._closing:
            try:
                message = await pubsub.get_message(timeout=None)
            except (self._errors.ConnectionError, self._errors.TimeoutError) as error:
                _log.warning("Redis unreachable for result notifications: %s", error)
                await asyncio.sleep(_BACKOFF)
                continue
            if message is not None:
                self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        channel = str(message.get("channel") or "")
        prefix = keys.notify_channel("")
        if not channel.startswith(prefix):
            return
        request_id = channel.removeprefix(prefix)
        if request_id not in self._waiters:
            return
        if message["type"] == "subscribe":
            self._to_check.add(request_id)
            self._poke()
        elif message["type"] == "message":
            response = _parse(request_id, message.get("data"))
            if response is None:
                self._to_check.add(request_id)
                self._poke()
            else:
                self._resolve(request_id, response)

    async def aclose(self) -> None:
        """Stop the background tasks, end the waits (they return None) and close the
        connections."""
        if self._pid != os.getpid():
            return
        tasks, self._tasks = self._tasks, []
        self._closing = True  # a cancellation swallowed inside redis-py still ends the loops
        self._poke()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for request_id in list(self._waiters):
            self._resolve(request_id, None)
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            await cast("Callable[[], Awaitable[None]]", pubsub.aclose)()
        client, self._client_ = self._client_, None
        self._subscribed.clear()
        self._store_script = None
        self._closing = False
        if client is not None:
            await client.aclose()


def _parse(request_id: str, value: object) -> WorkResponse | None:
    if not isinstance(value, str):
        return None
    try:
        return WorkResponse.model_validate_json(value)
    except ValidationError as error:
        _log.warning("Stored response of %r is not a WorkResponse: %s", request_id, error)
        return None


def _chunks(items: list[str]) -> list[list[str]]:
    return [items[n : n + _BATCH] for n in range(0, len(items), _BATCH)]
