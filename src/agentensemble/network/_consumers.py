"""Calling other ensembles: `NetworkClient`, and `NetworkTask`/`NetworkTool` for agents."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import TYPE_CHECKING

from agentensemble._checks import require_seconds, require_text
from agentensemble.errors import AgentEnsembleError, ValidationError
from agentensemble.network._spi import Transport
from agentensemble.network._wire import (
    Priority,
    ResponseStatus,
    WorkRequest,
    WorkResponse,
)
from agentensemble.tools import ToolResult

if TYPE_CHECKING:
    from agentensemble.observability import Event

__all__ = ["NetworkClient", "NetworkError", "NetworkTask", "NetworkTool"]

DEFAULT_TIMEOUT = timedelta(minutes=2)
"""How long a `NetworkTask` or `NetworkTool` waits for its response when not told."""


_FOLLOW_WAIT = 0.25
"""Seconds `NetworkClient.events` waits for new events before it checks for the response."""

DEADLINE_GRACE = 2.0
"""Seconds a caller waits past a request's deadline for the response that reports it."""


class NetworkError(AgentEnsembleError):
    """A request got no response in time, or the transport failed."""


def _seconds(timeout: timedelta | float, field_name: str) -> float:
    return require_seconds(timeout, field_name)


class NetworkClient:
    """Submits requests to ensembles over `transport` and waits for their responses.

    ``await client.call("kitchen", "prepare-meal", "two omelettes")`` returns the
    `WorkResponse`; `submit` and `result` do the same in two steps. The request id is the
    idempotency key: submitting an id again does not run it again, and both callers get
    the one result.
    """

    def __init__(self, transport: Transport, *, caller: str = "client") -> None:
        if not isinstance(transport, Transport):
            raise ValidationError(
                f"NetworkClient transport must be a Transport, got: {transport!r}"
            )
        self.transport = transport
        self.caller = require_text(caller, "NetworkClient caller must not be blank")

    def __repr__(self) -> str:
        return f"NetworkClient({self.transport!r})"

    async def submit(
        self,
        ensemble: str,
        task: str,
        context: str | None = None,
        *,
        request_id: str | None = None,
        priority: Priority = Priority.NORMAL,
        deadline: timedelta | None = None,
    ) -> str:
        """Queue a request for `ensemble`'s shared task or tool `task` and return its id."""
        request = WorkRequest(
            request_id=request_id or str(uuid.uuid4()),
            from_=self.caller,
            task=task,
            context=context,
            priority=priority,
            deadline=deadline,
        )
        await self.transport.send(request, to=require_text(ensemble, "ensemble must not be blank"))
        return request.request_id

    async def result(self, request_id: str, timeout: timedelta | float) -> WorkResponse:
        """The response to `request_id`; `NetworkError` when none comes within `timeout`."""
        seconds = _seconds(timeout, "result() timeout")
        response = await self.transport.result(request_id, seconds)
        if response is None:
            raise NetworkError(f"No response to request '{request_id}' within {seconds:g} s")
        return response

    async def call(
        self,
        ensemble: str,
        task: str,
        context: str | None = None,
        *,
        timeout: timedelta | float = DEFAULT_TIMEOUT,
        request_id: str | None = None,
        priority: Priority = Priority.NORMAL,
    ) -> WorkResponse:
        """`submit` then `result`. The request's deadline is `timeout`, so the other side
        stops working on it when it expires; the caller waits `DEADLINE_GRACE` seconds more
        for the response saying so."""
        seconds = _seconds(timeout, "call() timeout")
        request_id = await self.submit(
            ensemble,
            task,
            context,
            request_id=request_id,
            priority=priority,
            deadline=timedelta(seconds=seconds),
        )
        return await self.result(request_id, seconds + DEADLINE_GRACE)

    async def events(
        self, request_id: str, timeout: timedelta | float = DEFAULT_TIMEOUT
    ) -> AsyncIterator[Event]:
        """The events of the run answering `request_id` as they happen (``async for``),
        ending once the response is there; `NetworkError` when it is not within `timeout`.
        ``ExecutionTrace.from_events`` folds them into the run's trace. A shared tool's
        request has no run, so no events."""
        from agentensemble.observability import parse_event

        seconds = _seconds(timeout, "events() timeout")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        cursor: str | None = None
        while True:
            wait = max(0.0, min(_FOLLOW_WAIT, deadline - loop.time()))
            batch, cursor = await self.transport.read_events(request_id, cursor, wait)
            for data in batch:
                yield parse_event(data)
            if batch:
                continue
            # Every event is logged before the response is stored: once it is, read the rest.
            if await self.transport.result(request_id, 0) is not None:
                rest, cursor = await self.transport.read_events(request_id, cursor, 0)
                for data in rest:
                    yield parse_event(data)
                return
            if loop.time() >= deadline:
                raise NetworkError(f"No response to request '{request_id}' within {seconds:g} s")


class _RemoteTool:
    """What `NetworkTask` and `NetworkTool` share: an `AgentTool` whose input is sent as a
    request, and whose result is the response's text (a failure the model can read when
    the other side failed, is down, or did not answer in time)."""

    _DESCRIPTION = ""
    """The tool's description for the model, from `ensemble` and `name`, unless given."""

    def __init__(
        self,
        ensemble_name: str,
        task_name: str,
        *,
        transport: Transport,
        timeout: timedelta | float = DEFAULT_TIMEOUT,
        description: str | None = None,
    ) -> None:
        """`task_name` names the other ensemble's shared task or tool; `timeout` bounds
        each call (it is the request's deadline too)."""
        kind = type(self).__name__
        self.ensemble_name = require_text(ensemble_name, f"{kind} ensemble_name must not be blank")
        self.task_name = require_text(task_name, f"{kind} task_name must not be blank")
        self.timeout = _seconds(timeout, f"{kind} timeout")
        self.client = NetworkClient(transport, caller=f"{kind}:{task_name}")
        self.name = task_name.replace("-", "_").replace(" ", "_")
        self.description = description or self._DESCRIPTION.format(
            ensemble=ensemble_name, name=task_name
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.ensemble_name!r}, {self.task_name!r})"

    async def execute(self, input: str) -> ToolResult:
        """Send `input` and wait for the response."""
        try:
            response = await self.client.call(
                self.ensemble_name, self.task_name, input, timeout=self.timeout
            )
        except NetworkError as error:
            return ToolResult.failure(f"{error} (ensemble '{self.ensemble_name}')")
        except Exception as error:  # the transport is down: tell the model, do not hang
            return ToolResult.failure(
                f"Could not reach ensemble '{self.ensemble_name}': {type(error).__name__}: {error}"
            )
        if response.status is ResponseStatus.COMPLETED:
            return ToolResult.success(response.result or "")
        return ToolResult.failure(
            f"Ensemble '{self.ensemble_name}' answered {response.status}: {response.error}"
        )


class NetworkTask(_RemoteTool):
    """A shared task of another ensemble as a tool: the agent's input is the request text.

    ``Agent(..., tools=[NetworkTask("kitchen", "prepare-meal", transport=transport)])``.
    """

    _DESCRIPTION = (
        "Ask ensemble '{ensemble}' to do its task '{name}'; the input is the request, in words."
    )


class NetworkTool(_RemoteTool):
    """A shared tool of another ensemble as a tool: the agent's input is the JSON object of
    the tool's arguments."""

    _DESCRIPTION = (
        "Call tool '{name}' of ensemble '{ensemble}'; the input is a JSON object of its arguments."
    )
