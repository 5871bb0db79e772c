"""`ToolContext`: which run, task and depth a tool call belongs to."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ToolContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """The run identity a tool receives when its first parameter is annotated `ToolContext`.

    The ids are those the run's events carry, so a tool's own logs and metrics can be joined
    with them. The parameter is never part of the tool's JSON Schema.
    """

    run_id: str
    """The run (``ensemble_id`` on every event)."""
    task_id: str
    """The task execution the call belongs to (``task_id`` on task events)."""
    parent_task_id: str | None = None
    """The delegating task's id, for a task run by delegation; else None."""
    agent_role: str
    """The role of the agent making the call."""
    task_description: str
    """The task description, templates resolved."""
    depth: int = 0
    """0 for a task of the ensemble, +1 per delegation."""
