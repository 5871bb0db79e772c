"""A saved run's events, rebuilt from its trace, so the page shows it as it shows a live one."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from agentensemble.observability._events import (
    DelegationCompletedEvent,
    DelegationFailedEvent,
    DelegationStartedEvent,
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    LlmIterationCompletedEvent,
    PlanNode,
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskInputEvent,
    TaskStartEvent,
    ToolCallEvent,
)

if TYPE_CHECKING:
    from agentensemble.observability._events import Event
    from agentensemble.observability._trace import DelegationTrace, ExecutionTrace, TaskTrace

__all__ = ["trace_events"]


def trace_events(trace: ExecutionTrace) -> list[Event]:
    """The events a run with this trace emitted, as far as the trace records them (task
    ids are made up: ``task-1``, ``task-2`` ...; tokens and model-call starts are not kept)."""
    seq = itertools.count(1).__next__
    ids = (f"task-{n}" for n in itertools.count(1))
    tasks = sorted(
        (*trace.task_traces, *trace.failed_tasks),
        key=lambda task: (task.started_at, task.task_index),
    )
    events: list[Event] = [
        EnsembleStartedEvent(
            ensemble_id=trace.ensemble_id,
            seq=seq(),
            timestamp=trace.started_at,
            workflow=trace.workflow,
            total_tasks=len(tasks),
            capture_mode=trace.capture_mode,
            inputs=dict(trace.inputs),
            plan=_plan(trace, tasks),
        )
    ]
    goals = {agent.role: agent.goal for agent in trace.agents}
    for task in tasks:
        events.extend(_task_events(trace, task, None, next(ids), ids, seq, goals))
    metrics = trace.metrics
    events.append(
        EnsembleCompletedEvent(
            ensemble_id=trace.ensemble_id,
            seq=seq(),
            timestamp=trace.completed_at,
            duration=trace.total_duration,
            exit_reason=trace.exit_reason,
            total_tokens=metrics.total_tokens,
            total_tool_calls=metrics.total_tool_calls,
            agents=trace.agents,
            errors=trace.errors,
        )
    )
    return events


def _plan(trace: ExecutionTrace, tasks: list[TaskTrace]) -> tuple[PlanNode, ...]:
    chained = trace.workflow == "SEQUENTIAL"
    ordered = sorted({task.task_index: task for task in tasks}.values(), key=lambda t: t.task_index)
    return tuple(
        PlanNode(
            task_index=task.task_index,
            description=task.task_description,
            agent_role=task.agent_role,
            name=task.name,
            depends_on=(ordered[position - 1].task_index,) if chained and position else (),
        )
        for position, task in enumerate(ordered)
    )


def _task_events(
    trace: ExecutionTrace,
    task: TaskTrace,
    parent: str | None,
    task_id: str,
    ids: Iterator[str],
    seq: Callable[[], int],
    goals: dict[str, str],
) -> Iterator[Event]:
    same: dict[str, Any] = {
        "ensemble_id": trace.ensemble_id,
        "task_id": task_id,
        "parent_task_id": parent,
        "task_index": task.task_index,
        "task_description": task.task_description,
        "agent_role": task.agent_role,
    }
    total = len(trace.task_traces) + len(trace.failed_tasks)
    yield TaskStartEvent(
        **same,
        seq=seq(),
        timestamp=task.started_at,
        total_tasks=total,
        expected_output=task.expected_output,
        name=task.name,
    )
    if task.prompts is not None:
        yield TaskInputEvent(
            **same,
            seq=seq(),
            timestamp=task.started_at,
            expected_output=task.expected_output,
            agent_goal=goals.get(task.agent_role, ""),
            system_prompt=task.prompts.system,
            user_prompt=task.prompts.user,
        )
    for call in task.llm_interactions:
        yield LlmIterationCompletedEvent(
            **same,
            seq=seq(),
            timestamp=call.completed_at,
            iteration_index=call.iteration_index,
            response_type=call.response_type,
            response_text=call.response_text,
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            latency=call.latency,
        )
        for tool in call.tool_calls:
            yield ToolCallEvent(
                **same,
                seq=seq(),
                timestamp=tool.completed_at,
                tool_name=tool.tool_name,
                tool_arguments=tool.arguments,
                tool_result=tool.result,
                structured_result=tool.structured_output,
                duration=tool.duration,
                outcome="FAILURE" if tool.outcome == "ERROR" else tool.outcome,
                tool_call_id=tool.tool_call_id,
            )
    for delegation in task.delegations:
        yield from _delegation_events(trace, task, task_id, delegation, ids, seq, goals)
    if task.error is not None:
        yield TaskFailedEvent(
            **same,
            seq=seq(),
            timestamp=task.completed_at,
            total_tasks=total,
            duration=task.duration,
            error_type=task.error.error_type,
            reason=task.error.message,
        )
        return
    metrics = task.metrics
    yield TaskCompleteEvent(
        **same,
        seq=seq(),
        timestamp=task.completed_at,
        total_tasks=total,
        duration=task.duration,
        raw=task.final_output,
        parsed_output=task.parsed_output,
        tool_call_count=metrics.tool_call_count,
        input_tokens=metrics.input_tokens,
        output_tokens=metrics.output_tokens,
        token_count=metrics.total_tokens,
    )


def _delegation_events(
    trace: ExecutionTrace,
    task: TaskTrace,
    task_id: str,
    delegation: DelegationTrace,
    ids: Iterator[str],
    seq: Callable[[], int],
    goals: dict[str, str],
) -> Iterator[Event]:
    same: dict[str, Any] = {
        "ensemble_id": trace.ensemble_id,
        "task_id": task_id,
        "delegation_id": delegation.delegation_id,
        "delegating_agent_role": task.agent_role,
        "worker_role": delegation.worker_role,
    }
    worker = delegation.worker_trace
    yield DelegationStartedEvent(
        **same,
        seq=seq(),
        timestamp=worker.started_at if worker is not None else task.started_at,
        task_description=delegation.task_description,
        delegation_depth=1,
    )
    if worker is not None:
        yield from _task_events(trace, worker, task_id, delegation.delegation_id, ids, seq, goals)
    if delegation.status == "FAILURE":
        yield DelegationFailedEvent(
            **same,
            seq=seq(),
            failure_reason=delegation.error or "failed",
            task_description=delegation.task_description,
            duration=delegation.duration,
        )
    else:
        yield DelegationCompletedEvent(
            **same,
            seq=seq(),
            duration=delegation.duration,
            status=delegation.status,
            raw_output=delegation.raw_output,
        )
