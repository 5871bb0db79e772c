"""Rate limiting: `RateLimit` values and a token-bucket `RateLimitedChatModel` wrapper."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from agentensemble._checks import require_int
from agentensemble.errors import RateLimitTimeoutError, ValidationError
from agentensemble.models._messages import ChatResponse, Message, ToolSpec
from agentensemble.models._protocol import ChatModel, StreamingChatModel, model_name_of
from agentensemble.models._settings import ModelSettings

__all__ = ["Clock", "RateLimit", "RateLimitedChatModel", "SystemClock"]


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


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most `requests` model calls per `period` (a timedelta or seconds).

    Equal when `requests` and `period` are equal. `clock` is for tests.
    """

    requests: int
    period: timedelta
    clock: Clock | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        require_int(self.requests, "RateLimit requests")
        if self.requests <= 0:
            raise ValidationError(f"RateLimit requests must be > 0, got: {self.requests}")
        period = self.period
        if period is None:
            raise ValidationError("RateLimit period must not be null")
        if isinstance(period, (int, float)) and not isinstance(period, bool):
            period = timedelta(seconds=period)
            object.__setattr__(self, "period", period)
        if not isinstance(period, timedelta):
            raise ValidationError(f"RateLimit period must be a timedelta, got: {period!r}")
        if period <= timedelta(0):
            raise ValidationError(f"RateLimit period must be positive, got: {period}")

    @classmethod
    def per_second(cls, requests: int, *, clock: Clock | None = None) -> RateLimit:
        """`requests` calls per second."""
        return cls(requests, timedelta(seconds=1), clock)

    @classmethod
    def per_minute(cls, requests: int, *, clock: Clock | None = None) -> RateLimit:
        """`requests` calls per minute."""
        return cls(requests, timedelta(minutes=1), clock)

    @property
    def interval(self) -> float:
        """Seconds between two tokens."""
        return self.period.total_seconds() / self.requests


class RateLimitedChatModel:
    """Wraps a model so that its calls follow a `RateLimit` (one token bucket per wrapper).

    The bucket holds up to `requests` tokens, starts with one (no initial burst) and refills
    continuously, one token per ``period / requests``. A call takes a token or waits for one
    without blocking the event loop; concurrent callers are served in arrival order. If the
    wait would exceed `wait_timeout`, the call fails at once with `RateLimitTimeoutError`.
    Share a bucket by passing the same wrapper to several agents or tasks.
    """

    def __init__(
        self,
        model: ChatModel,
        limit: RateLimit,
        *,
        wait_timeout: timedelta = timedelta(seconds=30),
    ) -> None:
        if model is None:
            raise ValidationError("RateLimitedChatModel model must not be null")
        if not isinstance(limit, RateLimit):
            raise ValidationError(f"RateLimitedChatModel limit must be a RateLimit, got: {limit!r}")
        self.model = model
        self.limit = limit
        self.wait_timeout = wait_timeout
        self._clock: Clock = limit.clock or SystemClock()
        self._tokens = 1.0
        self._updated = self._clock.monotonic()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RateLimitedChatModel({self.model!r}, {self.limit!r})"

    def _reserve(self) -> float:
        """Take a token (possibly one not yet refilled); return how long to wait for it."""
        with self._lock:
            now = self._clock.monotonic()
            refill = (now - self._updated) / self.limit.interval
            self._tokens = min(float(self.limit.requests), self._tokens + refill)
            self._updated = now
            wait = max(0.0, (1.0 - self._tokens) * self.limit.interval)
            if wait > self.wait_timeout.total_seconds():
                raise RateLimitTimeoutError(
                    requests=self.limit.requests,
                    period=self.limit.period,
                    wait_timeout=self.wait_timeout,
                )
            self._tokens -= 1.0
            return wait

    async def acquire(self) -> None:
        """Wait until this caller may make one model call."""
        wait = self._reserve()
        if wait > 0:
            await self._clock.sleep(wait)

    @property
    def model_name(self) -> str:
        """The wrapped model's name."""
        return model_name_of(self.model)

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        """Take a token, then call the wrapped model."""
        await self.acquire()
        return await self.model.chat(messages, tools=tools, settings=settings)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[str | ChatResponse]:
        """Take a token, then stream from the wrapped model (or yield its whole answer)."""
        await self.acquire()
        if isinstance(self.model, StreamingChatModel):
            async for item in self.model.stream(messages, tools=tools, settings=settings):
                yield item
        else:
            yield await self.model.chat(messages, tools=tools, settings=settings)
