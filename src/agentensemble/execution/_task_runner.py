"""Run one planned task with its events and log context. Shared by every workflow."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta

from agentensemble._logging import get_logger, task_log_context
from agentensemble.errors import TaskExecutionError
from agentensemble.execution._agent_loop import AgentRun, execute_agent
from agentensemble.execution._context import ExecutionContext
from agentensemble.execution._handler import execute_handler
from agentensemble.execution._planning import PlannedTask
from agentensemble.observability._events import (
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskStartEvent,
)
from agentensemble.outputs import TaskOutput
from agentensemble.task import Task

__all__ = ["context_outputs", "run_task"]

logger = get_logger("agentensemble.task")


def context_outputs(
    planned: PlannedTask, completed: Mapping[Task, TaskOutput], *, strict: bool
) -> tuple[TaskOutput, ...]:
    """Outputs of the task's context tasks, in declared order.

    `strict` raises when one is missing (sequential runs); otherwise missing ones are skipped.
    """
    found = []
    for dependency in planned.source.context:
        output = completed.get(dependency)
        if output is not None:
            found.append(output)
        elif strict:
            raise TaskExecutionError(
                f"Context task not yet completed: {dependency.description}",
                task_description=dependency.description,
                agent_role=dependency.agent.role if dependency.agent else "",
                completed_outputs=tuple(completed.values()),
            )
    return tuple(found)


async def run_task(
    planned: PlannedTask, context: Sequence[TaskOutput], ctx: ExecutionContext
) -> TaskOutput:
    """Execute one task, firing start/complete/failed events. Failures are re-raised as is."""
    total = planned.total
    with task_log_context(planned.index, total, planned.description, planned.role):
        logger.info(
            "Task %d/%d starting | Description: %s | Agent: %s",
            planned.index,
            total,
            planned.description[:80],
            planned.role,
        )
        if ctx.events.wants("on_task_start"):
            await ctx.events.emit(_start_event(planned, total, ctx.ensemble_id))
        started = time.perf_counter()
        try:
            output = await _execute(planned, context, ctx)
        except Exception as error:
            elapsed = timedelta(seconds=time.perf_counter() - started)
            if ctx.events.wants("on_task_failed"):
                failed = _failed_event(planned, total, error, elapsed, ctx.ensemble_id)
                await ctx.events.emit(failed)
            raise
        logger.info(
            "Task %d/%d completed | Duration: %s | Tool calls: %d",
            planned.index,
            total,
            output.duration,
            output.tool_call_count,
        )
        if ctx.events.wants("on_task_complete"):
            await ctx.events.emit(_complete_event(planned, total, output, ctx.ensemble_id))
        return output


async def _execute(
    planned: PlannedTask, context: Sequence[TaskOutput], ctx: ExecutionContext
) -> TaskOutput:
    if planned.agent is None:
        handler = planned.source.handler
        if handler is None:  # planning gives every task an agent or a handler
            raise AssertionError("planned task has neither agent nor handler")
        return await execute_handler(
            handler, planned.description, planned.expected_output, context, index=planned.index
        )
    run = AgentRun(
        agent=planned.agent,
        description=planned.description,
        expected_output=planned.expected_output,
        context=tuple(context),
        task_index=planned.index,
        tools=planned.agent.tool_set,
        ctx=ctx,
    )
    return await execute_agent(run)


def _start_event(planned: PlannedTask, total: int, run_id: str) -> TaskStartEvent:
    return TaskStartEvent(
        task_description=planned.description,
        agent_role=planned.role,
        task_index=planned.index,
        total_tasks=total,
        ensemble_id=run_id,
    )


def _complete_event(
    planned: PlannedTask, total: int, output: TaskOutput, run_id: str
) -> TaskCompleteEvent:
    return TaskCompleteEvent(
        task_description=planned.description,
        agent_role=planned.role,
        task_output=output,
        duration=output.duration,
        task_index=planned.index,
        total_tasks=total,
        ensemble_id=run_id,
    )


def _failed_event(
    planned: PlannedTask, total: int, error: BaseException, elapsed: timedelta, run_id: str
) -> TaskFailedEvent:
    return TaskFailedEvent(
        task_description=planned.description,
        agent_role=planned.role,
        cause=error,
        duration=elapsed,
        task_index=planned.index,
        total_tasks=total,
        ensemble_id=run_id,
    )
