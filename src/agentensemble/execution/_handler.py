"""Deterministic tasks: run the task's handler instead of an agent (no model, no tools)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentensemble._calling import call_user_code
from agentensemble.errors import AgentExecutionError, describe_error
from agentensemble.outputs import TaskOutput
from agentensemble.tools._agent_tool import AgentTool
from agentensemble.tools._result import coerce_result

if TYPE_CHECKING:
    from agentensemble.execution._steps import TaskState
    from agentensemble.task import Handler

__all__ = ["DETERMINISTIC_ROLE", "HandlerContext", "run_handler"]

DETERMINISTIC_ROLE = "(deterministic)"
"""The agent role reported for handler tasks."""


@dataclass(frozen=True, slots=True)
class HandlerContext:
    """What a handler receives: the task, its context outputs and the run identity.

    Two contexts are equal when their task text and context outputs are (the ids differ
    from run to run)."""

    description: str
    """The task description, templates resolved."""
    expected_output: str
    context_outputs: tuple[TaskOutput[Any], ...]
    """Outputs of the task's context tasks, in declared order."""
    run_id: str = field(default="", compare=False)
    """The run (``ensemble_id`` on every event)."""
    task_id: str = field(default="", compare=False)
    """This task execution (``task_id`` on its events)."""
    parent_task_id: str | None = field(default=None, compare=False)
    """The delegating task's id, for a task run by delegation; else None."""
    depth: int = field(default=0, compare=False)
    """0 for a task of the ensemble, +1 per delegation."""


async def run_handler(state: TaskState) -> None:
    """The handler task step: call the handler and keep its text and structured result.

    A handler that raises, returns None or returns a failed `ToolResult` fails the task
    with `AgentExecutionError`.
    """
    task, planned = state.task, state.task.planned
    handler = planned.source.handler
    if handler is None:  # planning gives the handler path only to handler tasks
        raise AssertionError("handler step on a task without a handler")
    context = HandlerContext(
        planned.description,
        planned.expected_output,
        task.context_outputs,
        run_id=task.run.run_id,
        task_id=task.task_id,
        parent_task_id=task.parent_task_id,
        depth=task.depth,
    )
    try:
        value = await _call(handler, context)
    except Exception as error:
        raise _failure(
            f"Deterministic task handler threw an exception: {describe_error(error)}", context
        ) from error
    if value is None:
        raise _failure(
            f"Deterministic task handler returned null for task: {context.description}", context
        )
    result = coerce_result(value)
    if not result.is_success:
        reason = result.error_message or "handler failure"
        raise _failure(f"Deterministic task failed: {reason}", context)
    state.raw = result.output or ""
    if task.planned.source.output_type is not None:  # checked by check_handler_output
        state.parsed = result.structured_output


async def _call(handler: Handler, context: HandlerContext) -> Any:
    if isinstance(handler, AgentTool):
        function: Any = handler.execute
        argument: Any = (
            context.context_outputs[-1].raw if context.context_outputs else context.description
        )
    else:
        function, argument = handler, context
    return await call_user_code(function, argument)


def _failure(message: str, context: HandlerContext) -> AgentExecutionError:
    return AgentExecutionError(
        message, agent_role=DETERMINISTIC_ROLE, task_description=context.description
    )
