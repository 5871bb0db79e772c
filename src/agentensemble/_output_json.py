"""A run's result as JSON data, for ``agentensemble run --json`` and scripts reading it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentensemble.observability._json import json_data

if TYPE_CHECKING:
    from agentensemble.outputs import EnsembleOutput, TaskOutput

__all__ = ["output_json", "partial_json"]


def output_json(output: EnsembleOutput) -> dict[str, Any]:
    """The output's final text, exit reason, each task's output and the totals."""
    metrics = output.metrics
    return {
        "raw": output.raw,
        "exit_reason": output.exit_reason.value,
        "run_id": output.trace.ensemble_id if output.trace is not None else None,
        "duration_seconds": output.total_duration.total_seconds(),
        "task_outputs": [_task_json(task) for task in output.task_outputs],
        "warnings": list(output.warnings),
        "metrics": {
            "input_tokens": metrics.total_input_tokens,
            "output_tokens": metrics.total_output_tokens,
            "total_tokens": metrics.total_tokens,
            "model_calls": metrics.total_llm_call_count,
            "tool_calls": metrics.total_tool_calls,
            "cost": json_data(metrics.total_cost_estimate),
        },
    }


def partial_json(done: Sequence[Any], *, reason: str, error: str | None) -> dict[str, Any]:
    """What completed before a run stopped (task outputs, or task-complete events)."""
    return {
        "raw": done[-1].raw if done else "",
        "exit_reason": reason,
        "error": error,
        "task_outputs": [_task_json(item) for item in done],
    }


def _task_json(task: TaskOutput[Any] | Any) -> dict[str, Any]:
    return {
        "name": getattr(task, "name", None),
        "description": task.task_description,
        "agent_role": task.agent_role,
        "raw": task.raw,
        "parsed_output": json_data(task.parsed_output),
        "tool_calls": task.tool_call_count,
        "duration_seconds": task.duration.total_seconds(),
    }
