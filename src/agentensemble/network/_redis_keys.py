"""What the Redis queue and result store share: key names, the write-once result script and
how a client is made.

Every key starts with ``agentensemble:``. A queue ``name`` has one stream per priority
(``queue:{name}:{PRIORITY}``) read by the consumer group ``group:{name}``; ``request:{name}:{id}``
remembers an accepted request id (dedupe), ``entries:{name}:{PRIORITY}`` maps a stream entry
id to its request id (to answer an entry deleted while pending), ``dead:{name}`` holds dead
letters. A worker's liveness is ``heartbeat:{consumer}``. A response is ``result:{id}``,
announced on the channel ``notify:{id}``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from agentensemble._extras import require
from agentensemble.network._wire import Priority

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "MAX_CONNECTIONS",
    "PREFIX",
    "STORE_RESULT_LUA",
    "async_client",
    "bind_loop",
    "dead_key",
    "entries_key",
    "events_key",
    "group_name",
    "heartbeat_key",
    "notify_channel",
    "request_key",
    "result_key",
    "stream_key",
]

PREFIX = "agentensemble:"

_RETRIES = 12
"""Reconnect attempts of one command (about 10 s with the backoff below): long enough to
ride out a Redis restart."""


def stream_key(queue: str, priority: Priority) -> str:
    """The stream holding `queue`'s requests of `priority`."""
    return f"{PREFIX}queue:{queue}:{priority.value}"


def entries_key(queue: str, priority: Priority) -> str:
    """The hash from an entry id of `stream_key(queue, priority)` to its request id."""
    return f"{PREFIX}entries:{queue}:{priority.value}"


def group_name(queue: str) -> str:
    """The consumer group that reads `queue`'s streams."""
    return f"{PREFIX}group:{queue}"


def request_key(queue: str, request_id: str) -> str:
    """Set while `request_id` is known to `queue` (the dedupe of `enqueue`)."""
    return f"{PREFIX}request:{queue}:{request_id}"


def dead_key(queue: str) -> str:
    """The stream of `queue`'s dead letters."""
    return f"{PREFIX}dead:{queue}"


def heartbeat_key(consumer: str) -> str:
    """Exists while the worker `consumer` is alive."""
    return f"{PREFIX}heartbeat:{consumer}"


def result_key(request_id: str) -> str:
    """The stored response of `request_id`."""
    return f"{PREFIX}result:{request_id}"


def events_key(request_id: str) -> str:
    """The stream of a request's run events (its progress, for callers who follow it)."""
    return f"{PREFIX}events:{request_id}"


def notify_channel(request_id: str) -> str:
    """The channel on which the write that stored `request_id`'s response announces it."""
    return f"{PREFIX}notify:{request_id}"


STORE_RESULT_LUA = """
local function store_result(key, channel, value, ttl_ms)
  if redis.call('SET', key, value, 'NX', 'PX', ttl_ms) then
    redis.call('PUBLISH', channel, value)
    return 1
  end
  return 0
end
"""
"""A Lua function: write a result once (``SET NX PX``) and publish it only if this write won.
Scripts that answer requests start with it."""


def bind_loop(
    bound: asyncio.AbstractEventLoop | None, what: str
) -> tuple[asyncio.AbstractEventLoop, bool]:
    """The running loop, and whether the caller must drop its loop-bound state (clients,
    tasks) because the loop it was used on has closed. Raises RuntimeError when that loop
    is still open: an asyncio client belongs to one loop."""
    loop = asyncio.get_running_loop()
    if bound is None or bound is loop:
        return loop, False
    if bound.is_closed():
        return loop, True
    raise RuntimeError(
        f"{what} is in use on another event loop: a Redis transport, queue or store belongs "
        "to the event loop it was first used on. Make one per loop (ensemble.start() serves "
        "on a loop of its own: give it a transport of its own)."
    )


MAX_CONNECTIONS = 32
"""Connections one queue or store object opens at most; more commands at once wait for one
(a caller with thousands of requests in flight must not open thousands of sockets)."""


def async_client(url: str, *, max_connections: int | None = None) -> Redis:
    """A `redis.asyncio` client on its own pool that retries a command with exponential
    backoff while the connection is down (a Redis restart)."""
    aioredis = require("redis.asyncio", "redis")
    backoff = require("redis.backoff", "redis")
    retry = require("redis.asyncio.retry", "redis")
    options: dict[str, object] = {
        "decode_responses": True,
        "socket_keepalive": True,
        "retry": retry.Retry(backoff.ExponentialBackoff(cap=1.0, base=0.05), _RETRIES),
    }
    if max_connections is None:
        pool = aioredis.ConnectionPool.from_url(url, **options)
    else:
        pool = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=None, **options
        )
    return cast("Redis", aioredis.Redis.from_pool(pool))
