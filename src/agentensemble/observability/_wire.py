"""`serialize_event`: every event as its JSON-safe wire message, from this one place.

The messages are the live dashboard's protocol: a ``type`` discriminator, camelCase fields,
ISO-8601 instants, durations in milliseconds, fields that are None left out. Our own ids
are added to every message: ``ensembleId``, and on task-scoped messages ``taskId`` and
``parentTaskId``. Task outputs and errors are summarized, never embedded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentensemble.models import Message, ToolCall
    from agentensemble.observability._events import (
        DelegationCompletedEvent,
        DelegationFailedEvent,
        DelegationStartedEvent,
        EnsembleCompletedEvent,
        EnsembleStartedEvent,
        Event,
        LlmIterationCompletedEvent,
        LlmIterationStartedEvent,
        MemoryOperationEvent,
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

__all__ = ["serialize_event"]

_CONTEXT_LIMIT = 8000
_MESSAGES_SHOWN = 20


def serialize_event(event: Event) -> dict[str, Any]:
    """The wire message of `event`: a dict that `json.dumps` accepts as it is."""
    wire_type, build = _BUILDERS[event.type]
    message: dict[str, Any] = {"type": wire_type, "ensembleId": event.ensemble_id}
    message.update(build(event))
    return {key: value for key, value in message.items() if value is not None}


def _ms(duration: timedelta) -> int:
    return round(duration.total_seconds() * 1000)


def _at(moment: datetime) -> str:
    return moment.isoformat()


def _json_safe(value: object) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=repr, inf_nan_mode="null", bytes_mode="base64")


def _task_ids(task_id: str, parent_task_id: str | None) -> dict[str, Any]:
    return {"taskId": task_id or None, "parentTaskId": parent_task_id}


def _reason(error: BaseException | None) -> str | None:
    if error is None:
        return None
    try:
        return str(error) or type(error).__name__
    except Exception:  # an exception whose __str__ fails
        return type(error).__name__


def _ensemble_started(event: EnsembleStartedEvent) -> dict[str, Any]:
    return {
        "startedAt": _at(event.timestamp),
        "totalTasks": event.total_tasks,
        "workflow": event.workflow,
        "name": event.name,
    }


def _ensemble_completed(event: EnsembleCompletedEvent) -> dict[str, Any]:
    return {
        "completedAt": _at(event.timestamp),
        "durationMs": _ms(event.duration),
        "exitReason": event.exit_reason,
        "totalTokens": event.total_tokens,
        "totalToolCalls": event.total_tool_calls,
        "reason": _reason(event.error),
    }


def _task_started(event: TaskStartEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "taskIndex": event.task_index,
        "totalTasks": event.total_tasks,
        "taskDescription": event.task_description,
        "agentRole": event.agent_role,
        "startedAt": _at(event.timestamp),
    }


def _task_input(event: TaskInputEvent) -> dict[str, Any]:
    context = event.user_prompt
    if len(context) > _CONTEXT_LIMIT:
        context = context[:_CONTEXT_LIMIT] + "... [truncated]"
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "taskIndex": event.task_index,
        "taskDescription": event.task_description,
        "expectedOutput": event.expected_output,
        "agentRole": event.agent_role,
        "agentGoal": event.agent_goal,
        "agentBackground": event.agent_background,
        "toolNames": list(event.tool_names),
        "assembledContext": context,
        "sentAt": _at(event.timestamp),
    }


def _task_completed(event: TaskCompleteEvent) -> dict[str, Any]:
    output = event.task_output
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "taskIndex": event.task_index,
        "totalTasks": event.total_tasks,
        "taskDescription": event.task_description,
        "agentRole": event.agent_role,
        "completedAt": _at(event.timestamp),
        "durationMs": _ms(event.duration),
        "tokenCount": output.metrics.total_tokens,
        "toolCallCount": output.tool_call_count,
    }


def _task_failed(event: TaskFailedEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "taskIndex": event.task_index,
        "taskDescription": event.task_description,
        "agentRole": event.agent_role,
        "failedAt": _at(event.timestamp),
        "durationMs": _ms(event.duration),
        "reason": _reason(event.cause),
    }


def _tool_called(event: ToolCallEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "agentRole": event.agent_role,
        "taskIndex": event.task_index,
        "toolName": event.tool_name,
        "toolCallId": event.tool_call_id or None,
        "durationMs": _ms(event.duration),
        "outcome": event.outcome,
        "toolArguments": event.tool_arguments,
        "toolResult": event.tool_result,
        "structuredResult": _json_safe(event.structured_result),
        "timestamp": _at(event.timestamp),
    }


def _token(event: TokenEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "token": event.token,
        "agentRole": event.agent_role,
        "taskDescription": event.task_description,
        "sentAt": _at(event.timestamp),
    }


def _message(message: Message) -> dict[str, Any]:
    role = {"system": "system", "user": "user", "assistant": "assistant"}.get(message.type, "tool")
    wire: dict[str, Any] = {"role": role, "content": message.text}
    if message.type == "assistant" and message.tool_calls:
        wire["toolCalls"] = _tool_requests(message.tool_calls)
    if message.type == "tool_result":
        wire["toolName"] = message.tool_name
    return wire


def _tool_requests(calls: Sequence[ToolCall]) -> list[dict[str, str]]:
    return [{"name": call.name, "arguments": call.arguments} for call in calls]


def _llm_iteration_started(event: LlmIterationStartedEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "agentRole": event.agent_role,
        "taskDescription": event.task_description,
        "iterationIndex": event.iteration_index,
        "modelName": event.model_name,
        "messages": [_message(m) for m in event.messages[-_MESSAGES_SHOWN:]],
        "totalMessageCount": len(event.messages),
        "timestamp": _at(event.timestamp),
    }


def _llm_iteration_completed(event: LlmIterationCompletedEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "agentRole": event.agent_role,
        "taskDescription": event.task_description,
        "iterationIndex": event.iteration_index,
        "responseType": event.response_type,
        "responseText": event.response_text,
        "toolRequests": _tool_requests(event.tool_requests),
        "inputTokens": event.input_tokens,
        "outputTokens": event.output_tokens,
        "latencyMs": _ms(event.latency),
        "modelName": event.model_name,
        "timestamp": _at(event.timestamp),
    }


def _delegation_started(event: DelegationStartedEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, None),
        "delegationId": event.delegation_id,
        "delegatingAgentRole": event.delegating_agent_role,
        "workerRole": event.worker_role,
        "taskDescription": event.task_description,
        "delegationDepth": event.delegation_depth,
        "toolCallId": event.tool_call_id,
        "timestamp": _at(event.timestamp),
    }


def _delegation_completed(event: DelegationCompletedEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, None),
        "delegationId": event.delegation_id,
        "delegatingAgentRole": event.delegating_agent_role,
        "workerRole": event.worker_role,
        "durationMs": _ms(event.duration),
        "timestamp": _at(event.timestamp),
    }


def _delegation_failed(event: DelegationFailedEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, None),
        "delegationId": event.delegation_id,
        "delegatingAgentRole": event.delegating_agent_role,
        "workerRole": event.worker_role,
        "reason": event.failure_reason,
        "durationMs": _ms(event.duration),
        "timestamp": _at(event.timestamp),
    }


def _review_requested(event: ReviewRequestedEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "reviewId": event.review_id,
        "taskDescription": event.task_description,
        "taskOutput": event.task_output or "",
        "timing": event.timing,
        "prompt": event.prompt,
        "timeoutMs": _ms(event.timeout),
        "onTimeout": event.on_timeout,
        "requiredRole": event.required_role,
        "toolName": event.tool_name,
        "timestamp": _at(event.timestamp),
    }


def _review_decided(event: ReviewDecidedEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "reviewId": event.review_id,
        "decision": event.decision,
        "revisedOutput": event.revised_output,
        "durationMs": _ms(event.duration),
        "timestamp": _at(event.timestamp),
    }


def _review_timed_out(event: ReviewTimedOutEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "reviewId": event.review_id,
        "action": event.action,
        "durationMs": _ms(event.duration),
        "timestamp": _at(event.timestamp),
    }


def _memory_operation(event: MemoryOperationEvent) -> dict[str, Any]:
    return {
        **_task_ids(event.task_id, event.parent_task_id),
        "agentRole": event.agent_role,
        "taskIndex": event.task_index,
        "operation": event.operation,
        "scope": event.scope,
        "entryCount": event.entry_count,
        "durationMs": _ms(event.duration),
        "timestamp": _at(event.timestamp),
    }


_BUILDERS: dict[str, tuple[str, Callable[[Any], dict[str, Any]]]] = {
    "ensemble_started": ("ensemble_started", _ensemble_started),
    "ensemble_completed": ("ensemble_completed", _ensemble_completed),
    "task_start": ("task_started", _task_started),
    "task_input": ("task_input", _task_input),
    "task_complete": ("task_completed", _task_completed),
    "task_failed": ("task_failed", _task_failed),
    "tool_call": ("tool_called", _tool_called),
    "token": ("token", _token),
    "llm_iteration_started": ("llm_iteration_started", _llm_iteration_started),
    "llm_iteration_completed": ("llm_iteration_completed", _llm_iteration_completed),
    "delegation_started": ("delegation_started", _delegation_started),
    "delegation_completed": ("delegation_completed", _delegation_completed),
    "delegation_failed": ("delegation_failed", _delegation_failed),
    "review_requested": ("review_requested", _review_requested),
    "review_decided": ("review_decided", _review_decided),
    "review_timed_out": ("review_timed_out", _review_timed_out),
    "memory_operation": ("memory_operation", _memory_operation),
}
