"""Rate limiting: `RateLimit` values and a token-bucket `RateLimitedChatModel` wrapper."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Protocol

from agentensemble._checks import require_int
from agentensemble.errors import RateLimitTimeoutError, ValidationError
from agentensemble.models._messages import ChatResponse, Message, ToolSpec
from agentensemble.models._protocol import (
    ChatModel,
    StreamingChatModel,
    model_name_of,
    supports_output_schema,
)
from agentensemble.models._settings import ModelSettings

__all__ = ["Clock", "RateLimit", "RateLimitedChatModel", "RateLimiter", "SystemClock"]


class Clock(Protocol):
    """Time source of a rate limiter; inject a fake one to test without waiting."""

    def monotonic(self) -> float:
        """Seconds on a monotonic clock."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` without blocking the event loop."""
        ...


class SystemClock:
    """The real clock: `time.monotonic` and `asyncio.sleep`."""

    def monotonic(self) -> float:
        """Seconds on the system's monotonic clock."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """`asyncio.sleep`."""
        import asyncio

        await asyncio.sleep(seconds)


class RateLimit:
    """At most `requests` model calls per `period` (a timedelta or seconds).

    A call waits for a token as long as it takes (bounded by the run's deadline), unless
    `wait_timeout` is set: then a call whose wait would be longer fails at once with
    `RateLimitTimeoutError`. Equal when `requests` and `period` are equal. `clock` is for tests.
    """

    __slots__ = ("clock", "period", "requests", "wait_timeout")

    requests: int
    period: timedelta
    wait_timeout: timedelta | None
    clock: Clock | None

    def __init__(
        self,
        requests: int,
        period: timedelta | float,
        *,
        wait_timeout: timedelta | float | None = None,
        clock: Clock | None = None,
    ) -> None:
        require_int(requests, "RateLimit requests")
        if requests <= 0:
            raise ValidationError(f"RateLimit requests must be > 0, got: {requests}")
        if period is None:
            raise ValidationError("RateLimit period must not be null")
        checked = _duration(period, "RateLimit period")
        if checked <= timedelta(0):
            raise ValidationError(f"RateLimit period must be positive, got: {checked}")
        wait = None if wait_timeout is None else _duration(wait_timeout, "RateLimit wait_timeout")
        if wait is not None and wait < timedelta(0):
            raise ValidationError(f"RateLimit wait_timeout must not be negative, got: {wait}")
        set_ = object.__setattr__
        set_(self, "requests", requests)
        set_(self, "period", checked)
        set_(self, "wait_timeout", wait)
        set_(self, "clock", clock)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("RateLimit is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RateLimit):
            return NotImplemented
        return (self.requests, self.period) == (other.requests, other.period)

    def __hash__(self) -> int:
        return hash((self.requests, self.period))

    def __repr__(self) -> str:
        return f"RateLimit(requests={self.requests}, period={self.period!r})"

    @classmethod
    def per_second(
        cls,
        requests: int,
        *,
        wait_timeout: timedelta | float | None = None,
        clock: Clock | None = None,
    ) -> RateLimit:
        """`requests` calls per second."""
        return cls(requests, timedelta(seconds=1), wait_timeout=wait_timeout, clock=clock)

    @classmethod
    def per_minute(
        cls,
        requests: int,
        *,
        wait_timeout: timedelta | float | None = None,
        clock: Clock | None = None,
    ) -> RateLimit:
        """`requests` calls per minute."""
        return cls(requests, timedelta(minutes=1), wait_timeout=wait_timeout, clock=clock)

    @property
    def interval(self) -> float:
        """Seconds between two tokens."""
        return self.period.total_seconds() / self.requests


def _duration(value: object, field: str) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return timedelta(seconds=value)
    raise ValidationError(f"{field} must be a timedelta or a number of seconds, got: {value!r}")


class RateLimiter:
    """One token bucket: holds up to `requests` tokens, starts with one (no initial burst)
    and refills continuously, one token per ``period / requests``.

    `acquire` takes a token or waits for one without blocking the event loop; concurrent
    callers are served in arrival order. A waiter that is cancelled (or whose run times out)
    gives its token back. Thread-safe, so one bucket may serve runs on several event loops.
    """

    def __init__(self, limit: RateLimit, *, wait_timeout: timedelta | None = None) -> None:
        self.limit = limit
        self.wait_timeout = wait_timeout if wait_timeout is not None else limit.wait_timeout
        self._clock: Clock = limit.clock or SystemClock()
        self._tokens = 1.0
        self._updated = self._clock.monotonic()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RateLimiter({self.limit!r})"

    def _refill(self) -> None:
        now = self._clock.monotonic()
        refill = (now - self._updated) / self.limit.interval
        self._tokens = min(float(self.limit.requests), self._tokens + refill)
        self._updated = now

    def _reserve(self) -> float:
        """Take a token (possibly one not yet refilled); return how long to wait for it."""
        with self._lock:
            self._refill()
            wait = max(0.0, (1.0 - self._tokens) * self.limit.interval)
            if self.wait_timeout is not None and wait > self.wait_timeout.total_seconds():
                raise RateLimitTimeoutError(
                    requests=self.limit.requests,
                    period=self.limit.period,
                    wait_timeout=self.wait_timeout,
                )
            self._tokens -= 1.0
            return wait

    def _give_back(self) -> None:
        with self._lock:
            self._refill()
            self._tokens = min(float(self.limit.requests), self._tokens + 1.0)

    async def acquire(self) -> None:
        """Wait until this caller may make one model call."""
        wait = self._reserve()
        if wait <= 0:
            return
        try:
            await self._clock.sleep(wait)
        except BaseException:
            self._give_back()  # cancelled or timed out: the token was never used
            raise


class RateLimitedChatModel:
    """Wraps a model so that its calls follow a `RateLimit`, in a bucket of its own.

    Share a bucket by passing the same wrapper to several agents or tasks. `wait_timeout`
    overrides the limit's own.
    """

    def __init__(
        self,
        model: ChatModel,
        limit: RateLimit,
        *,
        wait_timeout: timedelta | None = None,
    ) -> None:
        if model is None:
            raise ValidationError("RateLimitedChatModel model must not be null")
        if not isinstance(limit, RateLimit):
            raise ValidationError(f"RateLimitedChatModel limit must be a RateLimit, got: {limit!r}")
        self.model = model
        self.limit = limit
        self.limiter = RateLimiter(limit, wait_timeout=wait_timeout)
        """The bucket."""

    def __repr__(self) -> str:
        return f"RateLimitedChatModel({self.model!r}, {self.limit!r})"

    @property
    def wait_timeout(self) -> timedelta | None:
        """The longest a call waits for a token (None: as long as it takes)."""
        return self.limiter.wait_timeout

    async def acquire(self) -> None:
        """Wait until this caller may make one model call."""
        await self.limiter.acquire()

    @property
    def model_name(self) -> str:
        """The wrapped model's name."""
        return model_name_of(self.model)

    @property
    def supports_output_schema(self) -> bool:
        """Whether the wrapped model does native structured output."""
        return supports_output_schema(self.model)

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        """Take a token, then call the wrapped model."""
        await self.limiter.acquire()
        return await self.model.chat(messages, tools=tools, settings=settings)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[str | ChatResponse]:
        """Take a token, then stream from the wrapped model (or yield its whole answer)."""
        await self.limiter.acquire()
        if isinstance(self.model, StreamingChatModel):
            async for item in self.model.stream(messages, tools=tools, settings=settings):
                yield item
        else:
            yield await self.model.chat(messages, tools=tools, settings=settings)
