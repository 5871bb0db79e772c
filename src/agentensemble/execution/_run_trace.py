"""The trace forms of a run's agents and failures, and handing the trace to the exporter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentensemble._calling import call_user_code
from agentensemble._frozen import direct_new
from agentensemble._logging import get_logger
from agentensemble.agent import Agent
from agentensemble.errors import (
    AgentExecutionError,
    MaxIterationsExceededError,
    ParallelExecutionError,
    TaskExecutionError,
    describe_error,
)
from agentensemble.observability._exporters import TraceExporter
from agentensemble.observability._trace import (
    AgentSummary,
    ErrorTrace,
    ExecutionTrace,
)
from agentensemble.task import Task

__all__ = ["agent_summary", "errors_of", "export_trace", "task_errors"]

logger = get_logger("agentensemble.traces")


def agent_summary(agent: Agent) -> AgentSummary:
    """An agent as the trace lists it."""
    return direct_new(AgentSummary)(
        role=agent.role,
        goal=agent.goal,
        background=agent.background,
        tool_names=tuple(spec.name for spec in specs) if (specs := agent.tool_set.specs) else (),
        allow_delegation=agent.allow_delegation,
    )


def _role_of(error: BaseException) -> str:
    if isinstance(error, (AgentExecutionError, MaxIterationsExceededError)):
        return error.agent_role
    return ""


def task_errors(failures: Mapping[Task[Any], BaseException]) -> tuple[ErrorTrace, ...]:
    """Trace records of failed tasks."""
    return tuple(
        ErrorTrace(
            task_description=task.description,
            agent_role=_role_of(cause),
            error_type=type(cause).__name__,
            message=describe_error(cause),
        )
        for task, cause in failures.items()
    )


def errors_of(error: BaseException) -> tuple[ErrorTrace, ...]:
    """Trace records for a run failure: one per failed task where known."""
    if isinstance(error, ParallelExecutionError):
        return task_errors(error.failed_tasks)
    if isinstance(error, TaskExecutionError):
        cause = error.__cause__ or error
        return (
            ErrorTrace(
                task_description=error.task_description,
                agent_role=error.agent_role,
                error_type=type(cause).__name__,
                message=describe_error(cause),
            ),
        )
    return (
        ErrorTrace(
            task_description="",
            agent_role="",
            error_type=type(error).__name__,
            message=describe_error(error),
        ),
    )


async def export_trace(exporter: TraceExporter | None, trace: ExecutionTrace) -> None:
    """Hand `trace` to `exporter`; a failing exporter is logged, never raised."""
    if exporter is None:
        return
    try:
        await call_user_code(exporter.export, trace)
    except Exception:
        logger.warning(
            "Trace exporter %r failed for run %s", exporter, trace.ensemble_id, exc_info=True
        )
