"""Assemble a run's `ExecutionTrace` and hand it to the exporter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agentensemble._calling import call_user_code
from agentensemble._logging import get_logger
from agentensemble.agent import Agent
from agentensemble.errors import (
    AgentExecutionError,
    MaxIterationsExceededError,
    ParallelExecutionError,
    TaskExecutionError,
    describe_error,
)
from agentensemble.observability._capture import CaptureMode
from agentensemble.observability._exporters import TraceExporter
from agentensemble.observability._metrics import ExecutionMetrics, TaskMetrics
from agentensemble.observability._trace import (
    AgentSummary,
    ErrorTrace,
    ExecutionTrace,
    LlmInteraction,
)
from agentensemble.outputs import TaskOutput
from agentensemble.task import Task

__all__ = ["RunRecord", "build_trace", "errors_of", "export_trace", "task_errors"]

logger = get_logger("agentensemble.traces")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """What a run was, for its trace."""

    ensemble_id: str
    workflow: str
    capture_mode: CaptureMode
    started_at: datetime
    inputs: Mapping[str, str]
    agents: Sequence[Agent]
    synthesis: Sequence[LlmInteraction] = ()
    """Model calls made while planning."""
    synthesis_metrics: TaskMetrics | None = None


def build_trace(
    record: RunRecord,
    outputs: Sequence[TaskOutput[Any]],
    *,
    duration: timedelta,
    exit_reason: str,
    errors: Sequence[ErrorTrace] = (),
    delegated: Sequence[TaskOutput[Any]] = (),
) -> ExecutionTrace:
    """The run's trace from its completed outputs (and errors, for a failed run). The
    metrics count `delegated` outputs too (peers' workers, whose traces sit inside their
    callers' traces)."""
    task_metrics = [output.metrics for output in (*outputs, *delegated)]
    if record.synthesis_metrics is not None:
        task_metrics.append(record.synthesis_metrics)
    metrics = ExecutionMetrics.of(task_metrics)
    return ExecutionTrace(
        ensemble_id=record.ensemble_id,
        workflow=record.workflow,
        capture_mode=record.capture_mode.value,
        started_at=record.started_at,
        completed_at=record.started_at + duration,
        total_duration=duration,
        exit_reason=exit_reason,
        inputs=dict(record.inputs),
        agents=tuple(_summary(agent) for agent in record.agents),
        task_traces=tuple(output.trace for output in outputs if output.trace is not None),
        metrics=metrics,
        total_cost_estimate=metrics.total_cost_estimate,
        errors=tuple(errors),
        agent_synthesis=tuple(record.synthesis),
    )


def _summary(agent: Agent) -> AgentSummary:
    return AgentSummary(
        role=agent.role,
        goal=agent.goal,
        background=agent.background,
        tool_names=tuple(spec.name for spec in agent.tool_set.specs),
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
