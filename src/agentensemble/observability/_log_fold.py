"""`LogFold`: a run's log lines, written from its events (loggers ``agentensemble.task`` and
``agentensemble.agent``). The engine logs nothing about a task by itself: each line is
this fold's reading of one event, inside the task's log context."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from agentensemble._logging import get_logger
from agentensemble.observability._events import (
    DelegationFailedEvent,
    DelegationStartedEvent,
    GuardrailCheckedEvent,
    LlmIterationCompletedEvent,
    MemoryOperationEvent,
    ReviewDecidedEvent,
    ReviewRequestedEvent,
    ReviewTimedOutEvent,
    TaskCompleteEvent,
    TaskInputEvent,
    TaskStartEvent,
    ToolCallEvent,
)

__all__ = ["LogFold", "truncate_for_log"]

agent_logger = get_logger("agentensemble.agent")
task_logger = get_logger("agentensemble.task")
guardrail_logger = get_logger("agentensemble.guardrails")


def truncate_for_log(text: str, limit: int) -> str:
    """Cut text for a log line: -1 keeps it all, 0 shows nothing."""
    if limit < 0 or len(text) <= limit:
        return text
    return "" if limit == 0 else f"{text[:limit]}..."


class LogFold:
    """Writes one run's log lines. `verbose`: prompts and answers at INFO (else DEBUG), for
    every agent when the run is verbose, else for the agents whose role is in
    `verbose_roles`; `tool_log_truncate_length` cuts tool input and output."""

    def __init__(
        self,
        *,
        verbose: bool = False,
        verbose_roles: frozenset[str] = frozenset(),
        tool_log_truncate_length: int = 200,
    ) -> None:
        self._verbose = verbose
        self._verbose_roles = verbose_roles
        self._truncate = tool_log_truncate_length
        chatty = agent_logger.isEnabledFor(logging.DEBUG) or task_logger.isEnabledFor(logging.INFO)
        self._handlers = _HANDLERS if chatty else _WARNINGS

    @property
    def handlers(self) -> Mapping[type[Any], Callable[[LogFold, Any], None]]:
        """The events that have a log line at the loggers' current levels."""
        return self._handlers

    def _is_verbose(self, role: str) -> bool:
        return self._verbose or role in self._verbose_roles

    def _task_started(self, event: TaskStartEvent) -> None:
        if task_logger.isEnabledFor(logging.INFO):
            task_logger.info(
                "Task %d/%d starting | Description: %s | Agent: %s",
                event.task_index,
                event.total_tasks,
                event.task_description[:80],
                event.agent_role,
            )

    def _task_completed(self, event: TaskCompleteEvent) -> None:
        if task_logger.isEnabledFor(logging.INFO):
            task_logger.info(
                "Task %d/%d completed | Duration: %s | Tool calls: %d",
                event.task_index,
                event.total_tasks,
                event.duration,
                event.tool_call_count,
            )

    def _prompts(self, event: TaskInputEvent) -> None:
        if self._is_verbose(event.agent_role):
            agent_logger.info("System prompt:\n%s", event.system_prompt)
            agent_logger.info("User prompt:\n%s", event.user_prompt)
        elif agent_logger.isEnabledFor(logging.DEBUG):
            system, user = event.system_prompt, event.user_prompt
            agent_logger.debug("System prompt (%d chars):\n%s", len(system), system)
            agent_logger.debug("User prompt (%d chars):\n%s", len(user), user)

    def _answer(self, event: LlmIterationCompletedEvent) -> None:
        text = event.response_text
        final = event.response_type == "FINAL_ANSWER"
        if final and text and text.strip() and self._is_verbose(event.agent_role):
            agent_logger.info("Agent response:\n%s", text)

    def _tool_called(self, event: ToolCallEvent) -> None:
        if event.outcome == "SKIPPED_MAX_ITERATIONS":
            return
        success = event.outcome == "SUCCESS"
        level = logging.INFO if success else logging.WARNING
        if not agent_logger.isEnabledFor(level):
            return
        agent_logger.log(
            level,
            "[%s] Tool %s: %s(%s) -> %s [%dms]",
            event.agent_role,
            "call" if success else "error",
            event.tool_name,
            truncate_for_log(event.tool_arguments, self._truncate),
            truncate_for_log(event.tool_result, self._truncate),
            round(event.duration.total_seconds() * 1000),
        )

    def _delegation_started(self, event: DelegationStartedEvent) -> None:
        agent_logger.info(
            "[%s] Delegating to '%s' (depth %d): %s",
            event.delegating_agent_role,
            event.worker_role,
            event.delegation_depth,
            event.task_description[:80],
        )

    def _delegation_failed(self, event: DelegationFailedEvent) -> None:
        if event.error_type is None:
            agent_logger.info(
                "[%s] Delegation to '%s' refused: %s",
                event.delegating_agent_role,
                event.worker_role,
                event.failure_reason,
            )
        else:
            agent_logger.warning("[%s] %s", event.delegating_agent_role, event.failure_reason)

    def _memory_operation(self, event: MemoryOperationEvent) -> None:
        agent_logger.debug(
            "[%s] Memory %s%s: %d entries",
            event.agent_role,
            event.operation,
            f" {event.scope}" if event.scope else "",
            event.entry_count,
        )

    def _guardrail_checked(self, event: GuardrailCheckedEvent) -> None:
        if not event.passed:
            guardrail_logger.warning(
                "[%s] %s guardrail %s rejected task '%s': %s",
                event.agent_role,
                event.guardrail_type,
                event.guardrail,
                event.task_description[:80],
                event.reason,
            )

    def _review_requested(self, event: ReviewRequestedEvent) -> None:
        task_logger.info(
            "Review %s requested (%s%s)",
            event.review_id[:8],
            event.timing,
            f", tool '{event.tool_name}'" if event.tool_name else "",
        )

    def _review_decided(self, event: ReviewDecidedEvent) -> None:
        if event.decision == "NONE":
            task_logger.info("Review %s ended without a decision", event.review_id[:8])
        else:
            task_logger.info("Review %s decided: %s", event.review_id[:8], event.decision)

    def _review_timed_out(self, event: ReviewTimedOutEvent) -> None:
        task_logger.warning(
            "Review %s got no decision in time: %s", event.review_id[:8], event.action
        )


_HANDLERS: dict[type[Any], Callable[[LogFold, Any], None]] = {
    GuardrailCheckedEvent: LogFold._guardrail_checked,
    TaskStartEvent: LogFold._task_started,
    TaskCompleteEvent: LogFold._task_completed,
    TaskInputEvent: LogFold._prompts,
    LlmIterationCompletedEvent: LogFold._answer,
    ToolCallEvent: LogFold._tool_called,
    DelegationStartedEvent: LogFold._delegation_started,
    DelegationFailedEvent: LogFold._delegation_failed,
    MemoryOperationEvent: LogFold._memory_operation,
    ReviewRequestedEvent: LogFold._review_requested,
    ReviewDecidedEvent: LogFold._review_decided,
    ReviewTimedOutEvent: LogFold._review_timed_out,
}
"""The events that have a log line."""

_WARNINGS: dict[type[Any], Callable[[LogFold, Any], None]] = {
    kind: _HANDLERS[kind]
    for kind in (ToolCallEvent, DelegationFailedEvent, GuardrailCheckedEvent, ReviewTimedOutEvent)
}
"""The events that may log a warning: all a run looks at when its loggers are quieter than
INFO (the common case, where logging is not configured)."""
