"""`DeliveryRegistry`: who sends a response on by each delivery method (BEHAVIOUR 18.2)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Self

from agentensemble._calling import call_user_code
from agentensemble.errors import ValidationError
from agentensemble.network._wire import DeliveryMethod, DeliverySpec, WorkResponse

__all__ = ["DeliveryHandler", "DeliveryRegistry"]

DeliveryHandler = Callable[[DeliverySpec, WorkResponse], Awaitable[None] | None]
"""Sends a response where a request's `DeliverySpec` says (its `address`): sync or async.
A handler that raises fails the delivery, and the serving ensemble tries again, so a
handler may see a response more than once (give receivers the request id to dedupe on)."""

_KEPT = frozenset({DeliveryMethod.WEBSOCKET, DeliveryMethod.STORE, DeliveryMethod.NONE})


class DeliveryRegistry:
    """One handler per delivery method.

    A serving ensemble always keeps each response in its transport's result store (that is
    what makes one result per request id, and what `NetworkClient` reads); a request whose
    delivery method is QUEUE, TOPIC, WEBHOOK or BROADCAST_CLAIM is also handed to the
    handler registered for it, before its request is acknowledged. ``serve(transport,
    deliveries=registry)``; a request for a method nobody handles is answered FAILED.
    """

    def __init__(self) -> None:
        self._handlers: dict[DeliveryMethod, DeliveryHandler] = {}

    def __repr__(self) -> str:
        return f"DeliveryRegistry({sorted(self._handlers)})"

    def register(self, method: DeliveryMethod | str, handler: DeliveryHandler) -> Self:
        """Send responses of `method` with `handler`; one handler per method."""
        method = _method(method)
        if method in _KEPT:
            raise ValidationError(
                f"Delivery method {method} needs no handler: its responses are kept in the "
                "transport's result store"
            )
        if not callable(handler):
            raise ValidationError(f"Delivery handler must be callable, got: {handler!r}")
        if method in self._handlers:
            raise ValidationError(f"Handler already registered for delivery method: {method}")
        self._handlers[method] = handler
        return self

    def can_deliver(self, method: DeliveryMethod) -> bool:
        """Whether responses of `method` can be delivered."""
        return method in _KEPT or method in self._handlers

    def missing(self, method: DeliveryMethod) -> str:
        """The error of a request for a method nobody handles."""
        return f"No delivery handler registered for method: {method}"

    async def deliver(self, spec: DeliverySpec, response: WorkResponse) -> None:
        """Hand `response` to the handler of `spec.method` (nothing for the kept methods)."""
        handler = self._handlers.get(spec.method)
        if handler is not None:  # a sync handler runs on a thread: it may block
            await call_user_code(handler, spec, response)


def _method(method: object) -> DeliveryMethod:
    try:
        return DeliveryMethod(str(method).upper())
    except ValueError:
        names = ", ".join(DeliveryMethod)
        raise ValidationError(
            f"Delivery method must be one of [{names}], got: {method!r}"
        ) from None
