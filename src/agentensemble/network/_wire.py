"""The wire format of BEHAVIOUR 18.2: `WorkRequest`, `WorkResponse` and their parts.

JSON uses the reference's camelCase names (``requestId``, ``from``, ``durationMs``); fields
that are None are left out, unknown fields are ignored, durations are ISO 8601 (``PT30S``).
"""

from __future__ import annotations

import time
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, PrivateAttr
from pydantic.alias_generators import to_camel

__all__ = [
    "CachePolicy",
    "DeliveryMethod",
    "DeliverySpec",
    "Priority",
    "ResponseStatus",
    "TraceContext",
    "WorkRequest",
    "WorkResponse",
]


class Priority(StrEnum):
    """How soon a request is taken: CRITICAL first, LOW last."""

    CRITICAL = "CRITICAL"
    HIGH = "HIGH"
    NORMAL = "NORMAL"
    LOW = "LOW"

    @property
    def rank(self) -> int:
        """0 for CRITICAL up to 3 for LOW (the order in which queues are read)."""
        return _RANKS[self]


_RANKS = {priority: rank for rank, priority in enumerate(Priority)}


class DeliveryMethod(StrEnum):
    """How the response reaches the caller."""

    WEBSOCKET = "WEBSOCKET"
    QUEUE = "QUEUE"
    TOPIC = "TOPIC"
    WEBHOOK = "WEBHOOK"
    STORE = "STORE"
    BROADCAST_CLAIM = "BROADCAST_CLAIM"
    NONE = "NONE"


class CachePolicy(StrEnum):
    """Whether a cached result for the request's ``cacheKey`` may answer it."""

    USE_CACHED = "USE_CACHED"
    FORCE_FRESH = "FORCE_FRESH"


class ResponseStatus(StrEnum):
    """The outcome a `WorkResponse` reports."""

    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    REJECTED = "REJECTED"
    IN_PROGRESS = "IN_PROGRESS"

    @property
    def terminal(self) -> bool:
        """True unless IN_PROGRESS."""
        return self is not ResponseStatus.IN_PROGRESS


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


_Text = Annotated[str, AfterValidator(_not_blank)]


class _Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
        ser_json_timedelta="iso8601",
    )

    def to_json(self) -> str:
        """The JSON of this message: camelCase names, None fields left out."""
        return self.model_dump_json(by_alias=True, exclude_none=True)

    def to_dict(self) -> dict[str, Any]:
        """`to_json` as a dict."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class DeliverySpec(_Wire):
    """Where the response goes: a method and, for some methods, an address."""

    method: DeliveryMethod
    address: str | None = None


class TraceContext(_Wire):
    """W3C trace context of the caller, so the work joins the caller's trace."""

    traceparent: str
    tracestate: str | None = None


class WorkRequest(_Wire):
    """A request to run a shared task or tool of another ensemble.

    `task` names the shared task or tool; `context` is the task's request text (its run
    input ``request``: see `Ensemble.shared_tasks`) or the tool's JSON arguments.
    `deadline` becomes the run's timeout. The `request_id` is the idempotency key: one id,
    one result.
    """

    request_id: _Text
    from_: _Text = Field(validation_alias=AliasChoices("from", "from_"), serialization_alias="from")
    task: _Text
    context: str | None = None
    priority: Priority = Priority.NORMAL
    deadline: timedelta | None = None
    delivery: DeliverySpec = Field(
        default_factory=lambda: DeliverySpec(method=DeliveryMethod.WEBSOCKET)
    )
    trace_context: TraceContext | None = None
    cache_policy: CachePolicy | None = None
    cache_key: str | None = None
    max_age: timedelta | None = None
    _enqueued_at: float | None = PrivateAttr(default=None)

    @property
    def deadline_seconds(self) -> float | None:
        """`deadline` in seconds (None when the request has none)."""
        return None if self.deadline is None else self.deadline.total_seconds()

    @property
    def enqueued_at(self) -> float | None:
        """When a queue accepted this request (seconds since the epoch; with Redis, the
        server's clock), as a request taken from a queue says; None otherwise."""
        return self._enqueued_at

    def stamped(self, enqueued_at: float) -> WorkRequest:
        """This request, saying it was accepted by a queue at `enqueued_at`."""
        copy = self.model_copy()
        copy._enqueued_at = enqueued_at
        return copy

    def seconds_left(self, now: float | None = None) -> float | None:
        """What is left of the deadline, counted from when a queue accepted the request
        (the wait in the queue counts); None without a deadline."""
        if self.deadline is None:
            return None
        waited = 0.0 if self._enqueued_at is None else (now or time.time()) - self._enqueued_at
        return self.deadline.total_seconds() - max(waited, 0.0)


class WorkResponse(_Wire):
    """The one result of a request: COMPLETED with `result`, or FAILED/REJECTED with
    `error`."""

    request_id: _Text
    status: ResponseStatus
    result: str | None = None
    error: str | None = None
    duration_ms: int | None = None

    @classmethod
    def failed(cls, request_id: str, error: str, duration_ms: int | None = None) -> WorkResponse:
        """A FAILED response with `error`."""
        return cls(
            request_id=request_id,
            status=ResponseStatus.FAILED,
            error=error,
            duration_ms=duration_ms,
        )
