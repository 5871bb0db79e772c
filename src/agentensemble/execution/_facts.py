"""`CapabilityFacts`: the events a task's capabilities report (delegations, memory,
reviews), and the way a fact of a task becomes an event (`_emit`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from agentensemble.observability._events import (
    DelegationCompletedEvent,
    DelegationFailedEvent,
    DelegationStartedEvent,
    Event,
    GuardrailCheckedEvent,
    MemoryOperationEvent,
    ReviewDecidedEvent,
    ReviewRequestedEvent,
    ReviewTimedOutEvent,
    TaskEvent,
    TaskIds,
    task_event_maker,
    task_id_fields,
    task_ids,
)
from agentensemble.observability._json import json_data

if TYPE_CHECKING:
    from agentensemble.delegation import DelegationRequest, DelegationResponse
    from agentensemble.execution._context import TaskContext
    from agentensemble.review import ReviewDecision, ReviewRequest

__all__ = ["CapabilityFacts", "failure_reason", "review_request_fields"]


def failure_reason(error: BaseException) -> str:
    """An error's message for events and the wire: its text, else its class name."""
    try:
        return str(error) or type(error).__name__
    except Exception:  # an exception whose __str__ fails
        return type(error).__name__


class CapabilityFacts:
    """One task execution's identity on its events, and the facts its capabilities report."""

    __slots__ = ("_ids", "events", "role", "task")

    def __init__(self, task: TaskContext) -> None:
        self.task = task
        self.events = task.run.events
        planned = task.planned
        self.role = planned.role
        self._ids = task_ids(
            ensemble_id=task.run.run_id,
            task_id=task.task_id,
            parent_task_id=task.parent_task_id,
            task_index=planned.index,
            task_description=planned.description,
            agent_role=self.role,
        )

    def _emit(
        self,
        kind: type[TaskEvent],
        ids: TaskIds | None = None,
        timestamp: datetime | None = None,
        **fields: Any,
    ) -> Awaitable[None]:
        """Emit one event of the task: the task's ids (or `ids`), the next `seq`,
        `timestamp` (else now), then `fields`. The folds see it at once; await the result to
        deliver it to the listeners. (The events every task emits call their maker directly
        instead: passing the fields on by keyword costs about 1 µs per event.)"""
        events = self.events
        event = task_event_maker(kind)(
            ids or self._ids, events.next_seq(), timestamp or datetime.now(UTC), **fields
        )
        return events.emit(cast("Event", event))  # every concrete task event is an `Event`

    # ---- delegation ------------------------------------------------------------------------

    async def delegation_started(
        self,
        delegation_id: str,
        request: DelegationRequest,
        worker_role: str,
        depth: int,
        tool_call_id: str | None,
    ) -> None:
        await self._emit_delegation(
            DelegationStartedEvent,
            delegation_id,
            worker_role=worker_role,
            task_description=request.task_description,
            delegation_depth=depth,
            tool_call_id=tool_call_id,
            priority=request.priority.value,
            scope=json_data(dict(request.scope)),
            expected_output_schema=request.expected_output_schema,
        )

    async def delegation_completed(self, delegation_id: str, response: DelegationResponse) -> None:
        parsed = response.parsed_output
        await self._emit_delegation(
            DelegationCompletedEvent,
            delegation_id,
            worker_role=response.worker_role,
            duration=response.duration,
            status=response.status.value,
            raw_output=response.raw_output,
            parsed_output=None if parsed is None else json_data(parsed),
        )

    async def delegation_failed(
        self,
        delegation_id: str,
        request: DelegationRequest,
        response: DelegationResponse,
        cause: BaseException | None,
    ) -> None:
        """A refused attempt (`cause` None) or a worker that failed."""
        await self._emit_delegation(
            DelegationFailedEvent,
            delegation_id,
            task_description=request.task_description,
            worker_role=response.worker_role,
            failure_reason=response.errors[0] if response.errors else "",
            error_type=None if cause is None else type(cause).__name__,
            status=response.status.value,
            errors=response.errors,
            duration=response.duration,
        )

    def _emit_delegation(
        self, kind: Callable[..., Event], delegation_id: str, **fields: Any
    ) -> Awaitable[None]:
        return self.events.emit(
            kind(
                seq=self.events.next_seq(),
                ensemble_id=self.task.run.run_id,
                task_id=self.task.task_id,
                delegation_id=delegation_id,
                delegating_agent_role=self.role,
                **fields,
            )
        )

    # ---- memory ----------------------------------------------------------------------------

    async def memory_operation(
        self, operation: str, scope: str | None, entry_count: int, started: float
    ) -> None:
        """A memory read or write that began at `started` (``time.perf_counter()``)."""
        await self._emit(
            MemoryOperationEvent,
            operation=operation,
            scope=scope,
            entry_count=entry_count,
            duration=timedelta(seconds=time.perf_counter() - started),
        )

    # ---- guardrails ------------------------------------------------------------------------

    async def guardrail_checked(
        self, guardrail_type: str, guardrail: str, reason: str | None, started: float
    ) -> None:
        """A guardrail's verdict (`reason` None: it passed), checked from `started`."""
        await self._emit(
            GuardrailCheckedEvent,
            guardrail_type=guardrail_type,
            guardrail=guardrail,
            passed=reason is None,
            reason=reason,
            duration=timedelta(seconds=time.perf_counter() - started),
        )

    # ---- reviews ---------------------------------------------------------------------------

    async def review_requested(self, request: ReviewRequest) -> None:
        await self._emit(
            ReviewRequestedEvent,
            self._review_ids(request),
            **review_request_fields(request),
        )

    async def review_decided(
        self, request: ReviewRequest, decision: ReviewDecision | None, seconds: float
    ) -> None:
        """A decision; None when the review ended without one (cancelled, or its handler
        failed)."""
        await self._emit(
            ReviewDecidedEvent,
            self._review_ids(request),
            review_id=request.review_id,
            decision="NONE" if decision is None else decision.kind,
            revised_output=getattr(decision, "revised_output", None),
            duration=timedelta(seconds=seconds),
        )

    async def review_timed_out(self, request: ReviewRequest, seconds: float) -> None:
        await self._emit(
            ReviewTimedOutEvent,
            self._review_ids(request),
            review_id=request.review_id,
            action=request.on_timeout.value,
            duration=timedelta(seconds=seconds),
        )

    def _review_ids(self, request: ReviewRequest) -> TaskIds:
        """A review's task: the one under review (a gate before a task, say)."""
        fields = task_id_fields(self._ids)
        fields.update(task_id=request.task_id, task_description=request.task_description)
        return task_ids(**fields)


def review_request_fields(request: ReviewRequest) -> dict[str, Any]:
    """The fields of a `ReviewRequestedEvent` that its review request gives (the run's and
    task's ids aside)."""
    return {
        "review_id": request.review_id,
        "task_output": request.task_output,
        "timing": request.timing.value,
        "timeout": request.timeout,
        "on_timeout": request.on_timeout.value,
        "prompt": request.prompt,
        "required_role": request.required_role,
        "tool_name": request.tool_name,
    }
