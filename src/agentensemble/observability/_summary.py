"""A readable text summary of an `ExecutionTrace` (``agentensemble trace show``)."""

from __future__ import annotations

from datetime import timedelta

from agentensemble.observability._console import plural
from agentensemble.observability._trace import ExecutionTrace, TaskTrace

__all__ = ["summarize_trace"]


def summarize_trace(trace: ExecutionTrace) -> str:
    """Several lines describing the run, each task, its tool calls, totals and errors."""
    lines = [
        f"Run {trace.ensemble_id} · {trace.workflow} · {trace.exit_reason} · "
        f"{_seconds(trace.total_duration)} · capture {trace.capture_mode} · "
        f"schema {trace.schema_version}",
        f"Started {trace.started_at.isoformat()}",
    ]
    if trace.inputs:
        lines.append("Inputs: " + ", ".join(f"{k}={v}" for k, v in trace.inputs.items()))
    for agent in trace.agents:
        tools = f" (tools: {', '.join(agent.tool_names)})" if agent.tool_names else ""
        lines.append(f"Agent: {agent.role}{tools}")
    lines.append(f"Tasks ({len(trace.task_traces)}):")
    for task in trace.task_traces:
        lines.extend(_task_lines(task))
    metrics = trace.metrics
    cost = f" · cost {trace.total_cost_estimate}" if trace.total_cost_estimate is not None else ""
    lines.append(
        f"Totals: {plural(metrics.total_llm_call_count, 'model call')} · "
        f"{plural(metrics.total_tool_calls, 'tool call')} · {_tokens(metrics.total_tokens)}{cost}"
    )
    for error in trace.errors:
        lines.append(
            f"Error in '{error.task_description}' ({error.agent_role}): "
            f"{error.error_type}: {error.message}"
        )
    return "\n".join(lines)


def _task_lines(task: TaskTrace) -> list[str]:
    metrics = task.metrics
    cost = f" · cost {metrics.cost_estimate}" if metrics.cost_estimate is not None else ""
    lines = [
        f"  {task.task_index}. {task.agent_role}: {task.task_description}",
        f"     {_seconds(task.duration)} · {plural(metrics.llm_call_count, 'model call')} · "
        f"{plural(metrics.tool_call_count, 'tool call')} · {_tokens(metrics.total_tokens)}{cost}",
    ]
    for interaction in task.llm_interactions:
        for call in interaction.tool_calls:
            lines.append(
                f"     ↳ {call.tool_name}({call.arguments}) {call.outcome} "
                f"{round(call.duration.total_seconds() * 1000)} ms"
            )
    preview = task.final_output.replace("\n", " ")
    lines.append(f"     → {preview[:100]}{'…' if len(preview) > 100 else ''}")
    return lines


def _seconds(duration: timedelta) -> str:
    return f"{duration.total_seconds():.2f}s"


def _tokens(count: int) -> str:
    return "tokens unknown" if count < 0 else f"{count} tokens"
