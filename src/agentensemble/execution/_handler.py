"""Deterministic tasks: run the task's handler instead of an agent (no model, no tools)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agentensemble._calling import call_user_code
from agentensemble.errors import AgentExecutionError
from agentensemble.observability._metrics import TaskMetrics
from agentensemble.observability._trace import TaskTrace
from agentensemble.outputs import TaskOutput
from agentensemble.task import Handler
from agentensemble.tools._agent_tool import AgentTool
from agentensemble.tools._result import coerce_result, error_text

__all__ = ["DETERMINISTIC_ROLE", "HandlerContext", "execute_handler"]

DETERMINISTIC_ROLE = "(deterministic)"
"""The agent role reported for handler tasks."""


@dataclass(frozen=True, slots=True)
class HandlerContext:
    """What a handler receives."""

    description: str
    """The task description, templates resolved."""
    expected_output: str
    context_outputs: tuple[TaskOutput, ...]
    """Outputs of the task's context tasks, in declared order."""


async def execute_handler(
    handler: Handler,
    description: str,
    expected_output: str,
    context: Sequence[TaskOutput],
    *,
    index: int = 1,
) -> TaskOutput:
    """Run `handler` and turn what it returns into a `TaskOutput`.

    A handler that raises, returns None or returns a failed `ToolResult` fails the task
    with `AgentExecutionError`.
    """
    started_at, started = datetime.now(UTC), time.perf_counter()
    try:
        value = await _call(handler, HandlerContext(description, expected_output, tuple(context)))
    except Exception as error:
        raise _failure(
            f"Deterministic task handler threw an exception: {error_text(error)}", description
        ) from error
    if value is None:
        raise _failure(
            f"Deterministic task handler returned null for task: {description}", description
        )
    result = coerce_result(value)
    if not result.is_success:
        reason = result.error_message or "handler failure"
        raise _failure(f"Deterministic task failed: {reason}", description)
    duration = timedelta(seconds=time.perf_counter() - started)
    trace = TaskTrace(
        task_index=index,
        agent_role=DETERMINISTIC_ROLE,
        task_description=description,
        expected_output=expected_output,
        started_at=started_at,
        completed_at=started_at + duration,
        duration=duration,
        final_output=result.output or "",
        parsed_output=result.structured_output,
        metrics=TaskMetrics(),
    )
    return TaskOutput(
        raw=result.output or "",
        task_description=description,
        agent_role=DETERMINISTIC_ROLE,
        completed_at=trace.completed_at,
        duration=duration,
        trace=trace,
    )


async def _call(handler: Handler, context: HandlerContext) -> Any:
    if isinstance(handler, AgentTool):
        function: Any = handler.execute
        argument: Any = (
            context.context_outputs[-1].raw if context.context_outputs else (context.description)
        )
    else:
        function, argument = handler, context
    return await call_user_code(function, argument)


def _failure(message: str, description: str) -> AgentExecutionError:
    return AgentExecutionError(message, agent_role=DETERMINISTIC_ROLE, task_description=description)
